//! [`LeaseClient`]: takes leases from a store and keeps them alive.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, ticks};
use crate::config::{LeaseConfig, OnLoss};
use crate::guard::LeaseGuard;
use crate::handover::{self, Released, Releases};
use crate::renewer::Renewer;
use crate::{Error, HolderId, LeaseName, LeaseStore, Operation, Runtime, Ttl};

/// Takes leases from a [`LeaseStore`] and keeps the ones it holds alive.
///
/// One client serves every lease of a process: a single renewer renews them all through
/// [`LeaseStore::renew_many`], so holding ten thousand leases costs a few statements per renewal
/// period, not ten thousand tasks. Cloning is cheap and shares the renewer.
///
/// The renewer runs on the [`Runtime`]'s spawn. A runtime that cannot spawn is fine for
/// [`run_exclusive`](LeaseClient::run_exclusive) and [`campaign`](LeaseClient::campaign), which
/// drive renewal on the caller's task; guards from
/// [`try_acquire`](LeaseClient::try_acquire) then need [`renewer`](LeaseClient::renewer) polled
/// somewhere.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), lease_core::Error> {
/// use lease_core::{LeaseClient, MemoryStore, runtime::TokioRuntime};
///
/// let client = LeaseClient::new(MemoryStore::new(), TokioRuntime);
/// let guard = client.try_acquire("sweep").await?.expect("nobody else holds it");
/// assert!(client.try_acquire("sweep").await?.is_none());
/// println!("sweeping with fence {}", guard.fence());
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LeaseClient {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) store: Arc<dyn LeaseStore>,
    pub(crate) clock: Clock,
    pub(crate) config: LeaseConfig,
    pub(crate) renewer: Renewer,
    pub(crate) releases: Arc<Releases>,
}

impl LeaseClient {
    /// A client with the default [`LeaseConfig`]: a 2 minute TTL renewed every 30 seconds.
    pub fn new(store: impl LeaseStore, runtime: impl Runtime) -> Self {
        Self::from_parts(Arc::new(store), Arc::new(runtime), LeaseConfig::default())
    }

    /// A builder to set the TTL, renewal period and the rest of [`LeaseConfig`].
    pub fn builder(store: impl LeaseStore, runtime: impl Runtime) -> LeaseClientBuilder {
        LeaseClientBuilder {
            store: Arc::new(store),
            runtime: Arc::new(runtime),
            ttl: Ttl::DEFAULT,
            renew_every: None,
            safety_margin: None,
            store_timeout: None,
            renew_batch: None,
            acquire_backoff: None,
            on_loss: None,
        }
    }

    fn from_parts(
        store: Arc<dyn LeaseStore>,
        runtime: Arc<dyn Runtime>,
        config: LeaseConfig,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                clock: Clock::new(runtime),
                config,
                renewer: Renewer::new(),
                releases: Arc::new(Releases::new()),
            }),
        }
    }

    /// The settings this client runs with.
    pub fn config(&self) -> &LeaseConfig {
        &self.inner.config
    }

    /// The store this client takes leases from.
    pub fn store(&self) -> &Arc<dyn LeaseStore> {
        &self.inner.store
    }

    /// Takes the lease `name` if nobody holds it: `None` when somebody does, so this round is
    /// skipped. The guard keeps the lease renewed until it is released or dropped.
    ///
    /// # Errors
    /// [`Error::InvalidName`] before any statement runs; [`Error::Store`] when the store fails
    /// or does not answer within [`LeaseConfig::store_timeout`] (the lease then lapses on its own
    /// within one TTL if the statement did take it).
    pub async fn try_acquire(&self, name: impl IntoLeaseName) -> Result<Option<LeaseGuard>, Error> {
        let name = name.into_lease_name()?;
        let inner = &self.inner;
        let holder = HolderId::generate();
        let sent = inner.clock.now();
        let fence = inner
            .call(
                Operation::Acquire,
                &name,
                inner.store.try_acquire(&name, &holder, inner.config.ttl),
            )
            .await?;
        let Some(fence) = fence else {
            tracing::debug!(lease = %name, "lease held elsewhere");
            return Ok(None);
        };
        tracing::debug!(lease = %name, %fence, %holder, "lease taken");
        let held = inner.renewer.register(inner, name, holder, fence, sent);
        Ok(Some(LeaseGuard::new(Arc::clone(inner), held)))
    }

    /// Takes the lease `name`, waiting up to `timeout` while somebody else holds it. Attempts
    /// back off exponentially with jitter (see [`LeaseConfig::acquire_backoff`]); where the store
    /// pushes releases ([`LeaseStore::release_events`]), a release wakes the wait at once.
    ///
    /// # Errors
    /// [`Error::Timeout`] when the lease stayed held for the whole `timeout`; otherwise as
    /// [`try_acquire`](LeaseClient::try_acquire), whose store errors end the wait at once.
    pub async fn acquire(
        &self,
        name: impl IntoLeaseName,
        timeout: Duration,
    ) -> Result<LeaseGuard, Error> {
        let name = name.into_lease_name()?;
        let clock = &self.inner.clock;
        let started = clock.now();
        let give_up = started.saturating_add(ticks(timeout));
        let mut backoff = crate::backoff::Backoff::new(self.inner.config.acquire_backoff);
        loop {
            let released = self.inner.listen(&name);
            if let Some(guard) = self.try_acquire(&name).await? {
                return Ok(guard);
            }
            let now = clock.now();
            if now >= give_up {
                return Err(Error::Timeout {
                    name,
                    waited: Duration::from_nanos(now - started),
                });
            }
            let pause = ticks(backoff.next_pause()).min(give_up - now);
            handover::pause(released, clock.sleep_until(now + pause)).await;
        }
    }

    /// Runs the shared renewer on the caller's task, until every clone of this client and every
    /// guard it gave is gone.
    ///
    /// Needed only with a [`Runtime`] that cannot spawn, for guards from
    /// [`try_acquire`](LeaseClient::try_acquire) and [`acquire`](LeaseClient::acquire). Where the
    /// renewer already runs elsewhere this waits until it stops, doing nothing.
    pub async fn renewer(&self) {
        Renewer::drive(
            Arc::downgrade(&self.inner),
            self.inner.renewer.driver(),
            self.inner.clock.clone(),
        )
        .await;
    }
}

