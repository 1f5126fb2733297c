//! [`LeaseClientBuilder`]: the settings of a [`LeaseClient`], checked once.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{LeaseConfig, OnLoss};
use crate::{Error, LeaseClient, LeaseLabel, LeaseStore, Runtime, Ttl};

/// The `store` label of a client's metrics and spans unless
/// [`LeaseClientBuilder::store_label`] sets another.
pub(crate) const DEFAULT_STORE_LABEL: &str = "default";

/// Sets up a [`LeaseClient`]; from [`LeaseClient::builder`].
///
/// ```
/// # fn main() -> Result<(), lease_core::Error> {
/// use std::time::Duration;
/// use lease_core::{LeaseClient, MemoryStore, Ttl, runtime::TokioRuntime};
///
/// let client = LeaseClient::builder(MemoryStore::new(), TokioRuntime)
///     .ttl(Ttl::from_secs(60)?)
///     .renew_every(Duration::from_secs(10))
///     .build()?;
/// assert_eq!(client.config().safety_margin, Duration::from_secs(6));
/// # Ok(()) }
/// ```
#[must_use]
pub struct LeaseClientBuilder {
    store: Arc<dyn LeaseStore>,
    runtime: Arc<dyn Runtime>,
    base: Option<LeaseConfig>,
    ttl: Option<Ttl>,
    renew_every: Option<Duration>,
    safety_margin: Option<Duration>,
    store_timeout: Option<Duration>,
    renew_batch: Option<usize>,
    acquire_backoff: Option<(Duration, Duration)>,
    on_loss: Option<OnLoss>,
    store_label: String,
    lease_label: LeaseLabel,
}

impl LeaseClientBuilder {
    /// Every setting at its default.
    pub(super) fn new(store: Arc<dyn LeaseStore>, runtime: Arc<dyn Runtime>) -> Self {
        Self {
            store,
            runtime,
            base: None,
            ttl: None,
            renew_every: None,
            safety_margin: None,
            store_timeout: None,
            renew_batch: None,
            acquire_backoff: None,
            on_loss: None,
            store_label: DEFAULT_STORE_LABEL.to_owned(),
            lease_label: LeaseLabel::Name,
        }
    }

    /// How long a lease lasts without renewal. The period, margin and timeout that are not set
    /// follow it.
    pub fn ttl(mut self, ttl: Ttl) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Starts from `config` instead of the defaults, such as one read from the application's
    /// settings: every setting is `config`'s, except those set on this builder, which win
    /// whatever the order of the calls (a TTL set here replaces `config.ttl` alone; the
    /// period, margin and timeout stay `config`'s unless set too).
    ///
    /// ```
    /// # fn main() -> Result<(), lease_core::Error> {
    /// use std::time::Duration;
    /// use lease_core::{LeaseClient, LeaseConfig, MemoryStore, Ttl, runtime::TokioRuntime};
    ///
    /// let mut config = LeaseConfig::for_ttl(Ttl::from_secs(30)?);
    /// config.renew_batch = 100;
    /// let client = LeaseClient::builder(MemoryStore::new(), TokioRuntime)
    ///     .config(config)
    ///     .store_timeout(Duration::from_secs(2))
    ///     .build()?;
    /// assert_eq!(client.config().ttl, Ttl::from_secs(30)?);
    /// assert_eq!(client.config().renew_batch, 100);
    /// assert_eq!(client.config().store_timeout, Duration::from_secs(2));
    /// # Ok(()) }
    /// ```
    pub fn config(mut self, config: LeaseConfig) -> Self {
        self.base = Some(config);
        self
    }

    /// How often held leases are renewed.
    pub fn renew_every(mut self, period: Duration) -> Self {
        self.renew_every = Some(period);
        self
    }

    /// How much before the store's expiry this process gives a lease up: above zero (see
    /// [`LeaseConfig::safety_margin`]).
    pub fn safety_margin(mut self, margin: Duration) -> Self {
        self.safety_margin = Some(margin);
        self
    }

    /// How long one store call may take. Default:
    /// [`LeaseConfig::default_store_timeout`] for the TTL, period and margin set here.
    pub fn store_timeout(mut self, timeout: Duration) -> Self {
        self.store_timeout = Some(timeout);
        self
    }

    /// How many leases one `renew_many` call carries (the leases of a call cut by the store
    /// timeout are renewed each in a call of its own until each succeeds).
    pub fn renew_batch(mut self, leases: usize) -> Self {
        self.renew_batch = Some(leases);
        self
    }

    /// The first and the longest pause between attempts of [`LeaseClient::acquire`], the
    /// first at least [`LeaseConfig::SHORTEST_PERIOD`]; the longest also bounds how long a campaign that does not lead waits between attempts
    /// ([`LeaseConfig::campaign_retry`]).
    pub fn acquire_backoff(mut self, first: Duration, longest: Duration) -> Self {
        self.acquire_backoff = Some((first, longest));
        self
    }

    /// What [`LeaseClient::run_exclusive`] does with the work when the lease is lost.
    pub fn on_loss(mut self, on_loss: OnLoss) -> Self {
        self.on_loss = Some(on_loss);
        self
    }

    /// The `store` label of this client's metrics and the `lease.store` field of its spans, to
    /// tell the clients of one process apart (such as `"billing-db"`). Default: `"default"`.
    pub fn store_label(mut self, label: impl Into<String>) -> Self {
        self.store_label = label.into();
        self
    }

    /// What the `lease` label of this client's metrics carries: the whole name (the
    /// default) or, for leases named per entity, the [kind](LeaseLabel::Kind) of work, so
    /// that the series a recorder keeps stay as few as the kinds. Spans carry the whole name
    /// either way.
    pub fn lease_label(mut self, label: LeaseLabel) -> Self {
        self.lease_label = label;
        self
    }

    /// The client.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when the settings cannot work together (see
    /// [`LeaseConfig::validate`]).
    pub fn build(self) -> Result<LeaseClient, Error> {
        let from_base = self.base.is_some();
        let mut config = match self.base {
            Some(mut base) => {
                if let Some(ttl) = self.ttl {
                    base.ttl = ttl;
                }
                base
            }
            None => LeaseConfig::for_ttl(self.ttl.unwrap_or(Ttl::DEFAULT)),
        };
        fn set<T>(value: &mut T, setting: Option<T>) {
            if let Some(setting) = setting {
                *value = setting;
            }
        }
        set(&mut config.renew_every, self.renew_every);
        set(&mut config.safety_margin, self.safety_margin);
        if !from_base {
            // The timeout that suits the period and margin set here, unless set too.
            config.store_timeout = config.default_store_timeout();
        }
        set(&mut config.store_timeout, self.store_timeout);
        set(&mut config.renew_batch, self.renew_batch);
        set(&mut config.acquire_backoff, self.acquire_backoff);
        set(&mut config.on_loss, self.on_loss);
        config.validate()?;
        Ok(LeaseClient::from_parts(
            self.store,
            self.runtime,
            config,
            &self.store_label,
            self.lease_label,
        ))
    }
}

impl fmt::Debug for LeaseClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseClientBuilder")
            .field("store", &self.store)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}
