//! [`LeaseConfig`]: how long leases last and how they are kept alive.

use std::time::Duration;

use crate::{Error, Ttl};

/// What [`run_exclusive`](crate::LeaseClient::run_exclusive) does with the work when the lease
/// is lost while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OnLoss {
    /// Stop the work (drop its future) and report
    /// [`RunOutcome::Cancelled`](crate::RunOutcome::Cancelled). Another instance may already
    /// run it.
    #[default]
    Cancel,
    /// Log a warning and let the work finish, reporting
    /// [`RunOutcome::FinishedAfterLoss`](crate::RunOutcome::FinishedAfterLoss). Only for work
    /// that is safe to run twice at once.
    Finish,
}

/// How a [`LeaseClient`](crate::LeaseClient) takes and keeps its leases.
///
/// Built by [`LeaseClientBuilder`](crate::LeaseClientBuilder); every setting has a default that
/// suits background jobs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LeaseConfig {
    /// How long a lease lasts without renewal. Default: 2 minutes.
    pub ttl: Ttl,
    /// How often a held lease is renewed. Default: a quarter of the TTL. At least
    /// [`SHORTEST_PERIOD`](LeaseConfig::SHORTEST_PERIOD).
    pub renew_every: Duration,
    /// How much earlier than the store this process gives a lease up when renewals fail: the
    /// local deadline is the TTL after the last successful renewal was *sent*, minus this.
    /// Default: a tenth of the TTL. Above zero: it must cover the drift of this machine's clock
    /// against the database's over a TTL and the lateness of the runtime's timers (tokio's fire
    /// up to a millisecond late).
    pub safety_margin: Duration,
    /// How long one store call (acquire, renew, release) may take before it counts as failed.
    /// A renewal that times out counts as not renewed. Default: the renewal period, at most
    /// half the time a renewal sent on time has before the local deadline, so that a renewal
    /// that hangs for the whole timeout leaves time for another try, and never under a quarter
    /// of the period ([`default_store_timeout`](LeaseConfig::default_store_timeout)).
    pub store_timeout: Duration,
    /// How many leases one `renew_many` call carries. Default: 1,000. The leases of a call cut
    /// by the store timeout are renewed each in a call of its own, 32 at a time, until each
    /// succeeds: a row another transaction keeps locked then costs its own lease, not the
    /// others of its batch, while the pool has a connection more than the rows that stay
    /// locked at once (each locked row's call holds one for its store timeout). A round's
    /// calls go one after another; one that has not answered within an eighth of the store
    /// timeout lets the next start beside it.
    pub renew_batch: usize,
    /// The first and the longest pause between attempts of
    /// [`acquire`](crate::LeaseClient::acquire); each pause is drawn at random up to a limit that
    /// doubles from the first to the longest. Default: 50 ms and 5 s. The first at least
    /// [`SHORTEST_PERIOD`](LeaseConfig::SHORTEST_PERIOD). The longest also bounds
    /// how long a campaign that does not lead waits between attempts
    /// ([`campaign_retry`](LeaseConfig::campaign_retry)).
    pub acquire_backoff: (Duration, Duration),
    /// What `run_exclusive` does when the lease is lost. Default: [`OnLoss::Cancel`].
    pub on_loss: OnLoss,
}

impl LeaseConfig {
    /// The defaults for `ttl`: renewal every quarter, a margin of a tenth.
    pub fn for_ttl(ttl: Ttl) -> Self {
        let mut config = Self {
            ttl,
            renew_every: ttl.get() / 4,
            safety_margin: ttl.get() / 10,
            store_timeout: Duration::ZERO,
            renew_batch: 1000,
            acquire_backoff: (Duration::from_millis(50), Duration::from_secs(5)),
            on_loss: OnLoss::Cancel,
        };
        config.store_timeout = config.default_store_timeout();
        config
    }

    /// The store timeout that suits the other settings: the renewal period, at most half the
    /// time between a renewal sent on time and the local deadline (the local validity minus the
    /// period), and never under a quarter of the period. A renewal that hangs for the whole
    /// timeout then leaves at least as long again for another try before the deadline: with a
    /// 60 s TTL renewed every 30 s, 12 s, where the period (30 s) would let one hung renewal
    /// run past the deadline (54 s after the last renewal) and lose the lease without a second
    /// try. The floor keeps every call (an acquisition too) a fair time where the period is
    /// set close to the local validity, which leaves no room for a second try anyway. With the
    /// defaults, the renewal period.
    pub fn default_store_timeout(&self) -> Duration {
        let after_period = self.local_validity().saturating_sub(self.renew_every);
        self.renew_every
            .min(after_period / 2)
            .max(self.renew_every / 4)
    }

