//! [`LeaseGuard`] and [`LeaseHandle`]: a held lease, and a view of it to pass around.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backoff::Backoff;
use crate::clock::ticks;
use crate::held::Held;
use crate::renewer::Renewer;
use crate::shutdown::{Kind, Token};
use crate::timed_store::TimedStore;
use crate::{Error, Fence, FencedCheck, HolderId, LeaseName, LossReason, StoreErrorKind};

/// The first and the longest pause between tries of a release with a minimum hold that failed.
const RELEASE_RETRY: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(2));

/// The most tries of a release with a minimum hold.
const RELEASE_TRIES: u32 = 20;

/// A lease this process holds, kept alive by the client's renewer until it is released.
///
/// Check [`is_held`](LeaseGuard::is_held) before each step of long work, or race the work against
/// [`lost`](LeaseGuard::lost); pass [`fence`](LeaseGuard::fence) with every write downstream.
///
/// Release it with [`release`](LeaseGuard::release) when the work is done. Dropped without
/// release, it is released in the background where the runtime can spawn (also after its
/// deadline passed, when the store may still have it); otherwise the lease lapses after its
/// TTL.
#[must_use = "a guard dropped at once gives the lease back"]
pub struct LeaseGuard {
    handle: LeaseHandle,
    /// Keeps the lease renewed until it is forgotten.
    renewer: Arc<Renewer>,
    /// Gives the lease back.
    store: TimedStore,
    /// Counts the guard among what the client has running, until its release has answered.
    token: Option<Token>,
    released: bool,
}

impl LeaseGuard {
    /// The guard of `held`, which `renewer` keeps renewed.
    pub(crate) fn new(
        held: Arc<Held>,
        renewer: Arc<Renewer>,
        store: TimedStore,
        token: Token,
    ) -> Self {
        Self {
            handle: LeaseHandle { held },
            renewer,
            store,
            token: Some(token),
            released: false,
        }
    }

    /// Its token, now counted as a release in flight.
    fn releasing(&mut self) -> Option<Token> {
        let mut token = self.token.take();
        if let Some(token) = &mut token {
            token.become_kind(Kind::Releasing);
        }
        token
    }

    /// The lease.
    pub fn name(&self) -> &LeaseName {
        self.handle.name()
    }

    /// The fencing token of this acquisition.
    pub fn fence(&self) -> Fence {
        self.handle.fence()
    }

    /// The holder id of this acquisition.
    pub fn holder(&self) -> &HolderId {
        self.handle.holder()
    }

    /// Whether this process still holds the lease: no renewal was rejected and the local
    /// deadline has not passed.
    pub fn is_held(&self) -> bool {
        self.handle.is_held()
    }

    /// The lease's local deadline as it stands, on the runtime's clock: the TTL after the last
    /// successful renewal was sent, minus the safety margin. Each renewal moves it on.
    pub fn deadline(&self) -> Instant {
        self.handle.deadline()
    }

    /// How long until [`deadline`](LeaseGuard::deadline); zero once the lease is lost or
    /// released.
    pub fn time_left(&self) -> Duration {
        self.handle.time_left()
    }

    /// Completes when the lease is lost, with how. Never completes once the lease is released.
    ///
    /// # Cancel safety
    /// This method is cancel safe: it only waits, so dropping it loses nothing, and a later
    /// call completes with the same reason.
    pub async fn lost(&self) -> LossReason {
        self.handle.lost().await
    }

    /// Marks the lease lost because a fenced check found it no longer held, and returns the
    /// error to hand back; see [`LeaseHandle::mark_not_held`].
    #[must_use = "return the error to the caller"]
    pub fn mark_not_held(&self) -> Error {
        self.handle.mark_not_held()
    }

    /// A cheap, cloneable view of this lease for tasks the work hands out.
    pub fn handle(&self) -> LeaseHandle {
        self.handle.clone()
    }

