//! [`SimClock`]: the demo's compressed clock, where a simulated minute passes in a fraction of a
//! second.

use std::fmt;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Simulated time since the demo started, mapped onto the real monotonic clock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SimClock {
    epoch: Instant,
    /// The wall clock's reading at `epoch`.
    wall_epoch: SystemTime,
    /// How long one simulated minute takes in real time.
    minute: Duration,
}

impl SimClock {
    /// A clock whose 0:00 is `lead` from now: time for the first instance to start its
    /// schedules, so that their first rounds of the story fall at 0:00.
    pub(crate) fn start(minute: Duration, lead: Duration) -> Self {
        Self {
            epoch: Instant::now() + lead,
            wall_epoch: SystemTime::now() + lead,
            minute,
        }
    }

    /// Real time for a simulated duration.
    pub(crate) fn real(&self, simulated: Duration) -> Duration {
        self.minute.mul_f64(simulated.as_secs_f64() / 60.0)
    }

    /// Simulated time for a real duration.
    pub(crate) fn simulated(&self, real: Duration) -> Duration {
        Duration::from_secs_f64(real.as_secs_f64() * 60.0 / self.minute.as_secs_f64())
    }

    /// Where the boundaries of a `real` period fall on the wall clock so that simulated 0:00 is
    /// one of them: the offset for `Schedule::offset`, so the demo's hour starts on its hour.
    pub(crate) fn boundary_offset(&self, real: Duration) -> Duration {
        let since = self
            .wall_epoch
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Duration::from_nanos((since.as_nanos() % real.as_nanos().max(1)) as u64)
    }

    /// The round of a period of `simulated` length that a schedule aligned on the demo's clock
    /// runs now: the period simulated time falls in, allowing a tenth of a period for a round
    /// that starts a hair early (the schedule reads the clocks a moment apart from this one).
    /// A round that starts late by more than nine tenths of a period is named after the next
    /// one (on a loaded machine, where the shortest period is 20 ms); the summary tells such a
    /// late round of one holder from a second holder by the lease it ran under.
    pub(crate) fn current_round(&self, simulated: Duration) -> u64 {
        ((self.now() + simulated / 10).as_nanos() / simulated.as_nanos()) as u64
    }

    /// Simulated time now.
    pub(crate) fn now(&self) -> Duration {
        self.simulated(self.elapsed())
    }

    /// Real time left until 0:00 (zero from then on).
    pub(crate) fn until_start(&self) -> Duration {
        self.epoch.saturating_duration_since(Instant::now())
    }

    /// Real time since the demo started (zero before 0:00).
    pub(crate) fn elapsed(&self) -> Duration {
        Instant::now().saturating_duration_since(self.epoch)
    }

    /// Sleeps until the simulated time `at`.
    pub(crate) async fn sleep_until(&self, at: Duration) {
        tokio::time::sleep_until((self.epoch + self.real(at)).into()).await;
    }

    /// Sleeps for a simulated duration.
    pub(crate) async fn sleep(&self, simulated: Duration) {
        tokio::time::sleep(self.real(simulated)).await;
    }
}

/// Simulated time as `h:mm:ss`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hms(pub(crate) Duration);

impl fmt::Display for Hms {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.as_secs();
        write!(f, "{}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
    }
}

/// Minutes as a duration.
pub(crate) const fn minutes(m: u64) -> Duration {
    Duration::from_secs(m * 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_simulated_minutes_to_real_time_and_back() {
        let clock = SimClock::start(Duration::from_millis(250), Duration::ZERO);
        assert_eq!(clock.real(minutes(60)), Duration::from_secs(15));
        assert_eq!(
            clock.real(Duration::from_secs(30)),
            Duration::from_millis(125)
        );
        assert_eq!(clock.simulated(Duration::from_secs(2)), minutes(8));
        assert_eq!(
            Hms(minutes(75) + Duration::from_secs(5)).to_string(),
            "1:15:05"
        );
    }
}
