//! [`Held`]: what this process knows about one lease it holds.

use std::future::Future;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::task::Poll;

use futures::channel::oneshot;
use futures::future::{self, FutureExt, Shared};

use crate::clock::Clock;
use crate::stats::Stats;
use crate::{Fence, FencedCheck, HolderId, LeaseName, LossReason};

const HELD: u8 = 0;
const REJECTED: u8 = 1;
const DEADLINE_PASSED: u8 = 2;
const RELEASED: u8 = 3;
const NOT_HELD: u8 = 4;
const SHUT_DOWN: u8 = 5;
const RESIGNED: u8 = 6;
/// How the renewer renews a lease (`Held::alone`): with the others due.
const TOGETHER: u8 = 0;
/// In a statement of its own: its last renewal timed out, in a statement with others (or
/// alone, before it was ever sent alone).
const ALONE: u8 = 1;
/// In a statement of its own, after the others: it timed out so too.
const FAILED_ALONE: u8 = 2;
/// Set beside a loss's code when the holder gave the lease back itself and told its waiters
/// why (a campaign that ended): released, as far as a later loss is concerned.
const GIVEN_BACK: u8 = 0x80;

/// The state a loss is stored as.
fn loss_code(reason: LossReason) -> u8 {
    match reason {
        LossReason::Rejected => REJECTED,
        LossReason::DeadlinePassed => DEADLINE_PASSED,
        LossReason::NotHeld => NOT_HELD,
        LossReason::ShutDown => SHUT_DOWN,
        LossReason::Resigned => RESIGNED,
    }
}

/// The loss a stored state means, given back or not: `None` while held, and once released.
fn loss_reason(code: u8) -> Option<LossReason> {
    match code & !GIVEN_BACK {
        REJECTED => Some(LossReason::Rejected),
        DEADLINE_PASSED => Some(LossReason::DeadlinePassed),
        NOT_HELD => Some(LossReason::NotHeld),
        SHUT_DOWN => Some(LossReason::ShutDown),
        RESIGNED => Some(LossReason::Resigned),
        _ => None,
    }
}

/// When the statement that took a lease went out and when its answer came, in clock ticks: the
/// store took the lease between the two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Taken {
    pub(crate) sent: u64,
    pub(crate) answered: u64,
}

/// One held lease, shared by its guard, its handles and the renewer.
///
/// The renewer moves `deadline` and `next_renewal` forward; anybody may mark the lease lost, once,
/// and a lost lease never comes back: a renewal that succeeds after the deadline passed does not
/// make work that was cancelled valid again. Its holder may instead mark it released, or given
/// back: released, with its waiters told why.
#[derive(Debug)]
pub(crate) struct Held {
    /// Its key among the leases the renewer holds.
    id: u64,
    name: LeaseName,
    holder: HolderId,
    fence: Fence,
    clock: Clock,
    /// Counts its loss.
    stats: Arc<Stats>,
    /// When the statement that took it went out, and when its answer came.
    taken: Taken,
    /// Clock ticks after which this process no longer believes it holds the lease.
    deadline: AtomicU64,
    /// Clock ticks at which the renewer should next renew it.
    next_renewal: AtomicU64,
    /// Its last renewal was cut by the store timeout, as one held up by a locked row is: the
    /// renewer renews it in a statement of its own until one succeeds. [`TOGETHER`],
    /// [`ALONE`] or [`FAILED_ALONE`].
    alone: AtomicU8,
    /// Lost by its deadline, its release was claimed by whoever sends it: the shutdown that
    /// took it from the renewer, or its guard, dropped. The other sends none.
    release_claimed: AtomicBool,
    loss: AtomicU8,
    /// Whether it still counts in the `lease_held` gauge of its name: from its creation until it
    /// is lost or the renewer lets it go, whichever comes first.
    counted: AtomicBool,
    /// How many pieces of work run under it and have not stopped yet ([`run_exclusive`]'s,
    /// a leader's term's): their futures are alive. A shutdown does not free such a lease
    /// under the work.
    ///
    /// [`run_exclusive`]: crate::LeaseClient::run_exclusive
    working: AtomicUsize,
    notify: Mutex<Option<oneshot::Sender<()>>>,
    lost: Shared<oneshot::Receiver<()>>,
}

impl Held {
    /// A lease taken as `taken` tells, held until `deadline`, to be renewed at `next_renewal`,
    /// both in clock ticks.
    pub(crate) fn new(
        id: u64,
        name: LeaseName,
        holder: HolderId,
        fence: Fence,
        clock: Clock,
        stats: Arc<Stats>,
        (taken, deadline, next_renewal): (Taken, u64, u64),
    ) -> Self {
        let (notify, lost) = oneshot::channel();
        stats.holding(&name, true);
        Self {
            id,
            name,
            holder,
            fence,
            clock,
            stats,
            taken,
            deadline: AtomicU64::new(deadline),
            next_renewal: AtomicU64::new(next_renewal),
            alone: AtomicU8::new(TOGETHER),
            release_claimed: AtomicBool::new(false),
            loss: AtomicU8::new(HELD),
            counted: AtomicBool::new(true),
            working: AtomicUsize::new(0),
            notify: Mutex::new(Some(notify)),
            lost: lost.shared(),
        }
    }

