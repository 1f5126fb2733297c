//! [`Diagnoses`]: one diagnosis at a time of why a store's pool gave no connection.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Lets one diagnosis run at a time for a store: when a pool gives no connection within its
/// timeout, which it also answers when it retried a server that refuses, a driver makes one
/// connection of its own to tell the two apart. A pool whose waiters all time out together
/// (every connection in use, the case that connection answers with the timeout) would
/// otherwise open one per waiter, to a server that may be at its connection limit, whose
/// refusals would then be the answer. Clones share the one that runs: a store keeps one for
/// its pool.
#[derive(Debug, Clone, Default)]
pub struct Diagnoses(Arc<AtomicBool>);

impl Diagnoses {
    /// How long the connection that tells why a pool gave none may take. A server that
    /// refuses answers at once; one that does not answer at all leaves the pool's timeout as
    /// the answer.
    pub const TIMEOUT: Duration = Duration::from_secs(1);

    /// Runs `diagnosis` and answers its output, unless another diagnosis of these runs: then
    /// `None`, without running it (the pool's timeout is the answer).
    ///
    /// # Cancel safety
    /// Cancel-safe: dropped half-way, the diagnosis is dropped and the next one may run.
    pub async fn one_at_a_time<F: Future>(&self, diagnosis: F) -> Option<F::Output> {
        let _running = self.begin()?;
        Some(diagnosis.await)
    }

    /// The diagnosis that runs, where none does.
    fn begin(&self) -> Option<Running<'_>> {
        (!self.0.swap(true, Ordering::AcqRel)).then(|| Running(&self.0))
    }
}

/// A diagnosis that runs, until dropped.
struct Running<'a>(&'a AtomicBool);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use futures::channel::oneshot;

    #[test]
    fn one_runs_at_a_time_and_the_next_after_it() {
        let diagnoses = Diagnoses::default();
        let (go, wait) = oneshot::channel::<u8>();
        let mut first = Box::pin(diagnoses.one_at_a_time(wait));
        assert!(
            (&mut first).now_or_never().is_none(),
            "waits for its answer"
        );
        // Meanwhile no other of the same store runs (twice: one that did not run frees
        // nothing); another store's does.
        for _ in 0..2 {
            let mut ran = false;
            let second = diagnoses.one_at_a_time(async { ran = true });
            assert_eq!(second.now_or_never(), Some(None));
            assert!(!ran, "another one ran while the first did");
        }
        let another_store = Diagnoses::default();
        let other = another_store.one_at_a_time(async { 7 });
        assert_eq!(other.now_or_never(), Some(Some(7)));
        go.send(3).unwrap();
        assert_eq!(first.now_or_never(), Some(Some(Ok(3))));
        let third = diagnoses.one_at_a_time(async { 4 });
        assert_eq!(third.now_or_never(), Some(Some(4)));
    }

    #[test]
    fn a_diagnosis_dropped_half_way_lets_the_next_run() {
        let diagnoses = Diagnoses::default();
        let (_go, wait) = oneshot::channel::<u8>();
        let mut first = Box::pin(diagnoses.one_at_a_time(wait));
        assert!((&mut first).now_or_never().is_none());
        drop(first);
        let clone = diagnoses.clone();
        let next = clone.one_at_a_time(async { 5 });
        assert_eq!(next.now_or_never(), Some(Some(5)));
    }
}
