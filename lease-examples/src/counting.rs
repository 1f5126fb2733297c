//! A store that counts the operations it passes on to another store: the worked example of
//! the guide to implementing `LeaseStore` (docs/implementing-a-store.md).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lease_core::{
    Error, Fence, HolderId, LeaseInfo, LeaseName, LeaseStore, ReleaseEvents, Ttl, async_trait,
};

/// How many times each operation has been called.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// `try_acquire` calls.
    pub acquire: u64,
    /// `renew` calls.
    pub renew: u64,
    /// `renew_many` calls (one per batch, however many leases it carries).
    pub renew_many: u64,
    /// `release` calls.
    pub release: u64,
    /// `inspect` and `list` calls.
    pub read: u64,
}

#[derive(Debug, Default)]
struct Counters {
    acquire: AtomicU64,
    renew: AtomicU64,
    renew_many: AtomicU64,
    release: AtomicU64,
    read: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Wraps any store and counts the calls made to it: how many statements a client really sends.
///
/// Clones share their counts.
#[derive(Debug, Clone)]
pub struct CountingStore<S> {
    inner: S,
    counters: Arc<Counters>,
}

impl<S: LeaseStore> CountingStore<S> {
    /// Counts the calls made to `inner`.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            counters: Arc::default(),
        }
    }

    /// The calls so far.
    pub fn counts(&self) -> Counts {
        let c = &self.counters;
        Counts {
            acquire: c.acquire.load(Ordering::Relaxed),
            renew: c.renew.load(Ordering::Relaxed),
            renew_many: c.renew_many.load(Ordering::Relaxed),
            release: c.release.load(Ordering::Relaxed),
            read: c.read.load(Ordering::Relaxed),
        }
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
        bump(&self.counters.acquire);
        self.inner.try_acquire(name, holder, ttl).await
    }

    async fn renew(&self, name: &LeaseName, holder: &HolderId, ttl: Ttl) -> Result<bool, Error> {
        bump(&self.counters.renew);
        self.inner.renew(name, holder, ttl).await
    }

    // A wrapper forwards the methods that have a default too: otherwise the default would run
    // here, and a SQL store's one-statement batch would become a loop of single renewals.
    async fn renew_many(
        &self,
        leases: &[(LeaseName, HolderId)],
        ttl: Ttl,
    ) -> Result<Vec<bool>, Error> {
        bump(&self.counters.renew_many);
        self.inner.renew_many(leases, ttl).await
    }

    async fn release(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        min_hold: Duration,
    ) -> Result<bool, Error> {
        bump(&self.counters.release);
        self.inner.release(name, holder, min_hold).await
    }

    async fn inspect(&self, name: &LeaseName) -> Result<Option<LeaseInfo>, Error> {
        bump(&self.counters.read);
        self.inner.inspect(name).await
    }

    async fn list(&self) -> Result<Vec<LeaseInfo>, Error> {
        bump(&self.counters.read);
        self.inner.list().await
    }

    async fn prune(&self, released_for: Duration) -> Result<u64, Error> {
        self.inner.prune(released_for).await
    }

    async fn release_events(&self) -> Result<Option<ReleaseEvents>, Error> {
        self.inner.release_events().await
    }
}
