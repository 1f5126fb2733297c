//! [`Scheduled`]: a running schedule, and [`ScheduleStats`], what its rounds did.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::LeaseName;
use crate::signal::Signal;

/// What the rounds of one schedule did on this instance, since it started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ScheduleStats {
    /// Rounds this instance ran, or took the lease for: those counted in
    /// [`lost`](ScheduleStats::lost) too.
    pub ran: u64,
    /// Rounds another instance had (the lease was held elsewhere, or this one did not lead).
    pub skipped: u64,
    /// Rounds that fell while an earlier round still ran: skipped, not run late.
    pub missed: u64,
    /// Rounds whose lease could not be taken because the store failed (on a leader's schedule,
    /// because the campaign's attempts failed, or a permanent error ended it).
    pub failed: u64,
    /// Rounds whose work was stopped (or let finish, with
    /// [`OnLoss::Finish`](crate::OnLoss::Finish)): the lease was lost while the work ran, or
    /// before it started (an acquisition answered after the lease's local deadline: the work
    /// never ran), or the client's shutdown stopped it.
    pub lost: u64,
}

/// The counters of one schedule, and its two signals: stop (asked) and ended (the loop is done).
#[derive(Debug)]
pub(crate) struct Rounds {
    name: LeaseName,
    ran: AtomicU64,
    skipped: AtomicU64,
    missed: AtomicU64,
    failed: AtomicU64,
    lost: AtomicU64,
    stop: Signal,
    ended: Signal,
}

/// Ends its schedule when dropped; see [`Rounds::ends_when_dropped`].
#[derive(Debug)]
pub(crate) struct EndsWhenDropped(Arc<Rounds>);

impl Drop for EndsWhenDropped {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// How one round ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Round {
    Ran,
    Skipped,
    Failed,
    Lost,
}

impl Rounds {
    pub(crate) fn new(name: LeaseName) -> Self {
        Self {
            name,
            ran: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            missed: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            stop: Signal::new(),
            ended: Signal::new(),
        }
    }

    pub(crate) fn name(&self) -> &LeaseName {
        &self.name
    }

    pub(crate) fn count(&self, round: Round) {
        let counter = match round {
            Round::Ran => &self.ran,
            Round::Skipped => &self.skipped,
            Round::Failed => &self.failed,
            Round::Lost => {
                self.ran.fetch_add(1, Ordering::Relaxed);
                &self.lost
            }
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn missed(&self, rounds: u64) {
        self.missed.fetch_add(rounds, Ordering::Relaxed);
    }

    /// Completes once a stop was asked for.
    pub(crate) fn stopped(&self) -> impl Future<Output = ()> + Send + Unpin + 'static {
        self.stop.fired()
    }

    /// Whether a stop was asked for.
    pub(crate) fn is_stop_asked(&self) -> bool {
        self.stop.is_fired()
    }

    /// The loop is done.
    pub(crate) fn end(&self) {
        self.ended.fire();
    }

    /// What ends the schedule when the loop's future is gone: dropped at the end of the loop,
    /// or with the future when it never got there (a round whose work panicked took the task
    /// down, the runtime shut down, the future of `schedule_on_this_task` was let go), so that
    /// [`Scheduled::stop`] never waits for a loop that no longer runs.
    pub(crate) fn ends_when_dropped(self: &Arc<Self>) -> EndsWhenDropped {
        EndsWhenDropped(Arc::clone(self))
    }

    fn stats(&self) -> ScheduleStats {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        ScheduleStats {
            ran: load(&self.ran),
            skipped: load(&self.skipped),
            missed: load(&self.missed),
            failed: load(&self.failed),
            lost: load(&self.lost),
        }
    }
}

/// Asks the loop to stop when the last [`Scheduled`] goes.
#[derive(Debug)]
struct StopOnDrop(Arc<Rounds>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop.fire();
    }
}

/// A schedule running on this instance; from
/// [`LeaseClient::schedule`](crate::LeaseClient::schedule) or
/// [`schedule_on_leader`](crate::LeaseClient::schedule_on_leader). Cheap to clone.
///
/// It runs until [`stop`](Scheduled::stop) is called, the last clone is dropped, or the
/// client's [`shutdown`](crate::LeaseClient::shutdown) begins: then no new round starts, and
/// a round that runs finishes (within the shutdown's grace period, during a shutdown; a leader
/// schedule's round is stopped as the shutdown begins, since the shutdown gives the leadership
/// back at once).
#[derive(Clone)]
#[must_use = "a schedule stops when its last handle is dropped"]
pub struct Scheduled {
    stop: Arc<StopOnDrop>,
}

impl Scheduled {
    pub(crate) fn new(rounds: Arc<Rounds>) -> Self {
        Self {
            stop: Arc::new(StopOnDrop(rounds)),
        }
    }

    fn rounds(&self) -> &Rounds {
        &self.stop.0
    }

    /// The lease the schedule's rounds take.
    pub fn name(&self) -> &LeaseName {
        self.rounds().name()
    }

    /// What its rounds did so far.
    pub fn stats(&self) -> ScheduleStats {
        self.rounds().stats()
    }

    /// Whether it has stopped: no round runs, and none will.
    pub fn is_stopped(&self) -> bool {
        self.rounds().ended.is_fired()
    }

    /// Stops the schedule, for every clone of this handle: no new round starts. Returns once
    /// the round that runs, if one does, has ended and given its lease back (kept until the
    /// round's [hold](crate::Schedule::hold) ends). Awaited by the round's own work, it would
    /// wait for itself: the work stops its schedule with [`Scheduled::stop`] on a task of its
    /// own, or by dropping every handle. A schedule whose loop runs on the caller's task
    /// ([`schedule_on_this_task`](crate::LeaseClient::schedule_on_this_task)) ends when that
    /// loop is polled to its end or dropped: a loop kept but no longer polled (left in a
    /// finished `select!`) keeps this waiting; bound the wait with a timeout there.
    ///
    /// # Cancel safety
    /// Cancel safe: once polled, the schedule stops whatever happens; cancelling only stops the
    /// waiting for its running round.
    pub async fn stop(self) {
        self.rounds().stop.fire();
        self.rounds().ended.fired().await;
    }
}

impl fmt::Debug for Scheduled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduled")
            .field("name", self.name())
            .field("stats", &self.stats())
            .field("stopped", &self.is_stopped())
            .finish()
    }
}
