//! [`LeaseClient`]: takes leases from a store and keeps them alive.
//!
//! The client's calls, one file each: taking a lease here, [`run_exclusive`] and [`campaign`];
//! its settings in [`builder`].

mod builder;
mod campaign;
mod run_exclusive;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub use self::builder::LeaseClientBuilder;
pub use self::run_exclusive::{RunOptions, RunOutcome};
use crate::backoff::Backoff;
use crate::clock::{Clock, ticks};
use crate::config::LeaseConfig;
use crate::guard::LeaseGuard;
use crate::handover::{self, Released, Releases};
use crate::renewer::Renewer;
use crate::timed_store::TimedStore;
use crate::{Error, HolderId, IntoLeaseName, LeaseName, LeaseStore, Runtime};

/// Takes leases from a [`LeaseStore`] and keeps the ones it holds alive.
///
/// One client serves every lease of a process: a single renewer renews them all through
/// [`LeaseStore::renew_many`], so holding ten thousand leases costs a few statements per renewal
/// period, not ten thousand tasks. Cloning is cheap and shares the renewer.
///
/// The renewer runs on the [`Runtime`]'s spawn. A runtime that cannot spawn is fine for
/// [`run_exclusive`](LeaseClient::run_exclusive) and [`campaign`](LeaseClient::campaign), which
/// drive renewal on the caller's task; guards from
/// [`try_acquire`](LeaseClient::try_acquire) then need [`run_renewer`](LeaseClient::run_renewer)
/// polled somewhere.
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
    inner: Arc<Inner>,
}

/// What the clones of one client share.
struct Inner {
    store: TimedStore,
    config: LeaseConfig,
    renewer: Arc<Renewer>,
    releases: Arc<Releases>,
}

impl LeaseClient {
    /// A client with the default [`LeaseConfig`]: a 2 minute TTL renewed every 30 seconds.
    pub fn new(store: impl LeaseStore, runtime: impl Runtime) -> Self {
        Self::from_parts(Arc::new(store), Arc::new(runtime), LeaseConfig::default())
    }

    /// A client with `config`, checked: the settings an application read from its own
    /// configuration. [`builder`](LeaseClient::builder) with
    /// [`config`](LeaseClientBuilder::config) does the same and can change some of them.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when the settings cannot work together (see
    /// [`LeaseConfig::validate`]).
    pub fn with_config(
        store: impl LeaseStore,
        runtime: impl Runtime,
        config: LeaseConfig,
    ) -> Result<Self, Error> {
        config.validate()?;
        Ok(Self::from_parts(Arc::new(store), Arc::new(runtime), config))
    }

    /// A builder to set the TTL, renewal period and the rest of [`LeaseConfig`].
    pub fn builder(store: impl LeaseStore, runtime: impl Runtime) -> LeaseClientBuilder {
        LeaseClientBuilder::new(Arc::new(store), Arc::new(runtime))
    }

    /// A client on `store` and `runtime` with a validated `config`.
    fn from_parts(
        store: Arc<dyn LeaseStore>,
        runtime: Arc<dyn Runtime>,
        config: LeaseConfig,
    ) -> Self {
        let store = TimedStore::new(store, Clock::new(runtime), config.store_timeout);
        let renewer = Arc::new(Renewer::new(store.clone(), &config));
        Self {
            inner: Arc::new(Inner {
                store,
                config,
                renewer,
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
        self.inner.store.unbounded()
    }

    /// The runtime's clock this client keeps time on.
    pub(crate) fn clock(&self) -> &Clock {
        self.inner.store.clock()
    }

    /// Interest in the next release of `name`; see [`Releases::listen`].
    pub(crate) fn listen(&self, name: &LeaseName) -> Released {
        let store = &self.inner.store;
        self.inner
            .releases
            .listen(name, store.unbounded(), store.clock().runtime())
    }

    /// Takes the lease `name` if nobody holds it: `None` when somebody does, so this round is
    /// skipped. The guard keeps the lease renewed until it is released or dropped.
    ///
    /// # Errors
    /// [`Error::InvalidName`] before any statement runs; [`Error::Store`] when the store fails
    /// or does not answer within [`LeaseConfig::store_timeout`] (the lease then lapses on its own
    /// within one TTL if the statement did take it).
    ///
    /// # Cancel safety
    /// Not cancel safe. Cancelled before the store answers, the statement may still have taken
    /// the lease, for a holder nobody knows and nobody renews: the lease then lapses after one
    /// TTL, and until then nobody can take it, this process included. A guard exists only once
    /// this returns, so none is lost.
    pub async fn try_acquire(&self, name: impl IntoLeaseName) -> Result<Option<LeaseGuard>, Error> {
        let name = name.into_lease_name()?;
        let inner = &self.inner;
        let holder = HolderId::generate();
        let sent = self.clock().now();
        let fence = inner
            .store
            .try_acquire(&name, &holder, inner.config.ttl)
            .await?;
        let Some(fence) = fence else {
            tracing::debug!(lease = %name, "lease held elsewhere");
            return Ok(None);
        };
        tracing::debug!(lease = %name, %fence, %holder, "lease taken");
        let held = inner.renewer.hold(name, holder, fence, sent);
        Ok(Some(LeaseGuard::new(
            held,
            Arc::clone(&inner.renewer),
            inner.store.clone(),
        )))
    }

    /// Takes the lease `name`, waiting up to `timeout` while somebody else holds it. Attempts
    /// back off exponentially with jitter (see [`LeaseConfig::acquire_backoff`]); where the store
    /// pushes releases ([`LeaseStore::release_events`]), a release wakes the wait at once.
    ///
    /// # Errors
    /// [`Error::Timeout`] when the lease stayed held for the whole `timeout`; otherwise as
    /// [`try_acquire`](LeaseClient::try_acquire), whose store errors end the wait at once.
    ///
    /// # Cancel safety
    /// Cancelled between attempts, nothing is left behind. Cancelled during an attempt, as
    /// [`try_acquire`](LeaseClient::try_acquire): the lease may have been taken for nobody, and
    /// lapses after one TTL.
    pub async fn acquire(
        &self,
        name: impl IntoLeaseName,
        timeout: Duration,
    ) -> Result<LeaseGuard, Error> {
        let name = name.into_lease_name()?;
        let clock = self.clock();
        let started = clock.now();
        let give_up = started.saturating_add(ticks(timeout));
        let mut backoff = Backoff::new(self.inner.config.acquire_backoff);
        loop {
            let released = self.listen(&name);
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
    ///
    /// # Cancel safety
    /// This method is cancel safe: dropping it stops renewal on this task, and a later call
    /// (or [`run_exclusive`](LeaseClient::run_exclusive), or a campaign) carries on. A renewal
    /// cancelled in flight counts as not renewed: the deadlines stay where the last success put
    /// them and the next round renews at once. Leases lapse only if nothing drives the renewer
    /// again before their deadline.
    pub async fn run_renewer(&self) {
        self.inner.renewer.run().await;
    }

    /// The old name of [`run_renewer`](LeaseClient::run_renewer), which it runs: the shared
    /// renewer on the caller's task, until every clone of this client and every guard it gave is
    /// gone.
    ///
    /// # Cancel safety
    /// As [`run_renewer`](LeaseClient::run_renewer): cancel safe.
    pub async fn renewer(&self) {
        self.run_renewer().await;
    }
}

impl fmt::Debug for LeaseClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseClient")
            .field("store", self.store())
            .field("config", &self.inner.config)
            .field("held", &self.inner.renewer.held_count())
            .finish()
    }
}
