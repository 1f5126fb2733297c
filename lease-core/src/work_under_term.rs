//! [`WorkUnderTerm`]: work running under a leader's term, which the term's release waits for.

use std::fmt;

use futures::channel::oneshot;

/// Work running under a leader's term, from [`Leader::lease_for_work`](crate::Leader::lease_for_work):
/// until it is dropped, the campaign does not free the term's lease (neither releases it nor
/// lets its dropped guard free it), so the next leader does not start while the work still
/// runs. Drop it once the work's future is dropped (the work stopped, or finished).
///
/// When the term ends, the campaign waits for it at most the client's
/// [store timeout](crate::LeaseConfig::store_timeout); past that it leaves the lease to lapse
/// one TTL after its last renewal (it is no longer renewed once the term ended), so work
/// blocked longer than that still runs beside the next leader's.
#[must_use = "the term's lease is freed as soon as this is dropped"]
pub struct WorkUnderTerm {
    _running: oneshot::Sender<()>,
}

impl WorkUnderTerm {
    /// Work under a term, and what the campaign waits on: completes (cancelled) when this is
    /// dropped.
    pub(crate) fn new() -> (Self, oneshot::Receiver<()>) {
        let (running, stopped) = oneshot::channel();
        (Self { _running: running }, stopped)
    }
}

impl fmt::Debug for WorkUnderTerm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkUnderTerm").finish_non_exhaustive()
    }
}
