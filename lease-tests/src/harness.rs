//! [`TestBackend`]: what a store implementation provides so the suite can run against it.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use futures::future::BoxFuture;
use lease_core::{BoxError, LeaseStore};
use lease_sql::PoolState;

use crate::{Capability, FencedStore};

/// A backend under test: makes fresh stores for the cases.
///
/// Each test gets its own store (its own table or schema), so the cases run in parallel and
/// leave nothing behind: give the store a [teardown](FreshStore::with_teardown) that drops what
/// it made. The suite runs every teardown when a case ends, passed or failed; a case that
/// panics, or whose test is cut off, leaves its stores behind (see
/// [the cases' cancel safety](crate::cases#cancel-safety)).
///
/// A backend is built once per test, inside that test, so it should be cheap to make (a URL, a
/// table prefix) and connect in [`store`](TestBackend::store): every test runs on its own
/// runtime, and pools cannot be shared between runtimes.
#[async_trait]
pub trait TestBackend: Send + Sync + 'static {
    /// The store the cases run against.
    type Store: LeaseStore;

    /// A short name for messages, such as `"postgres"`.
    fn name(&self) -> &str;

    /// Whether this backend can run here. An error names what is missing (no server, no
    /// URL); the test then reports itself skipped, or fails under `LEASE_TEST_REQUIRE_ALL=1`
    /// (see [`env::skip_or_fail`](crate::env::skip_or_fail)).
    async fn available(&self) -> Result<(), BoxError> {
        Ok(())
    }

    /// Whether this backend's stores offer `capability`. A case that needs a capability the
    /// backend offers fails where it finds it missing (a [`pooled`](TestBackend::pooled),
    /// [`fenced`](TestBackend::fenced) or [`unreachable`](TestBackend::unreachable) that answers
    /// `None`, a `release_events` that answers no stream); one the backend does not offer
    /// makes such cases report themselves not applicable. `false` for every capability by
    /// default. A wrapper backend forwards its inner backend's answer for what it forwards.
    fn offers(&self, capability: Capability) -> bool {
        let _ = capability;
        false
    }

    /// A fresh, empty store of its own.
    async fn store(&self) -> Result<FreshStore<Self::Store>, BoxError>;

    /// A fresh store whose pool holds exactly `connections` connections, with a probe that
    /// writes through that same pool and the pool's statistics. `None` for a store without a
    /// pool, such as the memory store: the pool cases then report themselves not applicable
    /// (or fail, where the backend [offers](TestBackend::offers) [`Capability::Pool`]).
    async fn pooled(&self, connections: u32) -> Result<Option<PooledStore<Self::Store>>, BoxError> {
        let _ = connections;
        Ok(None)
    }

    /// A fresh store with fenced writes on its database, for the fenced-write cases. `None`
    /// (the default) for a store without a fenced check, such as the memory store: those cases
    /// then report themselves not applicable (or fail, where the backend
    /// [offers](TestBackend::offers) [`Capability::FencedWrites`]).
    async fn fenced(&self) -> Result<Option<FencedStore<Self::Store>>, BoxError> {
        Ok(None)
    }

    /// A store that cannot reach its database (a port nothing listens on, with short
    /// timeouts). `None` for a store that is always reachable, such as the memory store (a
    /// backend that [offers](TestBackend::offers) [`Capability::Unreachable`] must answer one).
    async fn unreachable(&self) -> Result<Option<Self::Store>, BoxError> {
        Ok(None)
    }
}

/// What a teardown runs: drop the table or schema a store was given.
pub(crate) type Teardown = Box<dyn FnOnce() -> BoxFuture<'static, Result<(), BoxError>> + Send>;

/// A store made for one test, and how to remove what it made.
pub struct FreshStore<S> {
    store: S,
    teardown: Option<Teardown>,
}

