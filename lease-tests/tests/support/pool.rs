//! A memory store behind a simulated pool: every statement takes one of a fixed number of
//! "connections" for its duration. Its releases are pushed as the memory store pushes them,
//! with no connection of the pool taken for the listening. Three broken modes serve as negative
//! controls: in pinning mode a taken lease keeps the connection it was taken on until it is
//! released, as a session advisory lock does; in pinning-on-renewal mode a lease is taken as it
//! should be, and its first renewal keeps its connection (a renewal left in an open
//! transaction; with a pool of one, every statement after it waits for that connection); in
//! listening-on-the-pool mode a subscription to
//! releases keeps a connection of the pool for as long as it listens, as a `LISTEN` on a pooled
//! connection would.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::{FutureExt, StreamExt};
use lease_core::{
    BoxError, Error, Fence, HolderId, LeaseInfo, LeaseName, LeaseStore, MemoryStore, Operation,
    ReleaseEvents, Ttl,
};
use lease_tests::{Capability, FreshStore, PoolState, PooledStore, TestBackend};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Connections of the pool behind stores made for the cases that do not ask for a size.
const DEFAULT_CONNECTIONS: u32 = 8;

/// What the pool's connections are taken for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// A connection per statement, for the statement's duration; listening takes none.
    Honest,
    /// Also a connection per held lease, until its release.
    Pinning,
    /// Also a connection per held lease from its first renewal on: each renewal keeps the
    /// connection it ran on (replacing the one before) until the next, or the release.
    PinningOnRenewal,
    /// Also a connection per subscription to releases, for as long as it listens.
    ListeningOnThePool,
    /// Also a connection per subscription to releases, taken when the stream is first read
    /// (where a waiting acquisition reads it) and kept while it listens.
    ListeningOnThePoolWhenRead,
}

/// The backend of stores behind a simulated pool, honest or broken as its [`Mode`] says.
#[derive(Debug, Clone, Copy)]
pub struct SimulatedPool {
    mode: Mode,
}

impl SimulatedPool {
    pub fn honest() -> Self {
        Self { mode: Mode::Honest }
    }

    pub fn pinning() -> Self {
        Self {
            mode: Mode::Pinning,
        }
    }

    pub fn pinning_on_renewal() -> Self {
        Self {
            mode: Mode::PinningOnRenewal,
        }
    }

    pub fn listening_on_the_pool() -> Self {
        Self {
            mode: Mode::ListeningOnThePool,
        }
    }

    pub fn listening_on_the_pool_when_read() -> Self {
        Self {
            mode: Mode::ListeningOnThePoolWhenRead,
        }
    }
}

#[async_trait]
impl TestBackend for SimulatedPool {
    type Store = PooledMemory;

    fn name(&self) -> &str {
        match self.mode {
            Mode::Honest => "memory-pool",
            Mode::Pinning => "memory-pinning-pool",
            Mode::PinningOnRenewal => "memory-pool-pinning-on-renewal",
            Mode::ListeningOnThePool => "memory-pool-listening-on-the-pool",
            Mode::ListeningOnThePoolWhenRead => "memory-pool-listening-on-the-pool-when-read",
        }
    }

    fn offers(&self, capability: Capability) -> bool {
        matches!(capability, Capability::PushedReleases | Capability::Pool)
    }

    async fn store(&self) -> Result<FreshStore<PooledMemory>, BoxError> {
        Ok(FreshStore::new(PooledMemory::new(
            DEFAULT_CONNECTIONS,
            self.mode,
        )))
    }

    async fn pooled(
        &self,
        connections: u32,
    ) -> Result<Option<PooledStore<PooledMemory>>, BoxError> {
        let store = PooledMemory::new(connections, self.mode);
        let (for_probe, for_stats) = (store.connections.clone(), store.connections.clone());
        Ok(Some(PooledStore::new(
            FreshStore::new(store),
            move || {
                let connections = for_probe.clone();
                async move {
                    let _connection = connections.acquire_owned().await?;
                    Ok(())
                }
            },
            move || PoolState {
                size: connections,
                idle: u32::try_from(for_stats.available_permits()).unwrap_or(u32::MAX),
            },
        )))
    }
}

