//! [`Schedule`]: when a job's rounds fall, and [`Scheduled`], a running schedule.

mod jitter;
mod scheduled;
mod ticks;

use std::time::Duration;

use crate::Error;

pub(crate) use self::jitter::Jitter;
pub(crate) use self::scheduled::{EndsWhenDropped, Round, Rounds};
pub use self::scheduled::{ScheduleStats, Scheduled};
pub(crate) use self::ticks::Ticks;

/// When a job's rounds fall: every period, from the moment the schedule starts or on the
/// clock's boundaries, each round delayed by a random jitter; and how long a round's lease is
/// kept at least ([`min_hold`](Schedule::min_hold), by default most of the period, so that each
/// round runs on one instance). Run one with [`LeaseClient::schedule`](crate::LeaseClient::schedule) (whichever
/// instance wins the round runs it) or
/// [`LeaseClient::schedule_on_leader`](crate::LeaseClient::schedule_on_leader) (the elected
/// leader runs every round).
///
/// A round still running when the next one falls (at its time plus its jitter's delay) is not
/// started again: the rounds it overran are skipped and counted ([`ScheduleStats::missed`]),
/// never replayed.
///
/// ```
/// # fn main() -> Result<(), lease_core::Error> {
/// use std::time::Duration;
/// use lease_core::Schedule;
///
/// // On the hour, on every instance alike, within a minute of it.
/// let hourly = Schedule::every(Duration::from_secs(3600))?
///     .aligned()
///     .jitter(Duration::from_secs(60));
/// // Every 15 minutes from start, at most once per 14 minutes across all instances.
/// let checks = Schedule::every(Duration::from_secs(900))?.min_hold(Duration::from_secs(840));
/// assert_eq!(checks.period(), Duration::from_secs(900));
/// // Without a minimum hold of its own, a round's lease is kept the period less the jitter and
/// // a tenth of the period: 53 minutes here.
/// assert_eq!(hourly.hold(), Duration::from_secs(3600 - 60 - 360));
/// # let _ = hourly; Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct Schedule {
    period: Duration,
    aligned: bool,
    offset: Duration,
    jitter: Duration,
    /// `None` until set: then [`hold`](Schedule::hold) is the default.
    min_hold: Option<Duration>,
}

impl Schedule {
    /// The shortest period: rounds closer than the time a round takes would follow one another
    /// without a pause, and a schedule's task would never leave its runtime's thread to the
    /// others (a unit mixed up: `from_nanos` for `from_secs`). Longer than the shortest renewal
    /// period ([`LeaseConfig::SHORTEST_PERIOD`](crate::LeaseConfig::SHORTEST_PERIOD)): a round
    /// takes a lease, a renewal is one statement among many.
    pub const SHORTEST_PERIOD: Duration = Duration::from_millis(1);