impl<S: LeaseStore> FreshStore<S> {
    /// A store that leaves nothing behind (memory), or whose leftovers are removed elsewhere.
    pub fn new(store: S) -> Self {
        Self {
            store,
            teardown: None,
        }
    }

    /// Runs `teardown` when the case ends, such as `DROP TABLE` for the store's table.
    pub fn with_teardown<F, Fut>(mut self, teardown: F) -> Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        self.teardown = Some(Box::new(move || Box::pin(teardown())));
        self
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The same store and teardown with the store converted, such as into an
    /// `Arc<dyn LeaseStore>`.
    pub fn map<T: LeaseStore>(self, convert: impl FnOnce(S) -> T) -> FreshStore<T> {
        FreshStore {
            store: convert(self.store),
            teardown: self.teardown,
        }
    }

    /// Runs the teardown now, for a test that uses the store outside a case.
    ///
    /// # Errors
    /// The teardown's own error.
    ///
    /// # Cancel safety
    /// Not cancel safe: the teardown moves into the future, so, dropped before it completes, it has
    /// run in part or not at all, and cannot be run again.
    pub async fn teardown(mut self) -> Result<(), BoxError> {
        match self.teardown.take() {
            Some(teardown) => teardown().await,
            None => Ok(()),
        }
    }

    pub(crate) fn take_teardown(&mut self) -> Option<Teardown> {
        self.teardown.take()
    }

    pub(crate) fn into_store(self) -> (S, Option<Teardown>) {
        (self.store, self.teardown)
    }
}

impl<S: fmt::Debug> fmt::Debug for FreshStore<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FreshStore")
            .field("store", &self.store)
            .field("teardown", &self.teardown.is_some())
            .finish()
    }
}

type Probe = Arc<dyn Fn() -> BoxFuture<'static, Result<(), BoxError>> + Send + Sync>;
type Stats = Arc<dyn Fn() -> PoolState + Send + Sync>;

/// A fresh store over a pool of a known size, with a probe write through that same pool and
/// the pool's statistics: what the "no connection held" case needs.
pub struct PooledStore<S> {
    store: Arc<S>,
    teardown: Option<Teardown>,
    probe: Probe,
    stats: Stats,
}

impl<S: LeaseStore> PooledStore<S> {
    /// `fresh` over the pool; `probe` makes a small write through the same pool and returns
    /// when it has committed (what a readiness probe would do); `stats` reads the pool.
    pub fn new<P, Fut, T>(fresh: FreshStore<S>, probe: P, stats: T) -> Self
    where
        P: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
        T: Fn() -> PoolState + Send + Sync + 'static,
    {
        let (store, teardown) = fresh.into_store();
        Self {
            store: Arc::new(store),
            teardown,
            probe: Arc::new(move || Box::pin(probe())),
            stats: Arc::new(stats),
        }
    }

    /// The store, shared so a client can hold it too.
    pub fn store(&self) -> &Arc<S> {
        &self.store
    }

    /// The same pool, probe and teardown with the store converted, such as into an
    /// `Arc<dyn LeaseStore>`.
    pub fn map<T: LeaseStore>(self, convert: impl FnOnce(Arc<S>) -> T) -> PooledStore<T> {
        PooledStore {
            store: Arc::new(convert(self.store)),
            teardown: self.teardown,
            probe: self.probe,
            stats: self.stats,
        }
    }

    /// Makes the probe write through the pool.
    ///
    /// # Errors
    /// The probe's own error: its write failed.
    ///
    /// # Cancel safety
    /// Dropped, the probe's write is dropped wherever it was, committed or not; a later call makes
    /// a new one.
    pub async fn probe(&self) -> Result<(), BoxError> {
        (self.probe)().await
    }

    /// The pool's statistics now.
    pub fn stats(&self) -> PoolState {
        (self.stats)()
    }

    pub(crate) fn take_teardown(&mut self) -> Option<Teardown> {
        self.teardown.take()
    }
}

impl<S: fmt::Debug> fmt::Debug for PooledStore<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledStore")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}
