//! [`Ticks`]: when the rounds of a schedule fall on the client's clock.

use std::time::Duration;

use crate::clock::ticks;

use super::{Jitter, Schedule};

/// The rounds of one schedule, in clock ticks: the next one due, its jitter included, and how
/// many were missed while a round ran over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ticks {
    period: u64,
    /// The time of the next round before its jitter, in clock ticks: on the wall clock's
    /// boundary, for an aligned schedule. Below zero for a boundary that passed before the
    /// client's clock began (a client built within a boundary's jitter, whose round is still
    /// due).
    next: i128,
    /// The next round's delay, drawn once for it.
    delay: u64,
    /// The wall clock's boundary the next round falls on, counted in periods (from the epoch
    /// shifted by the schedule's offset): the same number for the same round on every
    /// instance of an aligned schedule; counted from the start for one that is not.
    boundary: u64,
    jitter: Jitter,
}

impl Ticks {
    /// The rounds of `schedule`, each delayed as `jitter` draws, started at clock tick `now`,
    /// which is `since_epoch` on the wall clock: the first at once, or, when aligned, that of
    /// the last boundary of the period if its shared delay has not passed yet (an instance that
    /// starts, or begins to lead, within a boundary's jitter runs that boundary's round when
    /// the others would), and that of the next boundary otherwise.
    pub(crate) fn new(
        schedule: &Schedule,
        now: u64,
        since_epoch: Duration,
        jitter: Jitter,
    ) -> Self {
        let period = ticks(schedule.period()).max(1);
        let now = i128::from(now);
        let (next, boundary) = if schedule.is_aligned() {
            // Nanoseconds since the epoch shifted by the offset: below zero only in the first
            // period after the epoch (a clock set before 1970 reads as the epoch itself).
            let shifted =
                since_epoch.as_nanos() as i128 - schedule.boundary_offset().as_nanos() as i128;
            let into = shifted.rem_euclid(i128::from(period)) as u64;
            let at_or_before = shifted.div_euclid(i128::from(period));
            let last = u64::try_from(at_or_before).ok();
            let last_due = last.filter(|_| matches!(jitter, Jitter::Shared { .. }));
            match (into, last_due) {
                (0, _) => (now, at_or_before as u64),
                // The last boundary's round, due now or later.
                (into, Some(last)) if jitter.delay(last) >= into => (now - i128::from(into), last),
                // The offset is below a period, so the next boundary's number is not negative.
                (into, _) => (now + i128::from(period - into), (at_or_before + 1) as u64),
            }
        } else {
            (now, 0)
        };
        let delay = jitter.delay(boundary);
        Self {
            period,
            next,
            delay,
            boundary,
            jitter,
        }
    }

    /// The clock tick the next round is due at, its jitter included.
    pub(crate) fn due(&self) -> u64 {
        let due = (self.next + i128::from(self.delay)).max(0);
        u64::try_from(due).unwrap_or(u64::MAX)
    }

    /// The wall clock's boundary of the round due at [`due`](Ticks::due) (see the field).
    #[cfg(test)]
    pub(crate) fn boundary(&self) -> u64 {
        self.boundary
    }