    /// Gives the lease back so the next instance can take it at once.
    ///
    /// # Errors
    /// [`Error::Lost`] when the lease had been lost before the release (the work may have
    /// overlapped with another holder's), whatever the release itself answered, with
    /// [`LossReason::NotHeld`] after [`mark_not_held`](LeaseGuard::mark_not_held), and with
    /// [`LossReason::Rejected`] (counted as a loss) when the release finds the row no longer
    /// this holder's (a forced release, an expiry this process did not see);
    /// [`Error::Store`] when the store failed or did not answer within
    /// [`LeaseConfig::store_timeout`](crate::LeaseConfig::store_timeout), in which case the
    /// lease lapses after its TTL.
    ///
    /// # Cancel safety
    /// Not cancel safe. The guard moves into the future: dropped before its first poll, the
    /// future drops the guard, which releases in the background as a dropped guard does. Once
    /// polled, the lease is no longer renewed whatever happens; cancelled before the store
    /// answers, the release statement may or may not have run, and if it did not, the lease
    /// lapses after its TTL.
    pub async fn release(self) -> Result<(), Error> {
        self.release_after(Duration::ZERO).await
    }

    /// Gives the lease back, but keeps it taken until `min_hold` after it was taken: at most
    /// once per period. A job that ends after two seconds with `min_hold` of 15 minutes is not
    /// run again by another instance until those 15 minutes have passed.
    ///
    /// The release waits for a renewal in flight. One the client already stopped waiting for
    /// (its store timeout fired while the statement still ran on the server) may reach the row
    /// after the release: it never shortens the hold (a renewal never moves an expiry back),
    /// and may keep the lease taken up to one TTL past the hold's end.
    ///
    /// A release that fails in a way another try may not (a timeout, a store failure but a
    /// permanent one) is tried again, with pauses from 100 ms doubling up to 2 s, until it
    /// succeeds, the lease's local deadline passes (renewal stopped with the release), 20
    /// tries have failed or the client's shutdown ends its grace period: one
    /// that failed would leave the row to expire one TTL after the last renewal, short of the
    /// hold, and another instance could run the work again within the period. When a try
    /// whose answer was lost is followed by one that finds the row no longer this holder's
    /// before the hold could have ended, no try reached the row in time (one would have kept it
    /// this holder's until then): the lease lapsed short of the hold, or was released by force
    /// (`Error::Lost`). Found so later, the row is read once more: free, or this holder's and
    /// lapsed, the lost try released it (`Ok`); another holder's, taken before the first try
    /// went out or before the hold ended, the lease was taken over while the work ran or lapsed
    /// short of the hold (`Error::Lost`), and taken after both, it was released or lapsed once
    /// the hold was kept (`Ok`).
    ///
    /// # Errors
    /// As [`release`](LeaseGuard::release), the last try's.
    ///
    /// # Cancel safety
    /// Not cancel safe, as [`release`](LeaseGuard::release): cancelled before the store answers,
    /// the lease is kept until `min_hold` after it was taken if the statement ran, and lapses
    /// after its TTL if it did not.
    pub async fn release_after(self, min_hold: Duration) -> Result<(), Error> {
        self.release_telling(min_hold, None).await
    }

    /// Gives the lease back as [`release`](LeaseGuard::release) does, but first marks it lost
    /// with `reason` for every [`lost`](LeaseHandle::lost) waiter of its handles (not counted as
    /// a loss): for a holder that stops on its own while others work under the lease (a
    /// campaign that ends), so that their work stops before the lease is free.
    ///
    /// # Errors
    /// As [`release`](LeaseGuard::release): [`Error::Lost`] only when the lease had been lost
    /// otherwise first.
    ///
    /// # Cancel safety
    /// Not cancel safe, as [`release`](LeaseGuard::release); the waiters are told at its first
    /// poll.
    pub(crate) async fn give_back(self, reason: LossReason) -> Result<(), Error> {
        self.release_telling(Duration::ZERO, Some(reason)).await
    }

    /// Marks the lease lost with `reason` for every waiter of its handles, as
    /// [`give_back`](LeaseGuard::give_back) does, without releasing it: a guard about to be
    /// dropped, which then releases it in the background. Returns how it had been lost, if it
    /// was lost first (then nothing changes).
    pub(crate) fn mark_given_back(&self, reason: LossReason) -> Option<LossReason> {
        self.handle.held.mark_given_back(reason)
    }

    /// Renews a lease [given back](LeaseGuard::mark_given_back) once, while the work under it
    /// may still run, until it has `stopped`: see [`Renewer::renew_given_back`]. Whether the
    /// work stopped.
    pub(crate) async fn renew_given_back(&self, stopped: impl Future<Output = bool>) -> bool {
        self.renewer
            .renew_given_back(&self.handle.held, stopped)
            .await
    }