    /// Stops counting it among the leases of its name held now (once, however often it is
    /// called): another holding of the same name by this client, acquired after this one was
    /// lost, keeps counting.
    pub(crate) fn stop_counting(&self) {
        if self.counted.swap(false, Ordering::AcqRel) {
            self.stats.holding(&self.name, false);
        }
    }

    /// Records that a piece of work began to run under it (see `working`).
    pub(crate) fn work_started(&self) {
        self.working.fetch_add(1, Ordering::AcqRel);
    }

    /// Records that a piece of work under it stopped (see `working`).
    pub(crate) fn work_stopped(&self) {
        self.working.fetch_sub(1, Ordering::AcqRel);
    }

    /// Whether work runs under it that has not stopped yet (see `working`).
    pub(crate) fn is_working(&self) -> bool {
        self.working.load(Ordering::Acquire) > 0
    }

    /// Its key among the leases the renewer holds.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn name(&self) -> &LeaseName {
        &self.name
    }

    pub(crate) fn holder(&self) -> &HolderId {
        &self.holder
    }

    pub(crate) fn fence(&self) -> Fence {
        self.fence
    }

    /// When the statement that took it went out, and when its answer came.
    pub(crate) fn taken(&self) -> Taken {
        self.taken
    }

    pub(crate) fn deadline(&self) -> u64 {
        self.deadline.load(Ordering::Acquire)
    }

    pub(crate) fn next_renewal(&self) -> u64 {
        self.next_renewal.load(Ordering::Acquire)
    }

    pub(crate) fn set_next_renewal(&self, ticks: u64) {
        self.next_renewal.store(ticks, Ordering::Release);
    }

    /// Records a renewal that succeeded: `deadline` and `next_renewal` computed from the moment
    /// it was sent, never from when the answer came back.
    pub(crate) fn renewed(&self, deadline: u64, next_renewal: u64) {
        self.deadline.fetch_max(deadline, Ordering::AcqRel);
        self.set_next_renewal(next_renewal);
        self.alone.store(TOGETHER, Ordering::Release);
    }

    /// Records that its renewal timed out (see `alone`): `by_itself` in a statement of its own
    /// that the renewer sent as such.
    pub(crate) fn renewal_timed_out(&self, by_itself: bool) {
        let state = if by_itself { FAILED_ALONE } else { ALONE };
        self.alone.fetch_max(state, Ordering::AcqRel);
    }

    /// Whether the renewer renews it in a statement of its own (see `alone`).
    pub(crate) fn renews_alone(&self) -> bool {
        self.alone.load(Ordering::Acquire) != TOGETHER
    }

    /// Claims the release of a lease lost by its deadline (see `release_claimed`): whether this
    /// caller is the one to send it.
    pub(crate) fn claim_release(&self) -> bool {
        !self.release_claimed.swap(true, Ordering::AcqRel)
    }

    /// Whether it timed out in a statement of its own since its last renewal (see `alone`): a
    /// row another transaction keeps locked, perhaps.
    pub(crate) fn timed_out_alone(&self) -> bool {
        self.alone.load(Ordering::Acquire) == FAILED_ALONE
    }

    /// How the lease was lost, if it was; checks the deadline too. A released lease was not lost;
    /// one given back answers the reason its waiters were told.
    pub(crate) fn loss(&self) -> Option<LossReason> {
        match self.loss.load(Ordering::Acquire) {
            HELD if self.clock.now() >= self.deadline() => {
                self.mark_lost(LossReason::DeadlinePassed)
            }
            code => loss_reason(code),
        }
    }

    /// When the local deadline falls, as it stands: the TTL after the last successful renewal
    /// was sent, minus the safety margin.
    pub(crate) fn deadline_instant(&self) -> std::time::Instant {
        self.clock.instant(self.deadline())
    }

    /// How long until the local deadline; zero once it passed, or once the lease is lost or
    /// released.
    pub(crate) fn time_left(&self) -> std::time::Duration {
        if !self.is_held() {
            return std::time::Duration::ZERO;
        }
        std::time::Duration::from_nanos(self.deadline().saturating_sub(self.clock.now()))
    }

    /// Whether this process may still act as the holder: not lost, not released, deadline ahead.
    pub(crate) fn is_held(&self) -> bool {
        self.loss().is_none() && self.loss.load(Ordering::Acquire) == HELD
    }

    /// Marks the lease released, its waiters told nothing. Returns how it had been lost, if it
    /// was lost (or given back) first.
    pub(crate) fn mark_released(&self) -> Option<LossReason> {
        if let Some(loss) = self.loss() {
            return Some(loss);
        }
        // Lost (or given back) between the read above and this exchange, by the renewer or a
        // fenced check on another thread: that loss, counted there, is the answer.
        match self
            .loss
            .compare_exchange(HELD, RELEASED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => None,
            Err(found) => loss_reason(found),
        }
    }

    /// Whether its holder let the lease go: released it, or [gave it back](Held::mark_given_back)
    /// (not a loss, its deadline passing included).
    pub(crate) fn is_let_go(&self) -> bool {
        self.loss.load(Ordering::Acquire) == RELEASED || self.is_given_back()
    }

    /// Whether the lease was [given back](Held::mark_given_back) by its holder: the release
    /// that was to follow is still owed by whoever drops its guard without sending it.
    pub(crate) fn is_given_back(&self) -> bool {
        self.loss.load(Ordering::Acquire) & GIVEN_BACK != 0
    }

    /// Marks the lease given back by its holder, which sends the release next (a campaign that
    /// ends), and wakes everybody waiting for its loss with `reason`, so that work raced against
    /// it stops before the lease is free: unless it was lost first (its deadline passed
    /// included), whose reason it returns, changing nothing. Not counted as a loss: the release
    /// that follows is counted. A lease given back already stays so (`None`): its waiters were
    /// told, and the release may follow once the work told has stopped.
    pub(crate) fn mark_given_back(&self, reason: LossReason) -> Option<LossReason> {
        if self.is_given_back() {
            return None;
        }
        if let Some(lost) = self.loss() {
            return Some(lost);
        }
        match self.leave_held(loss_code(reason) | GIVEN_BACK) {
            Ok(()) => {
                tracing::debug!(lease = %self.name, fence = %self.fence, %reason, "lease given back; its waiters told");
                self.stop_counting();
                None
            }
            Err(code) => loss_reason(code),
        }
    }

    /// Marks the lease lost (the first reason sticks) and wakes everybody waiting for that.
    /// Returns the reason that stuck; `None` when the lease had been released (or given back)
    /// first. A lease whose deadline passed before anything noticed was lost by it, whatever
    /// noticed it first (a renewal refused after the deadline, a shutdown).
    pub(crate) fn mark_lost(&self, reason: LossReason) -> Option<LossReason> {
        let reason = if self.clock.now() >= self.deadline() {
            LossReason::DeadlinePassed
        } else {
            reason
        };
        match self.leave_held(loss_code(reason)) {
            Ok(()) => {
                tracing::warn!(lease = %self.name, fence = %self.fence, holder = %self.holder, %reason, "lease lost");
                self.stats.lost(&self.name, reason);
                self.stop_counting();
                Some(reason)
            }
            Err(code) if code & GIVEN_BACK != 0 => None,
            Err(code) => loss_reason(code),
        }
    }

    /// Moves a held lease to state `to` and wakes everybody waiting for its loss; the state it
    /// found when the lease was no longer held.
    fn leave_held(&self, to: u8) -> Result<(), u8> {
        self.loss
            .compare_exchange(HELD, to, Ordering::AcqRel, Ordering::Acquire)?;
        let notify = self
            .notify
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(notify) = notify {
            // Nobody waiting is fine: the state above is what `loss` reads.
            let _ = notify.send(());
        }
        Ok(())
    }

    /// Marks the lease lost because a fenced check found it no longer held, unless it was lost
    /// (its deadline passed included) or released already: then nothing changes.
    pub(crate) fn mark_not_held(&self) {
        if self.loss().is_none() {
            self.mark_lost(LossReason::NotHeld);
        }
    }

    /// Counts a fenced check of this lease in its client's statistics.
    pub(crate) fn record_fenced_check(&self, check: FencedCheck) {
        self.stats.fenced_check(&self.name, check);
    }

    /// Completes when the lease is lost: on a rejected renewal, a fenced check that found it not
    /// held, or when the deadline passes; and when its holder gives it back telling why
    /// ([`mark_given_back`](Self::mark_given_back)).
    /// Never completes for a lease that was released.
    pub(crate) async fn lost(&self) -> LossReason {
        loop {
            if let Some(reason) = self.loss() {
                return reason;
            }
            if self.loss.load(Ordering::Acquire) == RELEASED {
                return future::pending().await;
            }
            let deadline = self.deadline();
            let mut sleep = std::pin::pin!(self.clock.sleep_until(deadline));
            let mut told = self.lost.clone();
            // Woken either by a loss, or by the deadline as it stood: the loop then reads whether
            // a renewal moved it. Every poll reads the clock too: a runtime fires a timer when
            // its driver next runs (tokio's, between batches of tasks), not when the timer is
            // polled, so a thread blocked past the deadline would otherwise find the timer
            // pending and let the work it guards take a step first.
            future::poll_fn(|cx| {
                if self.deadline() <= self.clock.now()
                    || told.poll_unpin(cx).is_ready()
                    || sleep.as_mut().poll(cx).is_ready()
                {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            })
            .await;
        }
    }
}
