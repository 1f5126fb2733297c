//! [`Jitter`]: how late after its time each round of a schedule falls.

use std::time::Duration;

use crate::LeaseName;
use crate::clock::ticks;

/// How each round's delay below a schedule's jitter limit is drawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Jitter {
    /// No delay.
    None,
    /// At random on each instance, round after round: instances that all try each round do
    /// not all call the store at the same instant.
    Random(Duration),
    /// From the lease's name and the round's boundary on the wall clock, the same on every
    /// instance: a leader's aligned rounds, which the other instances skip, so a new leader's
    /// round of a boundary falls when the old leader's did (drawn at random instead, a new
    /// leader whose delay for the boundary just run fell later would run it again, and one
    /// whose delay fell earlier would skip a round the old leader gave up before its own).
    /// Names drawn apart spread their rounds over the limit as random delays would.
    Shared {
        /// The delay's limit.
        limit: Duration,
        /// The lease's name, hashed.
        seed: u64,
    },
}

impl Jitter {
    /// The delays below `limit` of a schedule for `name`: shared by every instance when
    /// `shared`.
    pub(crate) fn new(limit: Duration, name: &LeaseName, shared: bool) -> Self {
        match (limit.is_zero(), shared) {
            (true, _) => Self::None,
            (false, false) => Self::Random(limit),
            (false, true) => Self::Shared {
                limit,
                seed: seed(name.as_str()),
            },
        }
    }

    /// The longest delay it draws, in clock ticks.
    pub(crate) fn limit(&self) -> u64 {
        match *self {
            Self::None => 0,
            Self::Random(limit) | Self::Shared { limit, .. } => ticks(limit),
        }
    }

    /// The delay of the round at `boundary` (the wall clock's boundary number, for a shared
    /// delay), in clock ticks.
    pub(crate) fn delay(&self, boundary: u64) -> u64 {
        match *self {
            Self::None => 0,
            Self::Random(limit) => ticks(limit.mul_f64(rand::random::<f64>())),
            Self::Shared { limit, seed } => {
                let draw = mix(seed ^ mix(boundary));
                // The top 53 bits: a fraction in [0, 1) that an `f64` holds exactly.
                let fraction = (draw >> 11) as f64 / (1u64 << 53) as f64;
                ticks(limit.mul_f64(fraction))
            }
        }
    }
}

/// A hash of `name` that every process and every build computes alike, as the standard
/// library's hashers are not promised to: each byte folded in through [`mix`].
fn seed(name: &str) -> u64 {
    name.bytes()
        .fold(0, |hash, byte| mix(hash ^ u64::from(byte)))
}

/// SplitMix64's finaliser: spreads a number's bits over the whole word, so that neighbouring
/// boundaries draw unrelated delays.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(name: &str) -> LeaseName {
        LeaseName::new(name).unwrap()
    }

    #[test]
    fn a_shared_delay_is_the_same_for_the_same_name_and_boundary_and_below_its_limit() {
        let limit = Duration::from_secs(1800);
        let alerts = Jitter::new(limit, &name("alerts"), true);
        let again = Jitter::new(limit, &name("alerts"), true);
        let reports = Jitter::new(limit, &name("reports"), true);
        let delays: Vec<u64> = (0..1000).map(|boundary| alerts.delay(boundary)).collect();
        for (boundary, delay) in (0..1000).zip(&delays) {
            assert_eq!(again.delay(boundary), *delay);
            assert!(*delay < ticks(limit), "{delay}");
        }
        // Spread over the limit, and another name's apart.
        let low = delays.iter().filter(|d| **d < ticks(limit / 2)).count();
        assert!(
            (400..=600).contains(&low),
            "{low} of 1000 in the first half"
        );
        assert!((0..1000).any(|b| reports.delay(b) != alerts.delay(b)));
        // Fixed for good: instances of other builds draw the same.
        assert_eq!(seed("alerts"), 0x0305_afc7_678f_ef00);
    }

    #[test]
    fn no_limit_is_no_delay_and_a_random_one_stays_below_its_limit() {
        let limit = Duration::from_millis(10);
        assert_eq!(Jitter::new(Duration::ZERO, &name("a"), true).delay(7), 0);
        let random = Jitter::new(limit, &name("a"), false);
        assert!((0..100).all(|_| random.delay(7) < ticks(limit)));
    }
}
