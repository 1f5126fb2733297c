//! [`Severable`]: a store whose connection a case can cut, to see what guards do in an outage.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use lease_core::{
    Error, Fence, HolderId, LeaseInfo, LeaseName, LeaseStore, Operation, ReleaseEvents, Ttl,
};

/// How a cut store behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Link {
    /// Every call reaches the store.
    Up = 0,
    /// Every call fails at once, like a refused connection.
    Refusing = 1,
    /// Every call waits forever, like packets dropped by a firewall: the nastier outage, which
    /// only a timeout ends.
    BlackHole = 2,
}

/// Wraps a backend's store; calls pass through until the case cuts the link.
#[derive(Debug)]
pub(crate) struct Severable<S> {
    inner: S,
    link: AtomicU8,
}

impl<S: LeaseStore> Severable<S> {
    pub(crate) fn new(inner: S) -> Self {
        Self {
            inner,
            link: AtomicU8::new(Link::Up as u8),
        }
    }

    pub(crate) fn set(&self, link: Link) {
        self.link.store(link as u8, Ordering::SeqCst);
    }

    /// Fails or hangs as the link says; `Ok` when the call may go through.
    async fn pass(&self, operation: Operation, name: Option<&LeaseName>) -> Result<(), Error> {
        match self.link.load(Ordering::SeqCst) {
            0 => Ok(()),
            1 => Err(Error::store(
                operation,
                name,
                "connection refused (the test cut the link)",
            )),
            _ => futures::future::pending().await,
        }
    }
}

#[async_trait]
impl<S: LeaseStore> LeaseStore for Severable<S> {
    async fn try_acquire(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<Option<Fence>, Error> {
        self.pass(Operation::Acquire, Some(name)).await?;
        self.inner.try_acquire(name, holder, ttl).await
    }

    async fn renew(&self, name: &LeaseName, holder: &HolderId, ttl: Ttl) -> Result<bool, Error> {
        self.pass(Operation::Renew, Some(name)).await?;
        self.inner.renew(name, holder, ttl).await
    }

    async fn renew_many(
        &self,
        leases: &[(LeaseName, HolderId)],
        ttl: Ttl,
    ) -> Result<Vec<bool>, Error> {
        self.pass(Operation::RenewMany, None).await?;
        self.inner.renew_many(leases, ttl).await
    }

    async fn release(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        min_hold: Duration,
    ) -> Result<bool, Error> {
        self.pass(Operation::Release, Some(name)).await?;
        self.inner.release(name, holder, min_hold).await
    }

    async fn inspect(&self, name: &LeaseName) -> Result<Option<LeaseInfo>, Error> {
        self.pass(Operation::Inspect, Some(name)).await?;
        self.inner.inspect(name).await
    }

    async fn list(&self) -> Result<Vec<LeaseInfo>, Error> {
        self.pass(Operation::List, None).await?;
        self.inner.list().await
    }

    async fn prune(&self, released_for: Duration) -> Result<u64, Error> {
        self.pass(Operation::Prune, None).await?;
        self.inner.prune(released_for).await
    }

    async fn release_events(&self) -> Result<Option<ReleaseEvents>, Error> {
        self.pass(Operation::Subscribe, None).await?;
        self.inner.release_events().await
    }
}