    /// Lets the lease lapse after its TTL instead of releasing it: renewal stops and nothing is
    /// sent. For a lease whose work may still be running (a leader's round that did not stop
    /// when told): released, it would let another instance run the work beside it.
    pub(crate) fn leave_to_lapse(mut self) {
        self.released = true;
        self.renewer.forget(&self.handle.held);
        let _ = self.handle.held.mark_released();
        tracing::warn!(lease = %self.name(), fence = %self.fence(), "work under the lease did not stop in time; the lease lapses after its TTL");
    }

    /// Releases the lease, kept taken until `min_hold` after it was taken; `told`, the reason
    /// every loss waiter is told first, if any ([`give_back`](LeaseGuard::give_back)).
    async fn release_telling(
        mut self,
        min_hold: Duration,
        told: Option<LossReason>,
    ) -> Result<(), Error> {
        self.released = true;
        let token = self.releasing();
        let held = &self.handle.held;
        self.renewer.forget(held);
        let lost = match told {
            None => held.mark_released(),
            Some(reason) => held.mark_given_back(reason),
        };
        if !min_hold.is_zero() {
            self.renewer.no_renewal_in_flight().await;
        }
        // Even a lease this process gave up on may still be ours in the store: free it.
        let released = if min_hold.is_zero() || lost.is_some() {
            self.store
                .release(held.name(), held.holder(), min_hold)
                .await
        } else {
            self.release_keeping(min_hold, token.as_ref()).await
        };
        if let Some(token) = &token {
            token.shutdown().record_release(&released);
        }
        drop(token);
        match (lost, released) {
            (None, Ok(true)) => {
                tracing::debug!(lease = %held.name(), fence = %held.fence(), ?min_hold, "lease released");
                Ok(())
            }
            (None, Err(error)) => Err(error),
            // Lost before the release: that is what the caller must hear, whatever the release
            // answered (a store that failed as the deadline passed during an outage).
            (Some(reason), released) => {
                if let Err(error) = released {
                    tracing::warn!(lease = %held.name(), error = %crate::ErrorChain(&error), "lease lost, and its release failed; it lapses after its TTL");
                }
                Err(Error::Lost {
                    name: held.name().clone(),
                    reason,
                })
            }
            // Believed held, and the row no longer this holder's: taken over (after a forced
            // release, an expiry this process did not see). A loss, counted as one.
            (None, Ok(false)) => {
                self.store.stats().lost(held.name(), LossReason::Rejected);
                Err(Error::Lost {
                    name: held.name().clone(),
                    reason: LossReason::Rejected,
                })
            }
        }
    }

    /// The release of a lease to be kept until `min_hold` after it was taken, tried again while
    /// it fails in a way another try may not (a store failure but a permanent one, a timeout)
    /// and the row may still be this holder's (before the local deadline of the last renewal,
    /// at most [`RELEASE_TRIES`] times): a release that failed leaves the row's expiry one TTL
    /// after that renewal, short of the hold, and another instance could run the work again
    /// within the period. A try that reaches the row after another took it over changes
    /// nothing: the release names this holder. Tried again during a shutdown's grace period,
    /// as work let finish releases as usual (its hold respected), but not once the grace
    /// period is over (`token`'s shutdown): the shutdown's own bound stands.
    async fn release_keeping(
        &self,
        min_hold: Duration,
        token: Option<&Token>,
    ) -> Result<bool, Error> {
        let held = &self.handle.held;
        let clock = self.store.clock();
        let mut backoff = Backoff::new(RELEASE_RETRY);
        let mut tries = 1;
        // When the first try went out: the work was over by then.
        let first_sent = clock.now();
        // Whether a try failed in a way that may have released the lease after all.
        let mut may_have_released = false;
        loop {
            let released = self
                .store
                .release(held.name(), held.holder(), min_hold)
                .await;
            let Err(error) = &released else {
                if matches!(released, Ok(false))
                    && may_have_released
                    && !self.answered_within_the_hold(min_hold)
                {
                    return self.released_by_an_earlier_try(first_sent, min_hold).await;
                }
                return released;
            };
            may_have_released = true;
            // A store timeout is a transient store failure too.
            let again = error
                .store_error_kind()
                .is_some_and(|kind| kind != StoreErrorKind::Permanent)
                && !token.is_some_and(|token| token.shutdown().is_cancelling());
            let left = held
                .deadline_instant()
                .saturating_duration_since(clock.instant(clock.now()));
            if !again || left.is_zero() || tries >= RELEASE_TRIES {
                return released;
            }
            tracing::warn!(
                lease = %held.name(),
                error = %crate::ErrorChain(error),
                ?min_hold,
                "release with a minimum hold failed; trying again before the lease could lapse"
            );
            clock.runtime().sleep(backoff.next_pause().min(left)).await;
            tries += 1;
        }
    }

