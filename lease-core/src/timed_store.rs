//! [`TimedStore`]: the client's store, every call bounded by the store timeout.

use std::sync::Arc;
use std::time::Duration;

use crate::clock::Clock;
use crate::{Error, Fence, HolderId, LeaseName, LeaseStore, Operation, Ttl};

/// The store with the clock and the store timeout: each call that fails to answer in time
/// counts as failed, with [`TimedOut`] as its source. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct TimedStore {
    store: Arc<dyn LeaseStore>,
    clock: Clock,
    timeout: Duration,
}

impl TimedStore {
    pub(crate) fn new(store: Arc<dyn LeaseStore>, clock: Clock, timeout: Duration) -> Self {
        Self {
            store,
            clock,
            timeout,
        }
    }

    /// The store itself, for a call no timeout should bound.
    pub(crate) fn unbounded(&self) -> &Arc<dyn LeaseStore> {
        &self.store
    }

    /// The clock the timeout runs on.
    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    /// [`LeaseStore::try_acquire`], bounded.
    pub(crate) async fn try_acquire(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<Option<Fence>, Error> {
        self.call(
            Operation::Acquire,
            Some(name),
            self.store.try_acquire(name, holder, ttl),
        )
        .await
    }

    /// [`LeaseStore::renew_many`], bounded.
    pub(crate) async fn renew_many(
        &self,
        leases: &[(LeaseName, HolderId)],
        ttl: Ttl,
    ) -> Result<Vec<bool>, Error> {
        self.call(
            Operation::RenewMany,
            None,
            self.store.renew_many(leases, ttl),
        )
        .await
    }

    /// [`LeaseStore::release`], bounded.
    pub(crate) async fn release(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        min_hold: Duration,
    ) -> Result<bool, Error> {
        self.call(
            Operation::Release,
            Some(name),
            self.store.release(name, holder, min_hold),
        )
        .await
    }

    /// One store call, bounded by the store timeout.
    async fn call<T>(
        &self,
        operation: Operation,
        name: Option<&LeaseName>,
        call: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        match self.clock.timeout(self.timeout, call).await {
            Some(result) => result,
            None => Err(Error::store(operation, name, TimedOut(self.timeout))),
        }
    }
}

/// A store call that did not answer in time.
#[derive(Debug, thiserror::Error)]
#[error("no answer within {0:?}")]
pub(crate) struct TimedOut(Duration);
