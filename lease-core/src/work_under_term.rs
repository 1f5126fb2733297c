//! [`WorkUnderTerm`]: work running under a leader's term, which the term's release waits for.

use std::fmt;

use futures::channel::oneshot;

use crate::guard::{LeaseHandle, WorkRunning};

/// Work running under a leader's term, from [`Leader::lease_for_work`](crate::Leader::lease_for_work):
/// until it is dropped, the campaign does not free the term's lease (neither releases it nor
/// lets its dropped guard free it), and neither does the client's shutdown, so the next leader
/// does not start while the work still runs. Drop it once the work's future is dropped (the
/// work stopped, or finished).
///
/// When the term ends (a loss, a resignation, the last `Leader` dropped, the client's
/// shutdown), the campaign waits for it at most the client's
/// [store timeout](crate::LeaseConfig::store_timeout); past that it leaves the lease to lapse
/// one TTL after its last renewal (a term given back with work running is renewed once as the
/// wait begins, so that a lease with little of its TTL left does not lapse within the wait;
/// after that it is no longer renewed), so work blocked longer than that still runs beside the
/// next leader's. A term that ended by a loss is not renewed: its lease may be gone already. A campaign whose future is
/// dropped (its task aborted, its runtime shut down, the future of
/// [`campaign_on_this_task`](crate::LeaseClient::campaign_on_this_task) let go by a `select!`),
/// during the term or while it waits, cannot wait: with work under the term not stopped, its
/// lease is left to lapse one TTL after its last renewal (without, it is released in the
/// background, as a dropped guard's is). Work that ends the leadership itself
/// ([`resign`](crate::Leader::resign), the client's shutdown) drops this first, or the
/// campaign waits the store timeout for it and leaves the lease to lapse.
#[must_use = "the term's lease is freed as soon as this is dropped"]
pub struct WorkUnderTerm {
    /// What the campaign waits on: cancelled when this is dropped.
    _running: oneshot::Sender<()>,
    /// What a shutdown reads, so that it does not free the lease under the work either.
    _working: WorkRunning,
}

impl WorkUnderTerm {
    /// Work under the term whose lease is `lease`, and what the campaign waits on: completes
    /// (cancelled) when this is dropped.
    pub(crate) fn new(lease: &LeaseHandle) -> (Self, oneshot::Receiver<()>) {
        let (running, stopped) = oneshot::channel();
        let working = Self {
            _running: running,
            _working: lease.working(),
        };
        (working, stopped)
    }
}

impl fmt::Debug for WorkUnderTerm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkUnderTerm").finish_non_exhaustive()
    }
}