    /// Whether a try of the release answered just now reached the row before the hold's end:
    /// less than `min_hold` after the acquisition's statement went out, as the store took the
    /// lease no earlier. An earlier try that reached the row then would have kept it this
    /// holder's until the hold's end, and this one would have matched it; one that matched
    /// nothing says no try did, whatever their answers: the row lapsed short of the hold (or
    /// was released by force), and another instance may run the work again within it.
    fn answered_within_the_hold(&self, min_hold: Duration) -> bool {
        let since_sent = self
            .store
            .clock()
            .now()
            .saturating_sub(self.handle.held.taken().sent);
        Duration::from_nanos(since_sent) < min_hold
    }

    /// After a try of a release with a minimum hold failed without an answer and a later try,
    /// answered once the hold may have ended, matched no row: whether the lease was released
    /// (`Ok(true)`), rather than taken over while the work ran or within the hold
    /// (`Ok(false)`). A try that reached the row after the hold had ended freed it (no holder),
    /// and one within the hold kept this holder on it (the next try matches again). So a row
    /// with no holder, or this holder's lapsed, was released or left to lapse by this holder,
    /// and nobody took it since. A row another holder took once the work was over (the first
    /// try went out at `first_sent`, in clock ticks) and the hold had ended (`min_hold` after
    /// the acquisition's answer at the latest) was freed by a try or lapsed after the hold:
    /// released, no overlap, the hold kept. One taken before either (its `taken_at` compared by
    /// the store's clock, from when the row was read back by the time since) was taken over
    /// while the work ran, or took a row that lapsed short of the hold: no try freed it then.
    async fn released_by_an_earlier_try(
        &self,
        first_sent: u64,
        min_hold: Duration,
    ) -> Result<bool, Error> {
        let held = &self.handle.held;
        let clock = self.store.clock();
        let hold_ended = held.taken().answered.saturating_add(ticks(min_hold));
        let boundary = first_sent.max(hold_ended);
        // Read before the row is: the row's time is then at least this long after the
        // boundary, so a takeover just after it errs towards a loss, never towards a release.
        // A boundary still ahead (the hold ends later) is ahead by the store's clock too.
        let now = clock.now();
        let since = Duration::from_nanos(now.saturating_sub(boundary));
        let ahead = Duration::from_nanos(boundary.saturating_sub(now));
        let row = self.store.inspect(held.name()).await?;
        let taken_over = row.is_some_and(|row| {
            let boundary_by_the_store = row
                .observed_at
                .checked_sub(since)
                .and_then(|at| at.checked_add(ahead));
            row.holder != *held.holder()
                && boundary_by_the_store.is_none_or(|at| row.taken_at <= at)
        });
        if !taken_over {
            tracing::debug!(lease = %held.name(), fence = %held.fence(), "lease released by a try whose answer was lost");
            self.store.stats().released(held.name());
        }
        Ok(!taken_over)
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let held = Arc::clone(&self.handle.held);
        self.renewer.forget(&held);
        let given_back = held.is_given_back();
        match held.mark_released() {
            // Given up here before the store's expiry: the row may still name this holder (for
            // the safety margin at least, a whole TTL after a renewal that committed unanswered),
            // so free it for the next instance rather than leave it to lapse.
            None | Some(LossReason::Resigned) => {}
            // Unless a shutdown that took it from the renewer claimed its release first.
            Some(LossReason::DeadlinePassed) if held.claim_release() => {}
            // Given back by its holder, whatever the reason (a campaign ending its term, for a
            // shutdown too), whose future was dropped before the release that was to follow:
            // the release is owed here.
            Some(_) if given_back => {}
            // Taken over, found gone, or lost to the shutdown, which releases it itself (as it
            // does one past its deadline that it took from the renewer).
            Some(
                LossReason::Rejected
                | LossReason::NotHeld
                | LossReason::ShutDown
                | LossReason::DeadlinePassed,
            ) => return,
        }
        let token = self.releasing();
        release_in_background(&self.store, held, token);
    }
}