    /// A round every `period`, the first at once.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a period shorter than
    /// [`SHORTEST_PERIOD`](Schedule::SHORTEST_PERIOD).
    pub fn every(period: Duration) -> Result<Self, Error> {
        if period < Self::SHORTEST_PERIOD {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "a schedule's period must be at least {:?}, got {period:?}",
                    Self::SHORTEST_PERIOD
                ),
            });
        }
        Ok(Self {
            period,
            aligned: false,
            offset: Duration::ZERO,
            jitter: Duration::ZERO,
            min_hold: None,
        })
    }

    /// Rounds on the wall clock's boundaries of the period (multiples of it since the Unix
    /// epoch: on the hour for an hour, at :00, :15, :30 and :45 for 15 minutes), the same on
    /// every instance; the first at the next boundary (on the leader, with a
    /// [`jitter`](Schedule::jitter), the last boundary's when its delay has not run out). The
    /// wall clock is read once, when the
    /// schedule starts; the rounds then follow the runtime's clock, period after period (so a
    /// runtime whose clock runs faster, as a test's or a demonstration's, runs them faster
    /// too). A wall clock stepped later (NTP correcting one that started off) leaves the rounds
    /// off its boundaries by the step until the schedule starts again: start schedules once
    /// the clock is synchronised.
    pub fn aligned(mut self) -> Self {
        self.aligned = true;
        self
    }

    /// Rounds on the wall clock's boundaries shifted by `offset`: daily at 03:00 UTC is
    /// `Schedule::every(24 h)?.offset(3 h)`. Implies [`aligned`](Schedule::aligned); an offset
    /// of a period or more wraps around.
    pub fn offset(mut self, offset: Duration) -> Self {
        self.aligned = true;
        self.offset = Duration::from_nanos((offset.as_nanos() % self.period.as_nanos()) as u64);
        self
    }

    /// Delays each round by a random time below `jitter`, so instances do not all call the store
    /// at the same instant. At most two fifths of the period (a longer one is cut to it), so
    /// that the default [`hold`](Schedule::hold) keeps a tenth of the period between itself and
    /// both what it must outlast and what it must not reach.
    ///
    /// On the elected leader ([`schedule_on_leader`](crate::LeaseClient::schedule_on_leader)),
    /// where the other instances do not call the store at all, an
    /// [`aligned`](Schedule::aligned) schedule's delay is drawn from the lease's name and the
    /// boundary instead, the same on every instance (and schedules of other names spread over
    /// the jitter as random delays would): a new leader's round of a boundary falls when the old
    /// leader's did, so leadership that moves within the jitter does not run a round again;
    /// and a schedule that starts past a boundary but before that boundary's delay has run
    /// out runs that boundary's round, when the old leader would have (an instance started by
    /// a rolling deploy, which leads once the old one has shut down). A round that falls while
    /// nobody leads (between the old leader's going and the new one's
    /// election: at once where the store pushes releases, up to the campaign's retry where it
    /// does not) is skipped.
    pub fn jitter(mut self, jitter: Duration) -> Self {
        self.jitter = jitter.min(self.period / 5 * 2);
        self
    }

    /// Keeps each round's lease taken until `min_hold` after it was taken, even when the work
    /// ends sooner: at most one run per `min_hold` across all instances. Choose a little under
    /// the period less the [`jitter`](Schedule::jitter), so the next round's run is not blocked
    /// by this one's hold: the hold counts from when this round took the lease, its jitter
    /// included, and the next round may fall as early as its own jitter allows (with a period
    /// of 15 minutes, a jitter of 5 and a hold of 14, a round taken 4 minutes late holds the
    /// lease until 3 minutes into the next period, and an instance whose next round falls
    /// before then skips it). See [`RunOptions::min_hold`](crate::RunOptions::min_hold).
    ///
    /// Unset, the hold is the period less the jitter and a tenth of the period, half the
    /// period or more (see [`hold`](Schedule::hold)). Without a hold, an instance that tries a round after its
    /// winner has finished (its jitter fell later, its clock differs, its rounds count from
    /// another start) would run the round again. `min_hold(Duration::ZERO)` gives the lease
    /// back as soon as the work ends: for work that is harmless to run again, or rounds you
    /// deduplicate yourself.
    pub fn min_hold(mut self, min_hold: Duration) -> Self {
        self.min_hold = Some(min_hold);
        self
    }

    /// How long each round's lease is kept at least: the [`min_hold`](Schedule::min_hold) set,
    /// or else the period less the jitter and a tenth of the period (half the period or more,
    /// as the jitter is two fifths of it at most). The winner's next round falls at least the
    /// period less the jitter after this one took the lease, so the default hold ends a tenth
    /// of the period before it, the store's answer to the acquisition included (a `min_hold`
    /// longer than the period less the jitter may keep it out); an instance that tries the
    /// same round later (within the jitter, or on a clock that differs by less than a tenth of
    /// the period more) finds the lease still taken and skips it.
    pub fn hold(&self) -> Duration {
        self.min_hold.unwrap_or_else(|| {
            self.period
                .saturating_sub(self.jitter)
                .saturating_sub(self.period / 10)
        })
    }

    /// The time between two rounds.
    pub fn period(&self) -> Duration {
        self.period
    }

    pub(crate) fn is_aligned(&self) -> bool {
        self.aligned
    }

    pub(crate) fn boundary_offset(&self) -> Duration {
        self.offset
    }

    /// The longest delay of a round: the [`jitter`](Schedule::jitter) set, cut to two fifths
    /// of the period.
    pub fn jitter_limit(&self) -> Duration {
        self.jitter
    }
}