#[derive(Debug)]
pub struct PooledMemory {
    inner: MemoryStore,
    mode: Mode,
    connections: Arc<Semaphore>,
    /// The connection each held lease pins, in the pinning modes.
    pinned: Option<Mutex<HashMap<LeaseName, OwnedSemaphorePermit>>>,
}

impl PooledMemory {
    fn new(connections: u32, mode: Mode) -> Self {
        Self {
            inner: MemoryStore::new(),
            mode,
            connections: Arc::new(Semaphore::new(connections as usize)),
            pinned: matches!(mode, Mode::Pinning | Mode::PinningOnRenewal)
                .then(|| Mutex::new(HashMap::new())),
        }
    }

    async fn connection(
        &self,
        operation: Operation,
        name: Option<&LeaseName>,
    ) -> Result<OwnedSemaphorePermit, Error> {
        self.connections
            .clone()
            .acquire_owned()
            .await
            .map_err(|error| Error::store(operation, name, error))
    }
}

#[async_trait]
impl LeaseStore for PooledMemory {
    async fn try_acquire(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<Option<Fence>, Error> {
        let connection = self.connection(Operation::Acquire, Some(name)).await?;
        let fence = self.inner.try_acquire(name, holder, ttl).await?;
        if let (Some(_), Some(pinned), Mode::Pinning) = (fence, &self.pinned, self.mode) {
            pinned.lock().unwrap().insert(name.clone(), connection);
        }
        Ok(fence)
    }

    async fn renew(&self, name: &LeaseName, holder: &HolderId, ttl: Ttl) -> Result<bool, Error> {
        let connection = self.connection(Operation::Renew, Some(name)).await?;
        let renewed = self.inner.renew(name, holder, ttl).await?;
        if let (true, Some(pinned), Mode::PinningOnRenewal) = (renewed, &self.pinned, self.mode) {
            pinned.lock().unwrap().insert(name.clone(), connection);
        }
        Ok(renewed)
    }

    async fn release(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        min_hold: Duration,
    ) -> Result<bool, Error> {
        // An advisory unlock runs on the connection the lock pinned.
        let pinned = self
            .pinned
            .as_ref()
            .and_then(|pinned| pinned.lock().unwrap().remove(name));
        let _connection = match pinned {
            Some(connection) => connection,
            None => self.connection(Operation::Release, Some(name)).await?,
        };
        self.inner.release(name, holder, min_hold).await
    }

    async fn inspect(&self, name: &LeaseName) -> Result<Option<LeaseInfo>, Error> {
        let _connection = self.connection(Operation::Inspect, Some(name)).await?;
        self.inner.inspect(name).await
    }

    async fn list(&self) -> Result<Vec<LeaseInfo>, Error> {
        let _connection = self.connection(Operation::List, None).await?;
        self.inner.list().await
    }

    async fn prune(&self, released_for: Duration) -> Result<u64, Error> {
        let _connection = self.connection(Operation::Prune, None).await?;
        self.inner.prune(released_for).await
    }
    async fn release_events(&self) -> Result<Option<ReleaseEvents>, Error> {
        let Some(events) = self.inner.release_events().await? else {
            return Ok(None);
        };
        let connection = match self.mode {
            Mode::ListeningOnThePool => self.connection(Operation::Subscribe, None).await?,
            Mode::ListeningOnThePoolWhenRead => {
                // Taken by the stream's first read, and kept by it from then on.
                let connections = Arc::clone(&self.connections);
                let first_read = async move {
                    let connection = connections.acquire_owned().await.ok();
                    futures::stream::pending::<LeaseName>()
                        .map(move |name| {
                            let _listening = &connection;
                            name
                        })
                        .boxed()
                };
                return Ok(Some(
                    futures::stream::select(events, first_read.flatten_stream()).boxed(),
                ));
            }
            _ => return Ok(Some(events)),
        };
        // The connection is kept by the stream, and given back when the stream is dropped.
        Ok(Some(
            events
                .map(move |name| {
                    let _listening = &connection;
                    name
                })
                .boxed(),
        ))
    }
}
