//! [`Backoff`]: pauses between attempts that double up to a limit, drawn at random.

use std::time::Duration;

/// Exponential backoff with "equal jitter": each pause is drawn between half the current limit
/// and the limit, and the limit doubles up to its longest. The random half keeps instances that
/// started waiting together from retrying in lockstep; the fixed half keeps each pause useful.
#[derive(Debug)]
pub(crate) struct Backoff {
    limit: Duration,
    longest: Duration,
}

impl Backoff {
    pub(crate) fn new((first, longest): (Duration, Duration)) -> Self {
        Self {
            limit: first,
            longest,
        }
    }

    pub(crate) fn next_pause(&mut self) -> Duration {
        let half = self.next_limit() / 2;
        half + half.mul_f64(rand::random::<f64>())
    }

    /// The next pause's limit itself, without the jitter: for a pause of one client's own,
    /// which no other instance waits in lockstep with.
    pub(crate) fn next_limit(&mut self) -> Duration {
        let limit = self.limit;
        // Saturating: a longest pause of `Duration::MAX` means no cap, not an overflow.
        self.limit = limit.saturating_mul(2).min(self.longest);
        limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_longest_pause_with_jitter_in_the_upper_half() {
        let mut backoff = Backoff::new((Duration::from_millis(100), Duration::from_millis(800)));
        let limits = [100, 200, 400, 800, 800, 800];
        for limit in limits.map(Duration::from_millis) {
            let pause = backoff.next_pause();
            assert!(
                pause >= limit / 2 && pause <= limit,
                "{pause:?} for {limit:?}"
            );
        }
    }

    #[test]
    fn a_longest_pause_without_a_cap_never_overflows() {
        let mut backoff = Backoff::new((Duration::from_secs(1), Duration::MAX));
        for _ in 0..200 {
            let pause = backoff.next_pause();
            assert!(pause >= Duration::from_millis(500), "{pause:?}");
        }
        assert_eq!(backoff.limit, Duration::MAX, "the limit saturates");
    }
}