/// Releases `held` on a task of the store's runtime, for a holder that can no longer wait for
/// the answer (a guard dropped, a shutdown's future dropped before its release answered).
/// `token`, while one is given, counts the release as running for a shutdown that waits on it,
/// and the answer in its report. Where the runtime cannot spawn, the lease lapses after its
/// TTL.
pub(crate) fn release_in_background(store: &TimedStore, held: Arc<Held>, token: Option<Token>) {
    let name = held.name().clone();
    let task = {
        let store = store.clone();
        Box::pin(async move {
            let released = store
                .release(held.name(), held.holder(), Duration::ZERO)
                .await;
            if let Some(token) = &token {
                token.shutdown().record_release(&released);
            }
            // Counted as running until the statement answered, for a shutdown waiting on it.
            drop(token);
            match released {
                Ok(_) => {
                    tracing::debug!(lease = %held.name(), fence = %held.fence(), "lease released in the background")
                }
                Err(error) => tracing::warn!(
                    lease = %held.name(),
                    error = %crate::ErrorChain(&error),
                    "lease not released in the background; it lapses after its TTL"
                ),
            }
        })
    };
    if store.clock().runtime().spawn(task).is_err() {
        tracing::debug!(lease = %name, "the runtime cannot spawn the release of a lease let go; it lapses after its TTL");
    }
}

/// Work running under a lease, from [`LeaseHandle::working`], until dropped.
#[derive(Debug)]
pub(crate) struct WorkRunning(Arc<Held>);

impl Drop for WorkRunning {
    fn drop(&mut self) {
        self.0.work_stopped();
    }
}

impl fmt::Debug for LeaseGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseGuard")
            .field("name", self.name())
            .field("fence", &self.fence())
            .field("holder", self.holder())
            .field("held", &self.is_held())
            .finish()
    }
}

/// A view of a held lease: its name and fence, whether it is still held, and a future for its
/// loss. Cheap to clone; hand it to the tasks the work spawns.
///
/// After the guard releases the lease, [`is_held`](LeaseHandle::is_held) is `false` and
/// [`lost`](LeaseHandle::lost) never completes: the owner of the guard knows it gave the lease
/// back. A leader's lease ([`Leader::lease`](crate::Leader::lease)) is different, since its
/// guard is the campaign's: when the campaign gives the leadership back, `lost` completes first,
/// with [`LossReason::ShutDown`] or [`LossReason::Resigned`].
#[derive(Clone)]
pub struct LeaseHandle {
    held: Arc<Held>,
}

impl LeaseHandle {
    /// The lease.
    pub fn name(&self) -> &LeaseName {
        self.held.name()
    }

    /// The fencing token of this acquisition.
    pub fn fence(&self) -> Fence {
        self.held.fence()
    }

    /// The holder id of this acquisition.
    pub fn holder(&self) -> &HolderId {
        self.held.holder()
    }

    /// Whether this process still holds the lease.
    pub fn is_held(&self) -> bool {
        self.held.is_held()
    }

    /// The lease's local deadline as it stands; see [`LeaseGuard::deadline`].
    pub fn deadline(&self) -> Instant {
        self.held.deadline_instant()
    }

    /// How long until [`deadline`](LeaseHandle::deadline); zero once the lease is lost or
    /// released.
    pub fn time_left(&self) -> Duration {
        self.held.time_left()
    }

    /// Completes when the lease is lost, with how. Never completes once the guard released the
    /// lease; the lease of a campaign's term ([`Leader::lease`](crate::Leader::lease)) completes
    /// when the campaign gives the leadership back, before the release is sent:
    /// [`LossReason::ShutDown`] at the client's shutdown, [`LossReason::Resigned`] otherwise.
    ///
    /// # Cancel safety
    /// This method is cancel safe: it only waits, so dropping it loses nothing, and a later
    /// call completes with the same reason.
    pub async fn lost(&self) -> LossReason {
        self.held.lost().await
    }

