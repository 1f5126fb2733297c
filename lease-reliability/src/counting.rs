//! [`CountingStore`]: a store that counts the calls reaching it, to show that bad input never
//! gets as far as a store.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use lease_core::{Error, Fence, HolderId, LeaseInfo, LeaseName, LeaseStore, Ttl};

/// Wraps a store and counts every call made to it, of any operation.
#[derive(Debug, Clone)]
pub struct CountingStore<S> {
    inner: S,
    calls: Arc<AtomicU64>,
}

impl<S> CountingStore<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            calls: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Calls made so far, through this value and its clones.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    fn count(&self) {
        self.calls.fetch_add(1, Ordering::SeqCst);
    }
}

#[async_trait]
impl<S: LeaseStore> LeaseStore for CountingStore<S> {
    async fn try_acquire(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<Option<Fence>, Error> {
        self.count();
        self.inner.try_acquire(name, holder, ttl).await
    }

    async fn renew(&self, name: &LeaseName, holder: &HolderId, ttl: Ttl) -> Result<bool, Error> {
        self.count();
        self.inner.renew(name, holder, ttl).await
    }

    async fn renew_many(
        &self,
        leases: &[(LeaseName, HolderId)],
        ttl: Ttl,
    ) -> Result<Vec<bool>, Error> {
        self.count();
        self.inner.renew_many(leases, ttl).await
    }

    async fn release(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        min_hold: Duration,
    ) -> Result<bool, Error> {
        self.count();
        self.inner.release(name, holder, min_hold).await
    }

    async fn inspect(&self, name: &LeaseName) -> Result<Option<LeaseInfo>, Error> {
        self.count();
        self.inner.inspect(name).await
    }

    async fn list(&self) -> Result<Vec<LeaseInfo>, Error> {
        self.count();
        self.inner.list().await
    }

    async fn prune(&self, released_for: Duration) -> Result<u64, Error> {
        self.count();
        self.inner.prune(released_for).await
    }
}
