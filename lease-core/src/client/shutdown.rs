//! [`LeaseClient::shutdown`]: give every lease back before the process exits, and
//! [`ShutdownReport`], what it did.

use std::sync::Arc;
use std::time::Duration;

use futures::future;

use crate::clock::ticks;
use crate::guard::release_in_background;
use crate::held::Held;
use crate::shutdown::{Running, Token};
use crate::timed_store::TimedStore;
use crate::{LeaseClient, LossReason};

/// What [`LeaseClient::shutdown`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Leases given back while shutting down, by work that ended, guards released or dropped,
    /// campaigns that resigned and the shutdown itself. A lease released with a minimum hold
    /// counts too: the store keeps it until the hold ends, as it would have anyway.
    pub released: usize,
    /// [`run_exclusive`](LeaseClient::run_exclusive) work that ended within the grace period,
    /// by itself or stopped by a loss of its own lease (a renewal refused, a deadline passed)
    /// meanwhile.
    pub finished: usize,
    /// Work the shutdown stopped: `run_exclusive` work when the grace period ran out
    /// ([`RunOutcome::Cancelled`](crate::RunOutcome::Cancelled) with [`LossReason::ShutDown`]),
    /// and a leader schedule's running round at once, as its campaign gives the leadership back
    /// when the shutdown begins.
    pub cancelled: usize,
    /// Leaderships given back by campaigns the shutdown ended.
    pub resigned: usize,
    /// Guards whose owners had not released them by the end of the grace period, released by the
    /// shutdown itself; they are now lost with [`LossReason::ShutDown`].
    pub forced: usize,
    /// Releases the store failed or did not answer in time, and leases of a leadership whose
    /// work did not stop in time (a leader schedule's round, work holding a
    /// [`WorkUnderTerm`](crate::WorkUnderTerm), also when the campaign's future was dropped
    /// meanwhile), left to lapse: those leases lapse after their TTL.
    pub failed: usize,
    /// Calls and release statements still running when the shutdown stopped waiting for them
    /// (a store that hangs), and work that did not stop when cancelled (in a blocking call):
    /// their leases lapse after their TTL.
    pub unfinished: usize,
    /// How long the shutdown took.
    pub elapsed: Duration,
}

impl ShutdownReport {
    /// Whether every lease was given back: nothing failed and nothing was left running.
    pub fn is_clean(&self) -> bool {
        self.failed == 0 && self.unfinished == 0
    }
}

impl LeaseClient {
    /// Shuts the client down gracefully and hands every lease back, so the next instance takes
    /// each at once instead of one TTL later. Call it on SIGTERM, before the runtime stops.
    ///
    /// 1. From the first moment, the client takes no new leases: [`try_acquire`], [`acquire`],
    ///    [`run_exclusive`] and [`campaign`] answer [`Error::ShuttingDown`](crate::Error::ShuttingDown)
    ///    (a statement already in flight that takes a lease gives it straight back), waits in
    ///    [`acquire`] end, and every campaign ends, giving its leadership back.
    /// 2. Running [`run_exclusive`] work may finish within `grace`, then releases its lease as
    ///    usual (minimum holds respected); guards may be released or dropped by their owners.
    ///    Leases stay renewed meanwhile.
    /// 3. When `grace` runs out, running work is stopped
    ///    ([`RunOutcome::Cancelled`](crate::RunOutcome::Cancelled) with
    ///    [`LossReason::ShutDown`]) and gives its lease back; then every guard still held is
    ///    marked lost with [`LossReason::ShutDown`] and released by the shutdown itself, except
    ///    the lease of work that has not stopped two store timeouts later (a task in a
    ///    blocking call learns of the cancellation only when the call returns): freed, another
    ///    instance would run beside the work. It is no longer renewed: the work releases it
    ///    when it stops, or it lapses one TTL after its last renewal (work blocked longer runs
    ///    beside the next holder's).
    /// 4. It waits for the release statements in flight, each bounded by the store timeout,
    ///    and reports what it did.
    ///
    /// It returns within `grace` plus about four [store timeouts](crate::LeaseConfig::store_timeout)
    /// whatever the store does; what it could not give back is counted in the report and lapses
    /// after its TTL. The client stays shut down: clone it freely, but build a new one to take
    /// leases again. A second call waits the same way and reports the tally so far.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), lease_core::Error> {
    /// use std::time::Duration;
    /// use lease_core::{Error, LeaseClient, MemoryStore, runtime::TokioRuntime};
    ///
    /// let store = MemoryStore::new();
    /// let client = LeaseClient::new(store.clone(), TokioRuntime);
    /// let leader = client.campaign("alerts")?;
    /// let guard = client.try_acquire("uptime:node-a").await?.expect("free");
    /// # while !leader.is_leader() { tokio::task::yield_now().await; }
    ///
    /// // On SIGTERM:
    /// let report = client.shutdown(Duration::from_millis(10)).await;
    /// assert!(report.is_clean());
    /// assert_eq!((report.resigned, report.forced), (1, 1));
    /// assert!(!guard.is_held() && !leader.is_leader());
    /// assert!(matches!(client.try_acquire("sweep").await, Err(Error::ShuttingDown { .. })));
    ///
    /// // The next instance takes both at once.
    /// let next = LeaseClient::new(store, TokioRuntime);
    /// assert!(next.try_acquire("alerts").await?.is_some());
    /// assert!(next.try_acquire("uptime:node-a").await?.is_some());
    /// # Ok(()) }
    /// ```
    ///
    /// [`try_acquire`]: LeaseClient::try_acquire
    /// [`acquire`]: LeaseClient::acquire
    /// [`run_exclusive`]: LeaseClient::run_exclusive
    /// [`campaign`]: LeaseClient::campaign
    ///
    /// # Cancel safety
    /// Cancel safe in that nothing is lost: once polled, the client is shut down for good and
    /// its work and campaigns stop as above; cancelled before the grace period runs out, running
    /// work is never stopped and guards are never released by force (their owners still can).
    pub async fn shutdown(&self, grace: Duration) -> ShutdownReport {
        let clock = self.clock().clone();
        let state = self.shutdown_state();
        let started = clock.now();
        state.close();
        // Nothing waits for a release any more: no acquisition or campaign goes on past the
        // shutdown's start. Closed here, not at its end, so a shutdown cancelled half-way
        // closes it too.
        self.inner.releases.close();
        tracing::info!(
            ?grace,
            held = self.inner.renewer.held_count(),
            "lease client shutting down"
        );
        let grace_ends = started.saturating_add(ticks(grace));
        if !state.wait_until(&clock, grace_ends, Running::is_idle).await {
            state.cancel();
            // Stopped work gives its own lease back, with its minimum hold: wait for that before
            // releasing what is left, so no lease of running work is released without its hold.
            let store_timeout = ticks(self.config().store_timeout);
            let runs_end = clock.now().saturating_add(store_timeout.saturating_mul(2));
            state
                .wait_until(&clock, runs_end, |running| running.runs == 0)
                .await;
            self.release_held().await;
        }
        let settle_by = clock
            .now()
            .saturating_add(ticks(self.config().store_timeout));
        state
            .wait_until(&clock, settle_by, Running::is_settled)
            .await;
        let running = state.running();
        let tally = state.tally();
        let report = ShutdownReport {
            released: tally.released,
            finished: tally.finished,
            cancelled: tally.cancelled,
            resigned: tally.resigned,
            forced: tally.forced,
            failed: tally.failed,
            unfinished: running.unsettled(),
            elapsed: Duration::from_nanos(clock.now().saturating_sub(started)),
        };
        if report.is_clean() {
            tracing::info!(?report, "lease client shut down");
        } else {
            tracing::warn!(
                ?report,
                "lease client shut down; some leases lapse after their TTL"
            );
        }
        report
    }