    /// Marks the lease lost because a fenced check found it no longer held, and returns
    /// [`Error::NotHeld`] with its name and fence for the caller to return.
    ///
    /// Stores' fenced checks (statements conditioned on this holder and fence, run inside the
    /// caller's transaction) call it when the row no longer names this holder and fence, or has
    /// expired by the database's clock. Call it yourself when a downstream system rejects the
    /// fence. From then on [`is_held`](LeaseHandle::is_held) is `false`, every
    /// [`lost`](LeaseHandle::lost) waiter wakes at once with [`LossReason::NotHeld`] (so
    /// [`run_exclusive`](crate::LeaseClient::run_exclusive) stops the work at once, unless it
    /// lets work finish with [`OnLoss::Finish`](crate::OnLoss::Finish)), the renewer stops
    /// renewing the lease, and the guard's release answers [`Error::Lost`].
    ///
    /// A lease that was lost already keeps the reason it was lost with, and a released one stays
    /// released: nothing changes then, and the error is returned all the same.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), lease_core::Error> {
    /// use lease_core::{Error, LeaseClient, LossReason, MemoryStore, runtime::TokioRuntime};
    ///
    /// let client = LeaseClient::new(MemoryStore::new(), TokioRuntime);
    /// let guard = client.try_acquire("sweep").await?.expect("nobody else holds it");
    /// let lease = guard.handle();
    /// // The search index refused a write: it has seen a higher fence for "sweep".
    /// let error = lease.mark_not_held();
    /// assert!(matches!(error, Error::NotHeld { .. }));
    /// assert!(!guard.is_held());
    /// assert_eq!(guard.lost().await, LossReason::NotHeld);
    /// # Ok(()) }
    /// ```
    #[must_use = "return the error to the caller"]
    pub fn mark_not_held(&self) -> Error {
        self.held.mark_not_held();
        Error::NotHeld {
            name: self.name().clone(),
            fence: self.fence(),
        }
    }

    /// Counts a fenced check of this lease, ended as `check` says, in its client's
    /// [`ClientStats::fenced_checks`](crate::ClientStats::fenced_checks) and, with the `metrics`
    /// feature, as `lease_fenced_checks_total{lease, store, result}`.
    ///
    /// The SQL stores' fenced checks call it once per check; a store of your own that runs a
    /// fenced check calls it too (and, when the lease was gone,
    /// [`mark_not_held`](LeaseHandle::mark_not_held)). It changes nothing else.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), lease_core::Error> {
    /// use lease_core::{FencedCheck, LeaseClient, MemoryStore, runtime::TokioRuntime};
    ///
    /// let client = LeaseClient::new(MemoryStore::new(), TokioRuntime);
    /// let guard = client.try_acquire("sweep").await?.expect("nobody else holds it");
    /// guard.handle().record_fenced_check(FencedCheck::Passed);
    /// assert_eq!(client.stats().fenced_checks.passed, 1);
    /// assert!(guard.is_held());
    /// # Ok(()) }
    /// ```
    pub fn record_fenced_check(&self, check: FencedCheck) {
        self.held.record_fenced_check(check);
    }

    /// Marks work as running under the lease until the answer is dropped: a shutdown that ends
    /// its grace period meanwhile leaves the lease to the work's own release instead of freeing
    /// it under the work.
    pub(crate) fn working(&self) -> WorkRunning {
        self.held.work_started();
        WorkRunning(Arc::clone(&self.held))
    }

    /// How the lease was lost, if it was (its deadline passing included); `None` while held and
    /// once released.
    pub(crate) fn loss(&self) -> Option<LossReason> {
        self.held.loss()
    }
}

/// So an API can take `impl AsRef<LeaseHandle>` and accept a guard or a handle.
impl AsRef<LeaseHandle> for LeaseGuard {
    fn as_ref(&self) -> &LeaseHandle {
        &self.handle
    }
}

/// So an API can take `impl AsRef<LeaseHandle>` and accept a guard or a handle.
impl AsRef<LeaseHandle> for LeaseHandle {
    fn as_ref(&self) -> &LeaseHandle {
        self
    }
}

impl fmt::Debug for LeaseHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseHandle")
            .field("name", self.name())
            .field("fence", &self.fence())
            .field("held", &self.is_held())
            .finish()
    }
}
