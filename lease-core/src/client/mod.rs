//! [`LeaseClient`]: takes leases from a store and keeps them alive.
//!
//! The client's calls, one file each: taking a lease here, waiting for one in [`acquire`],
//! [`run_exclusive`], [`campaign`], [`schedule`] and [`shutdown`]; its settings in [`builder`].

mod acquire;
mod builder;
mod campaign;
mod run_exclusive;
mod schedule;
mod shutdown;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub use self::builder::LeaseClientBuilder;
pub use self::run_exclusive::{RunOptions, RunOutcome};
pub use self::shutdown::ShutdownReport;
use crate::clock::Clock;
use crate::config::LeaseConfig;
use crate::guard::LeaseGuard;
use crate::handover::{Released, Releases};
use crate::health::Health;
use crate::renewer::Renewer;
use crate::shutdown::{Kind, Shutdown, Token};
use crate::stats::{Acquired, ClientStats, Stats};
use crate::timed_store::TimedStore;
use crate::{
    Error, HolderId, IntoLeaseName, LeaseLabel, LeaseName, LeaseStore, Operation, Runtime,
    StoreErrorKind,
};

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
/// The renewer is spawned once, on the runtime of the first acquisition, and renews every
/// lease of the client from there. A client that outlives that runtime spawns it again at its
/// next acquisition, on that one's runtime. A client used from several runtimes at once (kept
/// in a `static` by tests that run in parallel) renews nothing while the renewer's runtime is
/// not running (a current-thread runtime between two `block_on`s), and leases taken on another
/// runtime and held when the renewer's runtime shuts down are renewed again only from the next
/// acquisition: meanwhile their guards report them lost at their local deadline, as for an
/// outage. Give each runtime a client of its own.
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
    shutdown: Arc<Shutdown>,
}

impl LeaseClient {
    /// A client with the default [`LeaseConfig`]: a 2 minute TTL renewed every 30 seconds.
    pub fn new(store: impl LeaseStore, runtime: impl Runtime) -> Self {
        Self::from_parts(
            Arc::new(store),
            Arc::new(runtime),
            LeaseConfig::default(),
            builder::DEFAULT_STORE_LABEL,
            LeaseLabel::Name,
        )
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
        Ok(Self::from_parts(
            Arc::new(store),
            Arc::new(runtime),
            config,
            builder::DEFAULT_STORE_LABEL,
            LeaseLabel::Name,
        ))
    }

    /// A builder to set the TTL, renewal period and the rest of [`LeaseConfig`].
    pub fn builder(store: impl LeaseStore, runtime: impl Runtime) -> LeaseClientBuilder {
        LeaseClientBuilder::new(Arc::new(store), Arc::new(runtime))
    }

