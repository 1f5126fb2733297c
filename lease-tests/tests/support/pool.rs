//! A memory store behind a simulated pool: every statement takes one of a fixed number of
//! "connections" for its duration. In pinning mode a taken lease keeps the connection it was
//! taken on until it is released, as a session advisory lock does.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use lease_core::{
    BoxError, Error, Fence, HolderId, LeaseInfo, LeaseName, LeaseStore, MemoryStore, Operation, Ttl,
};
use lease_tests::{FreshStore, PoolState, PooledStore, TestBackend};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Connections of the pool behind stores made for the cases that do not ask for a size.
const DEFAULT_CONNECTIONS: u32 = 8;

/// The backend: honest (a connection per statement) or pinning (a connection per held lease).
#[derive(Debug, Clone, Copy)]
pub struct SimulatedPool {
    pinning: bool,
}

impl SimulatedPool {
    pub fn honest() -> Self {
        Self { pinning: false }
    }

    pub fn pinning() -> Self {
        Self { pinning: true }
    }
}

#[async_trait]
impl TestBackend for SimulatedPool {
    type Store = PooledMemory;

    fn name(&self) -> &str {
        if self.pinning {
            "memory-pinning-pool"
        } else {
            "memory-pool"
        }
    }

    async fn store(&self) -> Result<FreshStore<PooledMemory>, BoxError> {
        Ok(FreshStore::new(PooledMemory::new(
            DEFAULT_CONNECTIONS,
            self.pinning,
        )))
    }

    async fn pooled(
        &self,
        connections: u32,
    ) -> Result<Option<PooledStore<PooledMemory>>, BoxError> {
        let store = PooledMemory::new(connections, self.pinning);
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
    connections: Arc<Semaphore>,
    /// The connection each held lease pins, in pinning mode.
    pinned: Option<Mutex<HashMap<LeaseName, OwnedSemaphorePermit>>>,
}

impl PooledMemory {
    fn new(connections: u32, pinning: bool) -> Self {
        Self {
            inner: MemoryStore::new(),
            connections: Arc::new(Semaphore::new(connections as usize)),
            pinned: pinning.then(|| Mutex::new(HashMap::new())),
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
        if let (Some(_), Some(pinned)) = (fence, &self.pinned) {
            pinned.lock().unwrap().insert(name.clone(), connection);
        }
        Ok(fence)
    }

    async fn renew(&self, name: &LeaseName, holder: &HolderId, ttl: Ttl) -> Result<bool, Error> {
        let _connection = self.connection(Operation::Renew, Some(name)).await?;
        self.inner.renew(name, holder, ttl).await
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
}
