//! [`Killable`]: a store an instance stops reaching the moment it is killed, as a crashed
//! process would.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lease_core::{
    Error, Fence, HolderId, LeaseInfo, LeaseName, LeaseStore, Operation, ReleaseEvents, Ttl,
    async_trait,
};

/// Wraps an instance's store. Once [`kill`](Killable::kill)ed, every call fails without reaching
/// the database: nothing the dead instance would have sent (a renewal, the release a dropped
/// guard tries) arrives, so its leases lapse after their TTL, as a crash leaves them.
#[derive(Debug, Clone)]
pub(crate) struct Killable<S> {
    inner: S,
    dead: Arc<AtomicBool>,
}

/// What a killed instance's store calls fail with.
#[derive(Debug)]
struct Killed;

impl std::fmt::Display for Killed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the instance was killed")
    }
}

impl std::error::Error for Killed {}

impl<S> Killable<S> {
    pub(crate) fn new(inner: S) -> Self {
        Self {
            inner,
            dead: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The store it wraps.
    pub(crate) fn inner(&self) -> &S {
        &self.inner
    }

    /// From now on, every call fails.
    pub(crate) fn kill(&self) {
        self.dead.store(true, Ordering::SeqCst);
    }

    fn alive(&self, operation: Operation, name: Option<&LeaseName>) -> Result<(), Error> {
        if self.dead.load(Ordering::SeqCst) {
            Err(Error::store(operation, name, Killed))
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl<S: LeaseStore> LeaseStore for Killable<S> {
    async fn try_acquire(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<Option<Fence>, Error> {
        self.alive(Operation::Acquire, Some(name))?;
        self.inner.try_acquire(name, holder, ttl).await
    }

    async fn renew(&self, name: &LeaseName, holder: &HolderId, ttl: Ttl) -> Result<bool, Error> {
        self.alive(Operation::Renew, Some(name))?;
        self.inner.renew(name, holder, ttl).await
    }

    async fn renew_many(
        &self,
        leases: &[(LeaseName, HolderId)],
        ttl: Ttl,
    ) -> Result<Vec<bool>, Error> {
        self.alive(Operation::RenewMany, None)?;
        self.inner.renew_many(leases, ttl).await
    }

    async fn release(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        min_hold: Duration,
    ) -> Result<bool, Error> {
        self.alive(Operation::Release, Some(name))?;
        self.inner.release(name, holder, min_hold).await
    }

    async fn inspect(&self, name: &LeaseName) -> Result<Option<LeaseInfo>, Error> {
        self.alive(Operation::Inspect, Some(name))?;
        self.inner.inspect(name).await
    }

    async fn list(&self) -> Result<Vec<LeaseInfo>, Error> {
        self.alive(Operation::List, None)?;
        self.inner.list().await
    }

    async fn prune(&self, released_for: Duration) -> Result<u64, Error> {
        self.alive(Operation::Prune, None)?;
        self.inner.prune(released_for).await
    }

    async fn release_events(&self) -> Result<Option<ReleaseEvents>, Error> {
        self.inner.release_events().await
    }
}