    /// A client on `store` and `runtime` with a validated `config`, its metrics labelled
    /// `store_label` and by `lease_label`.
    fn from_parts(
        store: Arc<dyn LeaseStore>,
        runtime: Arc<dyn Runtime>,
        config: LeaseConfig,
        store_label: &str,
        lease_label: LeaseLabel,
    ) -> Self {
        let stats = Arc::new(Stats::new(store_label, lease_label));
        let store = TimedStore::new(store, Clock::new(runtime), config.store_timeout, stats);
        let renewer = Arc::new(Renewer::new(store.clone(), &config));
        Self {
            inner: Arc::new(Inner {
                store,
                config,
                renewer,
                releases: Arc::new(Releases::new()),
                shutdown: Arc::new(Shutdown::new()),
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

    /// A token for a call, guard or campaign that starts now.
    ///
    /// # Errors
    /// [`Error::ShuttingDown`] once [`shutdown`](LeaseClient::shutdown) has begun.
    pub(crate) fn enter(&self, kind: Kind, name: &LeaseName) -> Result<Token, Error> {
        self.inner
            .shutdown
            .enter(kind)
            .ok_or_else(|| Error::ShuttingDown { name: name.clone() })
    }

    /// The shutdown's state, for the calls that stop with it.
    pub(crate) fn shutdown_state(&self) -> &Arc<Shutdown> {
        &self.inner.shutdown
    }

    /// An acquisition of `name` for `holder` that did not answer in time may still have taken
    /// the lease, for a holder nobody renews: left alone, it would keep everybody out (this
    /// client's own retries included) for a whole TTL. Releases it for that holder in the
    /// background, at once and again one store timeout later, for a statement that was still
    /// running the first time; each release is conditioned on the holder, so it frees nothing
    /// else. `token`, the acquisition's, counts it as a release in flight until it ends, so a
    /// shutdown waits for it (within its grace period) rather than let the process exit first.
    /// Where the runtime cannot spawn, the lease lapses after its TTL.
    fn give_back_unanswered(&self, name: &LeaseName, holder: &HolderId, mut token: Token) {
        let (store, name, holder) = (self.inner.store.clone(), name.clone(), holder.clone());
        token.become_kind(Kind::Releasing);
        let task = Box::pin(async move {
            let mut released = Ok(false);
            for attempt in 0..2 {
                if attempt > 0 {
                    store.clock().runtime().sleep(store.timeout()).await;
                }
                released = store.release(&name, &holder, Duration::ZERO).await;
                if let Ok(true) = released {
                    tracing::debug!(lease = %name, %holder, "gave back a lease an unanswered acquisition took");
                    break;
                }
            }
            // `false` twice: the acquisition most likely took nothing. A failed last try may
            // leave a lease taken: the shutdown's report counts it.
            token.shutdown().record_release(&released);
        });
        let _ = self.clock().runtime().spawn(task);
    }

    /// Gives back a lease an acquisition took that no guard is made for (taken `when`: as the
    /// client shut down, past its deadline), on this task: `token`, the acquisition's, counts
    /// it as a release in flight, which a shutdown waits for and reports.
    async fn give_back_taken(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        fence: crate::Fence,
        mut token: Token,
        when: &str,
    ) {
        token.become_kind(Kind::Releasing);
        let released = self.inner.store.release(name, holder, Duration::ZERO).await;
        self.inner.shutdown.record_release(&released);
        match released {
            Ok(_) => tracing::debug!(lease = %name, %fence, "lease taken {when}; given back"),
            Err(error) => {
                tracing::debug!(lease = %name, %fence, error = %crate::ErrorChain(&error), "lease taken {when}, and not given back; it lapses after its TTL")
            }
        }
    }

    /// What this client has done since it was built: leases held, acquisitions won, skipped
    /// and failed, renewals sent, failed and late, releases, losses by reason, and the time of
    /// each kind of store call.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), lease_core::Error> {
    /// use lease_core::{LeaseClient, MemoryStore, runtime::TokioRuntime};
    ///
    /// let client = LeaseClient::new(MemoryStore::new(), TokioRuntime);
    /// let guard = client.try_acquire("sweep").await?.expect("free");
    /// assert!(client.try_acquire("sweep").await?.is_none());
    /// let stats = client.stats();
    /// assert_eq!((stats.held, stats.acquired, stats.skipped), (1, 1, 1));
    /// assert_eq!(stats.acquire_calls.calls, 2);
    /// # drop(guard); Ok(()) }
    /// ```
    pub fn stats(&self) -> ClientStats {
        self.inner
            .store
            .stats()
            .snapshot(self.inner.renewer.held_count())
    }

    /// Whether this client keeps its leases: healthy while every held lease was renewed within
    /// its renewal period (plus one store timeout for the call) and the client is not shutting
    /// down. For a readiness probe: it turns unhealthy while renewals fail, well before the
    /// leases' deadlines pass (see [`Health`]). Once those deadlines have passed, the leases are
    /// lost and no longer counted: a client that holds nothing reads healthy, whether the store
    /// answers or not (it keeps nothing it could lose). A probe that must also fail while the
    /// store is unreachable asks the store itself, or reads the failed calls of
    /// [`stats`](LeaseClient::stats).
    pub fn health(&self) -> Health {
        self.inner
            .renewer
            .health(self.inner.shutdown.is_closing(), self.inner.store.timeout())
    }

    /// Whether [`shutdown`](LeaseClient::shutdown) has begun: from then on this client takes no
    /// new leases.
    pub fn is_shutting_down(&self) -> bool {
        self.inner.shutdown.is_closing()
    }

    /// Interest in the next release of `name`; see [`Releases::listen`].
    pub(crate) fn listen(&self, name: &LeaseName) -> Released {
        let store = &self.inner.store;
        self.inner
            .releases
            .listen(name, store, store.clock().runtime())
    }

    /// Takes the lease `name` if nobody holds it: `None` when somebody does, so this round is
    /// skipped. The guard keeps the lease renewed until it is released or dropped.
    ///
    /// # Errors
    /// [`Error::InvalidName`] before any statement runs; [`Error::ShuttingDown`] once
    /// [`shutdown`](LeaseClient::shutdown) has begun (a lease taken by a statement that was
    /// already in flight then is given straight back); [`Error::Store`] when the store fails
    /// or does not answer within [`LeaseConfig::store_timeout`], or its answer was lost (the
    /// store's [`OutcomeUnknown`](StoreErrorKind::OutcomeUnknown), answered here as
    /// [`Transient`](StoreErrorKind::Transient)): if the statement did take the lease, a
    /// release for its holder follows in the background, at once and one store timeout
    /// later, so it does not keep everybody out for a TTL, and a shutdown waits for it within
    /// its grace period; where the runtime cannot spawn, or both releases come too early, it
    /// lapses within one TTL.
    ///
    /// # Cancel safety
    /// Not cancel safe. Cancelled before the store answers, the statement may still have taken
    /// the lease, for a holder nobody knows and nobody renews: the lease then lapses after one
    /// TTL, and until then nobody can take it, this process included. A guard exists only once
    /// this returns, so none is lost.
    pub async fn try_acquire(&self, name: impl IntoLeaseName) -> Result<Option<LeaseGuard>, Error> {
        self.take(name.into_lease_name()?, AnsweredLate::Hand).await
    }

    /// [`try_acquire`](LeaseClient::try_acquire), with a lease answered past its local deadline
    /// handed to the caller (as lost) or, `AnsweredLate::GiveBack`, given back at once as one
    /// nobody held: no guard made, no loss counted or logged, and `None` answered, as for a
    /// lease held elsewhere.
    pub(crate) async fn take(
        &self,
        name: LeaseName,
        late: AnsweredLate,
    ) -> Result<Option<LeaseGuard>, Error> {
        let mut token = self.enter(Kind::Acquiring, &name)?;
        let inner = &self.inner;
        let holder = HolderId::generate();
        let sent = self.clock().now();
        let fence = inner
            .store
            .try_acquire(&name, &holder, inner.config.ttl)
            .await;
        let stats = inner.store.stats();
        let fence = match fence {
            Ok(Some(fence)) => fence,
            Ok(None) => {
                stats.acquired(&name, Acquired::Skipped);
                tracing::debug!(lease = %name, "lease held elsewhere");
                return Ok(None);
            }
            Err(error) => {
                stats.acquired(&name, Acquired::Failed);
                if crate::timed_store::is_timeout(&error) {
                    self.give_back_unanswered(&name, &holder, token);
                    return Err(error);
                }
                return Err(match error {
                    // The statement may have taken the lease, and its answer was lost: given
                    // back as above, after which trying again is safe, as after any transient
                    // failure (a new acquisition is another holder).
                    Error::Store {
                        kind: StoreErrorKind::OutcomeUnknown,
                        source,
                        ..
                    } => {
                        // Info: the caller hears the error, and logs it as it sees fit.
                        tracing::info!(lease = %name, %holder, error = %crate::ErrorChain(&*source), "acquisition's answer lost; giving the lease back");
                        self.give_back_unanswered(&name, &holder, token);
                        Error::store(Operation::Acquire, Some(&name), source)
                    }
                    error => error,
                });
            }
        };
        stats.acquired(&name, Acquired::Won);
        if inner.shutdown.is_closing() {
            // Sent before the shutdown began, answered after: give it straight back, counted as
            // a release in flight, which the shutdown waits for.
            self.give_back_taken(&name, &holder, fence, token, "as the client shut down")
                .await;
            return Err(Error::ShuttingDown { name });
        }
        if late == AnsweredLate::GiveBack && inner.renewer.answered_late(sent) {
            // Taken, but answered past the deadline its sending set (the process stalled, or a
            // store timeout longer than the TTL let a slow answer through): not a lease to work
            // under, and not one anybody held, so no guard is made for it.
            self.give_back_taken(&name, &holder, fence, token, "past its deadline")
                .await;
            return Ok(None);
        }
        tracing::debug!(lease = %name, %fence, %holder, "lease taken");
        let held = inner.renewer.hold(name, holder, fence, sent);
        token.become_kind(Kind::Guard);
        Ok(Some(LeaseGuard::new(
            held,
            Arc::clone(&inner.renewer),
            inner.store.clone(),
            token,
        )))
    }

    /// Runs the shared renewer on the caller's task, where the [`Runtime`] cannot spawn it; never
    /// completes (drop it to stop).
    ///
    /// Needed only with a [`Runtime`] that cannot spawn, for guards from
    /// [`try_acquire`](LeaseClient::try_acquire) and [`acquire`](LeaseClient::acquire). Where the
    /// runtime can spawn, it spawns the renewer (if no acquisition has yet) and waits, doing
    /// nothing: the leases are renewed whether or not this future is polled. Where the renewer
    /// already runs on another caller's task, it waits too.
    ///
    /// # Cancel safety
    /// This method is cancel safe: dropping it stops renewal on this task, and a later call
    /// (or [`run_exclusive`](LeaseClient::run_exclusive), or a campaign) carries on. A renewal
    /// cancelled in flight counts as not renewed: the deadlines stay where the last success put
    /// them and the next round renews at once. Leases lapse only if nothing drives the renewer
    /// again before their deadline.
    pub async fn run_renewer(&self) {
        match self.inner.renewer.run_unless_spawned().await {}
    }

    /// The old name of [`run_renewer`](LeaseClient::run_renewer), which it runs.
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

/// What [`LeaseClient::take`] does with a lease the store answered past its local deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AnsweredLate {
    /// Hands it to the caller, who finds it lost (`try_acquire`: the caller asked for this
    /// attempt, and learns what became of it).
    Hand,
    /// Gives it back at once and answers `None` (`acquire`, which waits on).
    GiveBack,
}