    /// How long a leader campaign ([`LeaseClient::campaign`](crate::LeaseClient::campaign))
    /// waits between attempts while another process leads: the renewal period, at most the
    /// longest pause of [`acquire_backoff`](LeaseConfig::acquire_backoff) (5 s with the
    /// defaults, where the renewal period is 30 s). A release the store pushes wakes the
    /// campaign at once; on a store that pushes none, this is how long a leader's clean
    /// shutdown can leave the leadership free.
    pub fn campaign_retry(&self) -> Duration {
        self.renew_every.min(self.acquire_backoff.1)
    }

    /// How long after a renewal was sent this process still believes it holds the lease.
    pub fn local_validity(&self) -> Duration {
        self.ttl.get().saturating_sub(self.safety_margin)
    }

    /// The shortest renewal period, and the shortest first pause of the acquire backoff: a
    /// period shorter than the time a renewal round takes would have the renewer start the
    /// next round at once, for ever, and a pause that rounds to nothing would have `acquire`
    /// call the store without a pause, for its whole timeout (a unit mixed up in a setting). A
    /// quarter of the shortest TTL, so that every TTL builds with the default period.
    pub const SHORTEST_PERIOD: Duration = Duration::from_micros(250);

    /// Checks that the settings can work together.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the first setting that cannot work.
    pub fn validate(&self) -> Result<(), Error> {
        let invalid = |reason: String| Err(Error::InvalidConfig { reason });
        if self.safety_margin.is_zero() || self.safety_margin >= self.ttl.get() {
            return invalid(format!(
                "the safety margin {:?} must be above zero and shorter than the TTL {:?}, so the local deadline comes before the store's expiry",
                self.safety_margin, self.ttl
            ));
        }
        if self.renew_every < Self::SHORTEST_PERIOD || self.renew_every >= self.local_validity() {
            return invalid(format!(
                "the renewal period {:?} must be at least {:?} and shorter than the TTL minus the safety margin ({:?}), or a lease lapses between two renewals",
                self.renew_every,
                Self::SHORTEST_PERIOD,
                self.local_validity()
            ));
        }
        if self.store_timeout.is_zero() {
            return invalid("the store timeout must be above zero".to_owned());
        }
        if self.renew_batch == 0 {
            return invalid("the renewal batch must hold at least one lease".to_owned());
        }
        let (first, longest) = self.acquire_backoff;
        if first < Self::SHORTEST_PERIOD || first > longest {
            return invalid(format!(
                "the acquire backoff must start at {:?} or more and not above its longest pause, got {first:?} and {longest:?}",
                Self::SHORTEST_PERIOD
            ));
        }
        Ok(())
    }
}

impl Default for LeaseConfig {
    fn default() -> Self {
        Self::for_ttl(Ttl::DEFAULT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_ttl() {
        let config = LeaseConfig::default();
        assert_eq!(config.ttl.get(), Duration::from_secs(120));
        assert_eq!(config.renew_every, Duration::from_secs(30));
        assert_eq!(config.campaign_retry(), Duration::from_secs(5));
        assert_eq!(config.safety_margin, Duration::from_secs(12));
        assert!(config.validate().is_ok());
    }

    #[test]
    fn the_default_store_timeout_leaves_time_for_another_try() {
        let mut config = LeaseConfig::for_ttl(Ttl::from_secs(60).unwrap());
        config.renew_every = Duration::from_secs(30);
        assert_eq!(config.default_store_timeout(), Duration::from_secs(12));
        // A period close to the local validity (9 s of a 10 s TTL): a quarter period, not 250 ms.
        let mut config = LeaseConfig::for_ttl(Ttl::from_secs(10).unwrap());
        config.renew_every = Duration::from_millis(8_500);
        assert_eq!(config.default_store_timeout(), Duration::from_millis(2_125));
        config.renew_every = config.local_validity() - Duration::from_nanos(1);
        assert!(!config.default_store_timeout().is_zero());
    }

    #[test]
    fn rejects_settings_that_cannot_work() {
        let ttl = Ttl::from_secs(10).unwrap();
        let broken: [fn(&mut LeaseConfig); 9] = [
            |c| c.safety_margin = Duration::from_secs(10),
            |c| c.safety_margin = Duration::ZERO,
            |c| c.acquire_backoff = (Duration::from_nanos(1), Duration::from_nanos(1)),
            |c| c.renew_every = Duration::ZERO,
            |c| c.renew_every = Duration::from_nanos(30),
            |c| c.renew_every = Duration::from_secs(9),
            |c| c.store_timeout = Duration::ZERO,
            |c| c.renew_batch = 0,
            |c| c.acquire_backoff = (Duration::from_secs(2), Duration::from_secs(1)),
        ];
        for (i, breaks) in broken.iter().enumerate() {
            let mut config = LeaseConfig::for_ttl(ttl);
            breaks(&mut config);
            assert!(
                matches!(config.validate(), Err(Error::InvalidConfig { .. })),
                "case {i}"
            );
        }
    }
}
