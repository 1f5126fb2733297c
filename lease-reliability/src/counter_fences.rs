//! [`CounterFences`]: a store that answers counter fences (`previous + 1`) instead of the
//! store's own, the negative control of the failover scenarios.
//!
//! A counter fence is what the SQL stores answered before their fences took the database's
//! clock: the next fence of a name is its row's fence plus one. After a failover that lost the
//! latest acquisitions, the promoted standby's row holds an older fence, and the counter hands
//! out a fence that was granted before. A scenario that checks "every fence after the failover
//! exceeds every fence before it" must catch that, or its check could not fail.

use std::time::Duration;

use async_trait::async_trait;
use lease_core::{Error, Fence, HolderId, LeaseInfo, LeaseName, LeaseStore, Ttl};

/// Wraps a store: acquisitions go to it, but the fence answered is the row's fence before the
/// acquisition plus one (one for a new name). Everything else is the wrapped store's.
#[derive(Debug, Clone)]
pub struct CounterFences<S> {
    inner: S,
}

impl<S> CounterFences<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        Self { inner }
    }
}

#[async_trait]
impl<S: LeaseStore> LeaseStore for CounterFences<S> {
    async fn try_acquire(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<Option<Fence>, Error> {
        let previous = self
            .inner
            .inspect(name)
            .await?
            .map_or(0, |info| info.fence.get());
        Ok(self
            .inner
            .try_acquire(name, holder, ttl)
            .await?
            .map(|_| Fence::new(previous + 1)))
    }

    async fn renew(&self, name: &LeaseName, holder: &HolderId, ttl: Ttl) -> Result<bool, Error> {
        self.inner.renew(name, holder, ttl).await
    }

    async fn renew_many(
        &self,
        leases: &[(LeaseName, HolderId)],
        ttl: Ttl,
    ) -> Result<Vec<bool>, Error> {
        self.inner.renew_many(leases, ttl).await
    }

    async fn release(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        min_hold: Duration,
    ) -> Result<bool, Error> {
        self.inner.release(name, holder, min_hold).await
    }

    async fn inspect(&self, name: &LeaseName) -> Result<Option<LeaseInfo>, Error> {
        self.inner.inspect(name).await
    }

    async fn list(&self) -> Result<Vec<LeaseInfo>, Error> {
        self.inner.list().await
    }

    async fn prune(&self, released_for: Duration) -> Result<u64, Error> {
        self.inner.prune(released_for).await
    }
}