    /// Moves on from the round due at [`due`](Ticks::due), whose run ended at `now`: to the
    /// first round not yet past, each round's time its jitter included (a round delayed past
    /// the end of the run is not missed). Answers how many rounds fell while it ran, which are
    /// skipped rather than run late one after another.
    pub(crate) fn advance(&mut self, now: u64) -> u64 {
        let (now, period) = (i128::from(now), i128::from(self.period));
        let limit = i128::from(self.jitter.limit());
        let mut next = self.next + period;
        // Rounds whose time, at the latest their jitter allows, had passed: missed whatever
        // their delay.
        let late = now - next - limit;
        let mut missed = if late <= 0 {
            0
        } else {
            u64::try_from((late + period - 1) / period).unwrap_or(u64::MAX)
        };
        next += i128::from(missed) * period;
        let mut boundary = self.boundary.saturating_add(1).saturating_add(missed);
        let mut delay = self.jitter.delay(boundary);
        // The first round left may still have fallen before `now` by its delay; the one after
        // it falls at least a period less the jitter (three fifths of one) later: not before
        // `now`.
        if next + i128::from(delay) < now {
            missed += 1;
            next += period;
            boundary = boundary.saturating_add(1);
            delay = self.jitter.delay(boundary);
        }
        self.next = next;
        self.boundary = boundary;
        self.delay = delay;
        missed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    fn every(secs: u64) -> Schedule {
        Schedule::every(Duration::from_secs(secs)).unwrap()
    }

    #[test]
    fn an_interval_starts_at_once_and_keeps_its_period() {
        let mut ticks = Ticks::new(
            &every(10),
            5 * SECOND,
            Duration::from_secs(1_000_003),
            Jitter::None,
        );
        assert_eq!(ticks.due(), 5 * SECOND);
        assert_eq!(ticks.advance(6 * SECOND), 0);
        assert_eq!(ticks.due(), 15 * SECOND);
    }

    #[test]
    fn an_aligned_schedule_falls_on_the_wall_clocks_boundaries() {
        // 1,000,003 s since the epoch: 7 s short of a boundary of 10 s.
        let ticks = Ticks::new(
            &every(10).aligned(),
            5 * SECOND,
            Duration::from_secs(1_000_003),
            Jitter::None,
        );
        assert_eq!(ticks.due(), 12 * SECOND);
        let on_it = Ticks::new(
            &every(10).aligned(),
            5 * SECOND,
            Duration::from_secs(1_000_000),
            Jitter::None,
        );
        assert_eq!(on_it.due(), 5 * SECOND, "on the boundary: at once");
        // Boundaries at 4 s past each 10: the next at 1,000,004 s, 1 s away.
        let shifted = every(10).offset(Duration::from_secs(14));
        let ticks = Ticks::new(
            &shifted,
            5 * SECOND,
            Duration::from_secs(1_000_003),
            Jitter::None,
        );
        assert_eq!(ticks.due(), 6 * SECOND);
    }

    #[test]
    fn an_aligned_rounds_boundary_is_the_same_on_every_instance() {
        // Two instances, started 3 s and 17 s past the boundary 100,000 of 10 s, on clocks
        // of their own: both count their next round as the boundary 100,001, and the one
        // after as 100,002, also past missed rounds.
        let schedule = every(10).aligned();
        let mut a = Ticks::new(
            &schedule,
            5 * SECOND,
            Duration::from_secs(1_000_003),
            Jitter::None,
        );
        let mut b = Ticks::new(
            &schedule,
            90 * SECOND,
            Duration::from_secs(1_000_007),
            Jitter::None,
        );
        assert_eq!((a.boundary(), b.boundary()), (100_001, 100_001));
        assert_eq!(a.advance(a.due()), 0);
        assert_eq!(b.advance(b.due() + 15 * SECOND), 1);
        assert_eq!((a.boundary(), b.boundary()), (100_002, 100_003));
        assert_eq!(a.advance(a.due()), 0);
        assert_eq!(a.boundary(), 100_003);
        // On a boundary: that one. Shifted by an offset: counted from the shifted epoch (the
        // next round at 1,000,004 s is the boundary 100,000 of it).
        let on_it = Ticks::new(&schedule, 0, Duration::from_secs(1_000_000), Jitter::None);
        let shifted = Ticks::new(
            &every(10).offset(Duration::from_secs(4)),
            0,
            Duration::from_secs(1_000_003),
            Jitter::None,
        );
        assert_eq!((on_it.boundary(), shifted.boundary()), (100_000, 100_000));
        // A wall clock read as the epoch itself (one set before 1970 reads so): no overflow.
        let at_epoch = Ticks::new(
            &every(10).offset(Duration::from_secs(4)),
            0,
            Duration::ZERO,
            Jitter::None,
        );
        assert_eq!((at_epoch.due(), at_epoch.boundary()), (4 * SECOND, 0));
        let at_four = Ticks::new(
            &every(10).offset(Duration::from_secs(4)),
            0,
            Duration::from_secs(4),
            Jitter::None,
        );
        assert_eq!((at_four.due(), at_four.boundary()), (0, 0));
    }

    #[test]
    fn rounds_that_fall_while_one_runs_are_skipped_and_counted() {
        let mut ticks = Ticks::new(&every(10), 0, Duration::ZERO, Jitter::None);
        // The round at 0 ran until 35 s: those at 10, 20 and 30 s fell meanwhile.
        assert_eq!(ticks.advance(35 * SECOND), 3);
        assert_eq!(ticks.due(), 40 * SECOND);
        // Ending right on a round's time misses nothing: that round starts now.
        assert_eq!(ticks.advance(50 * SECOND), 0);
        assert_eq!(ticks.due(), 50 * SECOND);
    }

    fn shared(limit_secs: u64) -> Jitter {
        Jitter::new(
            Duration::from_secs(limit_secs),
            &crate::LeaseName::new("alerts").unwrap(),
            true,
        )
    }

    /// The first boundary from 100,000 on (of 10 s, at 1,000,000 s) whose shared delay of up
    /// to 4 s is at least `at_least` seconds, and that delay in ticks.
    fn boundary_delayed(jitter: &Jitter, at_least: u64) -> (u64, u64) {
        (100_000..100_100)
            .map(|boundary| (boundary, jitter.delay(boundary)))
            .find(|(_, delay)| *delay >= at_least * SECOND)
            .expect("a delay that long among 100 boundaries")
    }

    #[test]
    fn an_instance_started_within_a_boundarys_shared_delay_runs_that_boundarys_round() {
        let jitter = shared(4);
        let schedule = every(10).aligned().jitter(Duration::from_secs(4));
        let (boundary, delay) = boundary_delayed(&jitter, 2);
        let wall = Duration::from_secs(boundary * 10);
        // Started 1 s past the boundary, its round 1 s or more ahead: that round, when every
        // other instance has it.
        let started = Ticks::new(
            &schedule,
            50 * SECOND,
            wall + Duration::from_secs(1),
            jitter.clone(),
        );
        assert_eq!(started.boundary(), boundary);
        assert_eq!(started.due(), 49 * SECOND + delay);
        // Started after that round's time: the next boundary's.
        let late = Ticks::new(
            &schedule,
            50 * SECOND,
            wall + Duration::from_nanos(delay + 1),
            jitter.clone(),
        );
        assert_eq!(late.boundary(), boundary + 1);
        assert_eq!(
            late.due(),
            50 * SECOND - delay - 1 + 10 * SECOND + jitter.delay(boundary + 1)
        );
        // A client built after the boundary (its clock starts at zero): the same round, due
        // as far ahead.
        let fresh = Ticks::new(&schedule, 0, wall + Duration::from_secs(1), jitter.clone());
        assert_eq!(fresh.boundary(), boundary);
        assert_eq!(fresh.due(), delay - SECOND);
        // Started on that round's time exactly: that round, due now.
        let on_time = Ticks::new(
            &schedule,
            0,
            wall + Duration::from_nanos(delay),
            jitter.clone(),
        );
        assert_eq!((on_time.boundary(), on_time.due()), (boundary, 0));
        // A delay drawn at random belongs to no boundary: the next boundary's round, as before.
        let random = Jitter::new(
            Duration::from_secs(4),
            &crate::LeaseName::new("alerts").unwrap(),
            false,
        );
        let unshared = Ticks::new(
            &schedule,
            50 * SECOND,
            wall + Duration::from_secs(1),
            random,
        );
        assert_eq!(unshared.boundary(), boundary + 1);
    }

    #[test]
    fn a_round_delayed_past_the_end_of_a_long_run_is_not_missed() {
        let jitter = shared(4);
        let schedule = every(10).aligned().jitter(Duration::from_secs(4));
        let (boundary, delay) = boundary_delayed(&jitter, 2);
        // The round of the boundary before, run from its time until 1 s past this boundary:
        // this boundary's round, due 2 s or more past it, has not fallen yet.
        let mut ticks = Ticks::new(
            &schedule,
            0,
            Duration::from_secs((boundary - 1) * 10),
            jitter.clone(),
        );
        assert_eq!(ticks.boundary(), boundary - 1);
        assert_eq!(ticks.advance(11 * SECOND), 0);
        assert_eq!(ticks.boundary(), boundary);
        assert_eq!(ticks.due(), 10 * SECOND + delay);
        // The same run until just past that round's time: missed, the next one due.
        let mut longer = Ticks::new(
            &schedule,
            0,
            Duration::from_secs((boundary - 1) * 10),
            jitter.clone(),
        );
        assert_eq!(longer.advance(10 * SECOND + delay + 1), 1);
        assert_eq!(longer.boundary(), boundary + 1);
        assert_eq!(longer.due(), 20 * SECOND + jitter.delay(boundary + 1));
        // Far past: every round whose time passed, at the latest its jitter allows, counted.
        let mut far = Ticks::new(
            &schedule,
            0,
            Duration::from_secs(boundary * 10),
            jitter.clone(),
        );
        let from = far.boundary();
        let missed = far.advance(1_000 * SECOND);
        assert_eq!(from + 1 + missed, far.boundary());
        assert!(far.due() >= 1_000 * SECOND, "{far:?}");
        assert!((98..=100).contains(&missed), "{missed}");
    }
}