    /// Marks every lease still held lost with [`LossReason::ShutDown`] and releases it, all at
    /// once, counting them as released by force before the releases go out (a shutdown
    /// cancelled while they run has counted them, and sends those not yet answered in the
    /// background; another shutdown at the same time counts only those it took from the
    /// renewer itself). A lease whose deadline had passed is
    /// released too, as a dropped guard's is (the row may still name this holder), and not
    /// counted: it was lost before the shutdown. A lease whose `run_exclusive` work has not
    /// stopped is not released: it lapses after its TTL.
    async fn release_held(&self) {
        let renewer = &self.inner.renewer;
        let store = &self.inner.store;
        let state = self.shutdown_state();
        let mut forced = 0;
        let held: Vec<_> = renewer
            .held()
            .into_iter()
            .filter(|held| {
                if !renewer.forget(held) {
                    return false;
                }
                if held.is_working() {
                    // Work that did not stop when cancelled (in a blocking call, a stretch of
                    // CPU work) still runs under it: freed, another instance would run beside
                    // it. Not marked lost either: whoever ends the work releases the lease as
                    // after any loss of renewal (`run_exclusive`, a campaign giving its term
                    // back), or it lapses after its TTL.
                    tracing::warn!(lease = %held.name(), "work under the lease did not stop; left to its own release");
                    return false;
                }
                match held.mark_lost(LossReason::ShutDown) {
                    Some(LossReason::ShutDown) => {
                        forced += 1;
                        true
                    }
                    // Unless its guard, dropped meanwhile, claimed the release first.
                    Some(LossReason::DeadlinePassed) => held.claim_release(),
                    _ => false,
                }
            })
            .collect();
        state.record_forced(forced);
        let releases = held.iter().map(|held| {
            // The guards of these leases leave their release to this shutdown: dropped before
            // the answer (a timeout around the shutdown), it is owed to the background. Made
            // here, not in the future, which may be dropped before its first poll.
            let owed = OwedRelease::new(store, held, state.enter_own_release());
            async move {
                let released = store
                    .release(held.name(), held.holder(), Duration::ZERO)
                    .await;
                owed.answered();
                state.record_release(&released);
                if let Err(error) = released {
                    tracing::warn!(lease = %held.name(), error = %crate::ErrorChain(&error), "lease not given back on shutdown; it lapses after its TTL");
                }
            }
        });
        future::join_all(releases).await;
    }
}

/// A shutdown's release of a lease whose guard left it to the shutdown (lost with
/// [`LossReason::ShutDown`], a guard dropped after that releases nothing), counted as a release
/// running until it answered: dropped before [`answered`](OwedRelease::answered), as the
/// shutdown's future is by a timeout around it, it sends the release in the background, as a
/// dropped guard does, counted the same way (a later shutdown waits for it and reports it),
/// rather than leave the lease taken for its TTL.
struct OwedRelease<'a> {
    store: &'a TimedStore,
    owed: Option<(&'a Arc<Held>, Token)>,
}

impl<'a> OwedRelease<'a> {
    fn new(store: &'a TimedStore, held: &'a Arc<Held>, token: Token) -> Self {
        Self {
            store,
            owed: Some((held, token)),
        }
    }

    /// The release answered, whatever it said: nothing is owed.
    fn answered(mut self) {
        self.owed = None;
    }
}

impl Drop for OwedRelease<'_> {
    fn drop(&mut self) {
        if let Some((held, token)) = self.owed.take() {
            release_in_background(self.store, Arc::clone(held), Some(token));
        }
    }
}