impl Inner {
    /// Interest in the next release of `name`; see [`Releases::listen`].
    pub(crate) fn listen(&self, name: &LeaseName) -> Released {
        self.releases
            .listen(name, &self.store, self.clock.runtime())
    }

    /// One store call, bounded by the store timeout.
    pub(crate) async fn call<T>(
        &self,
        operation: Operation,
        name: &LeaseName,
        call: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        match self.clock.timeout(self.config.store_timeout, call).await {
            Some(result) => result,
            None => Err(Error::store(
                operation,
                Some(name),
                TimedOut(self.config.store_timeout),
            )),
        }
    }
}

/// A store call that did not answer in time.
#[derive(Debug, thiserror::Error)]
#[error("no answer within {0:?}")]
pub(crate) struct TimedOut(pub(crate) Duration);

impl fmt::Debug for LeaseClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseClient")
            .field("store", &self.inner.store)
            .field("config", &self.inner.config)
            .field("held", &self.inner.renewer.len())
            .finish()
    }
}

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
    ttl: Ttl,
    renew_every: Option<Duration>,
    safety_margin: Option<Duration>,
    store_timeout: Option<Duration>,
    renew_batch: Option<usize>,
    acquire_backoff: Option<(Duration, Duration)>,
    on_loss: Option<OnLoss>,
}

impl LeaseClientBuilder {
    /// How long a lease lasts without renewal. The period, margin and timeout that are not set
    /// follow it.
    pub fn ttl(mut self, ttl: Ttl) -> Self {
        self.ttl = ttl;
        self
    }

    /// How often held leases are renewed.
    pub fn renew_every(mut self, period: Duration) -> Self {
        self.renew_every = Some(period);
        self
    }

    /// How much before the store's expiry this process gives a lease up.
    pub fn safety_margin(mut self, margin: Duration) -> Self {
        self.safety_margin = Some(margin);
        self
    }

    /// How long one store call may take.
    pub fn store_timeout(mut self, timeout: Duration) -> Self {
        self.store_timeout = Some(timeout);
        self
    }

    /// How many leases one `renew_many` call carries.
    pub fn renew_batch(mut self, leases: usize) -> Self {
        self.renew_batch = Some(leases);
        self
    }

    /// The first and the longest pause between attempts of [`LeaseClient::acquire`].
    pub fn acquire_backoff(mut self, first: Duration, longest: Duration) -> Self {
        self.acquire_backoff = Some((first, longest));
        self
    }

    /// What [`LeaseClient::run_exclusive`] does with the work when the lease is lost.
    pub fn on_loss(mut self, on_loss: OnLoss) -> Self {
        self.on_loss = Some(on_loss);
        self
    }

    /// The client.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when the settings cannot work together (see
    /// [`LeaseConfig::validate`]).
    pub fn build(self) -> Result<LeaseClient, Error> {
        let mut config = LeaseConfig::for_ttl(self.ttl);
        if let Some(period) = self.renew_every {
            config.renew_every = period;
            if self.store_timeout.is_none() {
                config.store_timeout = period;
            }
        }
        fn set<T>(value: &mut T, setting: Option<T>) {
            if let Some(setting) = setting {
                *value = setting;
            }
        }
        set(&mut config.safety_margin, self.safety_margin);
        set(&mut config.store_timeout, self.store_timeout);
        set(&mut config.renew_batch, self.renew_batch);
        set(&mut config.acquire_backoff, self.acquire_backoff);
        set(&mut config.on_loss, self.on_loss);
        config.validate()?;
        Ok(LeaseClient::from_parts(self.store, self.runtime, config))
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

/// Anything that names a lease: `&str`, `String` or [`LeaseName`]. Text is validated on use.
pub trait IntoLeaseName {
    /// The validated name.
    ///
    /// # Errors
    /// [`Error::InvalidName`] for text that is not a valid name.
    fn into_lease_name(self) -> Result<LeaseName, Error>;
}

impl IntoLeaseName for LeaseName {
    fn into_lease_name(self) -> Result<LeaseName, Error> {
        Ok(self)
    }
}

impl IntoLeaseName for &LeaseName {
    fn into_lease_name(self) -> Result<LeaseName, Error> {
        Ok(self.clone())
    }
}

impl IntoLeaseName for &str {
    fn into_lease_name(self) -> Result<LeaseName, Error> {
        LeaseName::new(self)
    }
}

impl IntoLeaseName for String {
    fn into_lease_name(self) -> Result<LeaseName, Error> {
        LeaseName::new(self)
    }
}

impl IntoLeaseName for &String {
    fn into_lease_name(self) -> Result<LeaseName, Error> {
        LeaseName::new(self)
    }
}
