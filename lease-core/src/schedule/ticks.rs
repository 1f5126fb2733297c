//! [`Ticks`]: when the rounds of a schedule fall on the client's clock.

use std::time::Duration;

use crate::clock::ticks;

use super::Schedule;

/// The rounds of one schedule, in clock ticks: the next one due, and how many were missed while
/// a round ran over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticks {
    period: u64,
    next: u64,
    /// The wall clock's boundary the next round falls on, counted in periods (from the epoch
    /// shifted by the schedule's offset): the same number for the same round on every
    /// instance of an aligned schedule; counted from the start for one that is not.
    boundary: u64,
}

impl Ticks {
    /// The rounds of `schedule` started at clock tick `now`, which is `since_epoch` on the wall
    /// clock: the first at once, or at the next boundary of the period when aligned.
    pub(crate) fn new(schedule: &Schedule, now: u64, since_epoch: Duration) -> Self {
        let period = ticks(schedule.period()).max(1);
        let (next, boundary) = if schedule.is_aligned() {
            // Nanoseconds since the epoch shifted by the offset: below zero only in the first
            // period after the epoch (a clock set before 1970 reads as the epoch itself).
            let shifted =
                since_epoch.as_nanos() as i128 - schedule.boundary_offset().as_nanos() as i128;
            let into = shifted.rem_euclid(i128::from(period)) as u64;
            let at_or_before = shifted.div_euclid(i128::from(period));
            if into == 0 {
                (now, at_or_before as u64)
            } else {
                // The offset is below a period, so the next boundary's number is not negative.
                (now.saturating_add(period - into), (at_or_before + 1) as u64)
            }
        } else {
            (now, 0)
        };
        Self {
            period,
            next,
            boundary,
        }
    }

    /// The clock tick the next round is due at.
    pub(crate) fn next(&self) -> u64 {
        self.next
    }

    /// The wall clock's boundary of the round due at [`next`](Ticks::next) (see the field).
    pub(crate) fn boundary(&self) -> u64 {
        self.boundary
    }

    /// Moves on from the round due at [`next`](Ticks::next), whose run ended at `now`: to the
    /// first round not yet past. Answers how many rounds fell while it ran, which are skipped
    /// rather than run late one after another.
    pub(crate) fn advance(&mut self, now: u64) -> u64 {
        let after = self.next.saturating_add(self.period);
        let missed = if now <= after {
            0
        } else {
            (now - after).div_ceil(self.period)
        };
        self.next = after.saturating_add(missed.saturating_mul(self.period));
        self.boundary = self.boundary.saturating_add(1).saturating_add(missed);
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
        let mut ticks = Ticks::new(&every(10), 5 * SECOND, Duration::from_secs(1_000_003));
        assert_eq!(ticks.next(), 5 * SECOND);
        assert_eq!(ticks.advance(6 * SECOND), 0);
        assert_eq!(ticks.next(), 15 * SECOND);
    }

    #[test]
    fn an_aligned_schedule_falls_on_the_wall_clocks_boundaries() {
        // 1,000,003 s since the epoch: 7 s short of a boundary of 10 s.
        let ticks = Ticks::new(
            &every(10).aligned(),
            5 * SECOND,
            Duration::from_secs(1_000_003),
        );
        assert_eq!(ticks.next(), 12 * SECOND);
        let on_it = Ticks::new(
            &every(10).aligned(),
            5 * SECOND,
            Duration::from_secs(1_000_000),
        );
        assert_eq!(on_it.next(), 5 * SECOND, "on the boundary: at once");
        // Boundaries at 4 s past each 10: the next at 1,000,004 s, 1 s away.
        let shifted = every(10).offset(Duration::from_secs(14));
        let ticks = Ticks::new(&shifted, 5 * SECOND, Duration::from_secs(1_000_003));
        assert_eq!(ticks.next(), 6 * SECOND);
    }

    #[test]
    fn an_aligned_rounds_boundary_is_the_same_on_every_instance() {
        // Two instances, started 3 s and 17 s past the boundary 100,000 of 10 s, on clocks
        // of their own: both count their next round as the boundary 100,001, and the one
        // after as 100,002, also past missed rounds.
        let schedule = every(10).aligned();
        let mut a = Ticks::new(&schedule, 5 * SECOND, Duration::from_secs(1_000_003));
        let mut b = Ticks::new(&schedule, 90 * SECOND, Duration::from_secs(1_000_007));
        assert_eq!((a.boundary(), b.boundary()), (100_001, 100_001));
        assert_eq!(a.advance(a.next()), 0);
        assert_eq!(b.advance(b.next() + 15 * SECOND), 1);
        assert_eq!((a.boundary(), b.boundary()), (100_002, 100_003));
        assert_eq!(a.advance(a.next()), 0);
        assert_eq!(a.boundary(), 100_003);
        // On a boundary: that one. Shifted by an offset: counted from the shifted epoch (the
        // next round at 1,000,004 s is the boundary 100,000 of it).
        let on_it = Ticks::new(&schedule, 0, Duration::from_secs(1_000_000));
        let shifted = Ticks::new(
            &every(10).offset(Duration::from_secs(4)),
            0,
            Duration::from_secs(1_000_003),
        );
        assert_eq!((on_it.boundary(), shifted.boundary()), (100_000, 100_000));
        // A wall clock read as the epoch itself (one set before 1970 reads so): no overflow.
        let at_epoch = Ticks::new(&every(10).offset(Duration::from_secs(4)), 0, Duration::ZERO);
        assert_eq!((at_epoch.next(), at_epoch.boundary()), (4 * SECOND, 0));
        let at_four = Ticks::new(
            &every(10).offset(Duration::from_secs(4)),
            0,
            Duration::from_secs(4),
        );
        assert_eq!((at_four.next(), at_four.boundary()), (0, 0));
    }

    #[test]
    fn rounds_that_fall_while_one_runs_are_skipped_and_counted() {
        let mut ticks = Ticks::new(&every(10), 0, Duration::ZERO);
        // The round at 0 ran until 35 s: those at 10, 20 and 30 s fell meanwhile.
        assert_eq!(ticks.advance(35 * SECOND), 3);
        assert_eq!(ticks.next(), 40 * SECOND);
        // Ending right on a round's time misses nothing: that round starts now.
        assert_eq!(ticks.advance(50 * SECOND), 0);
        assert_eq!(ticks.next(), 50 * SECOND);
    }
}
