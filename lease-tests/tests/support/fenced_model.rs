//! A model of a database with row locks, to show that the fenced cases catch a wrong check
//! without a database: a memory store whose every write of a lease's row waits for that row's
//! lock, as a statement waits for a row lock, and fenced writes to a protected table that take
//! the lock with their check and keep it until they commit. Each way of getting the check wrong
//! that issue 12 names is a flaw; without one, the model passes the cases.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::future::BoxFuture;
use lease_core::{
    BoxError, Error, Fence, FencedCheck, HolderId, LeaseHandle, LeaseInfo, LeaseName, LeaseStore,
    MemoryStore, ReleaseEvents, Ttl,
};
use lease_tests::{Capability, FencedStore, FencedWrites, FreshStore, TestBackend};

/// How the model's fenced check goes wrong, if it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FencedFlaw {
    /// None: the check locks the row until the commit, and reads holder, fence and expiry.
    None,
    /// The check takes no lock: a takeover goes on while the transaction is open.
    Unlocked,
    /// The check is a statement of its own: its lock ends before the transaction's write.
    Separate,
    /// The check does not read the expiry: a holder whose lease expired writes.
    IgnoresExpiry,
    /// The check refuses a lease that is gone, and leaves its guard believing it holds it.
    KeepsTheGuard,
    /// The check locks the row by touching it, stepping the expiry on by a millisecond each
    /// time: a holder that checks often keeps its lease long after it stopped renewing.
    MovesTheExpiry,
}

/// A backend whose stores are the model, its fenced writes with `flaw`.
#[derive(Debug, Clone, Copy)]
pub struct ModelBackend(pub FencedFlaw);

#[async_trait]
impl TestBackend for ModelBackend {
    type Store = ModelStore;

    fn name(&self) -> &str {
        "fenced-model"
    }

    fn offers(&self, capability: Capability) -> bool {
        matches!(
            capability,
            Capability::PushedReleases | Capability::FencedWrites
        )
    }

    async fn store(&self) -> Result<FreshStore<ModelStore>, BoxError> {
        Ok(FreshStore::new(ModelStore::new()))
    }

    async fn fenced(&self) -> Result<Option<FencedStore<ModelStore>>, BoxError> {
        let store = ModelStore::new();
        let writes = ModelWrites {
            store: store.clone(),
            flaw: self.0,
            written: Mutex::new(Vec::new()),
        };
        Ok(Some(FencedStore::new(
            FreshStore::new(store),
            Arc::new(writes),
        )))
    }
}

/// The lease rows, in a memory store on a clock that [`FencedWrites::expire`] moves on, each
/// behind a lock that every write of the row takes.
#[derive(Debug, Clone)]
pub struct ModelStore {
    rows: MemoryStore,
    locks: Arc<Mutex<HashMap<LeaseName, Arc<futures::lock::Mutex<()>>>>>,
    /// How far the database's clock runs ahead of this process's, in nanoseconds.
    ahead: Arc<AtomicU64>,
}

impl ModelStore {
    fn new() -> Self {
        let ahead = Arc::new(AtomicU64::new(0));
        let clock = Arc::clone(&ahead);
        Self {
            rows: MemoryStore::with_clock(move || {
                Instant::now() + Duration::from_nanos(clock.load(Ordering::SeqCst))
            }),
            locks: Arc::default(),
            ahead,
        }
    }

    /// The lock of `name`'s row.
    fn lock_of(&self, name: &LeaseName) -> Arc<futures::lock::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(locks.entry(name.clone()).or_default())
    }
}

#[async_trait]
impl LeaseStore for ModelStore {
    async fn try_acquire(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<Option<Fence>, Error> {
        let lock = self.lock_of(name);
        let _row = lock.lock().await;
        self.rows.try_acquire(name, holder, ttl).await
    }

    async fn renew(&self, name: &LeaseName, holder: &HolderId, ttl: Ttl) -> Result<bool, Error> {
        let lock = self.lock_of(name);
        let _row = lock.lock().await;
        self.rows.renew(name, holder, ttl).await
    }

    async fn renew_many(
        &self,
        leases: &[(LeaseName, HolderId)],
        ttl: Ttl,
    ) -> Result<Vec<bool>, Error> {
        let mut renewed = Vec::with_capacity(leases.len());
        for (name, holder) in leases {
            renewed.push(self.renew(name, holder, ttl).await?);
        }
        Ok(renewed)
    }

    async fn release(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        min_hold: Duration,
    ) -> Result<bool, Error> {
        let lock = self.lock_of(name);
        let _row = lock.lock().await;
        self.rows.release(name, holder, min_hold).await
    }

    async fn inspect(&self, name: &LeaseName) -> Result<Option<LeaseInfo>, Error> {
        self.rows.inspect(name).await
    }

    async fn list(&self) -> Result<Vec<LeaseInfo>, Error> {
        self.rows.list().await
    }

    async fn release_events(&self) -> Result<Option<ReleaseEvents>, Error> {
        self.rows.release_events().await
    }

    async fn prune(&self, released_for: Duration) -> Result<u64, Error> {
        self.rows.prune(released_for).await
    }
}

/// Fenced writes on the model: the check, the job's work, the insert, the commit.
struct ModelWrites {
    store: ModelStore,
    flaw: FencedFlaw,
    written: Mutex<Vec<i64>>,
}

impl ModelWrites {
    /// The check of `lease` against its row: in a `lease.store` span of `lease.operation` =
    /// `fence`, counted in the client's statistics, as the SQL stores' checks are.
    async fn check(&self, lease: &LeaseHandle) -> Result<(), Error> {
        let span = tracing::debug_span!(
            "lease.store",
            lease.operation = "fence",
            lease.outcome = tracing::field::Empty,
        );
        let row = self.store.rows.inspect(lease.name()).await?;
        let held = row.as_ref().is_some_and(|row| {
            row.holder == *lease.holder()
                && row.fence == lease.fence()
                && (self.flaw == FencedFlaw::IgnoresExpiry || !row.is_expired())
        });
        if held {
            if let (FencedFlaw::MovesTheExpiry, Some(row)) = (self.flaw, &row) {
                let left = row
                    .expires_at
                    .duration_since(row.observed_at)
                    .unwrap_or_default();
                // A TTL keeps whole milliseconds: two more, cut to those, are one more at least.
                let ttl = Ttl::new(left + Duration::from_millis(2))?;
                self.store
                    .rows
                    .renew(lease.name(), lease.holder(), ttl)
                    .await?;
            }
            span.record("lease.outcome", "ok");
            lease.record_fenced_check(FencedCheck::Passed);
            return Ok(());
        }
        span.record("lease.outcome", "not_held");
        lease.record_fenced_check(FencedCheck::NotHeld);
        Err(if self.flaw == FencedFlaw::KeepsTheGuard {
            Error::NotHeld {
                name: lease.name().clone(),
                fence: lease.fence(),
            }
        } else {
            lease.mark_not_held()
        })
    }

    /// The lock of `name`'s row, taken once no transaction holds it.
    async fn wait_for_row(&self, name: &LeaseName) -> futures::lock::OwnedMutexGuard<()> {
        self.store.lock_of(name).lock_owned().await
    }
}

#[async_trait]
impl FencedWrites for ModelWrites {
    async fn write(
        &self,
        lease: &LeaseHandle,
        value: i64,
        hold: BoxFuture<'_, ()>,
    ) -> Result<(), Error> {
        let lock = self.store.lock_of(lease.name());
        let row = match self.flaw {
            FencedFlaw::Unlocked => None,
            _ => Some(lock.lock().await),
        };
        self.check(lease).await?;
        let row = if self.flaw == FencedFlaw::Separate {
            drop(row);
            None
        } else {
            row
        };
        hold.await;
        self.written
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(value);
        drop(row);
        Ok(())
    }

    async fn written(&self) -> Result<Vec<i64>, BoxError> {
        Ok(self
            .written
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone())
    }

    /// Moves the database's clock on past the lease's expiry.
    async fn expire(&self, name: &LeaseName) -> Result<(), BoxError> {
        let _row = self.wait_for_row(name).await;
        if let Some(row) = self.store.rows.inspect(name).await? {
            let left = row
                .expires_at
                .duration_since(row.observed_at)
                .unwrap_or_default();
            let step = left + Duration::from_millis(1);
            self.store
                .ahead
                .fetch_add(u64::try_from(step.as_nanos())?, Ordering::SeqCst);
        }
        Ok(())
    }

    /// Releases the lease for its holder, as an operator's forced release does.
    async fn free(&self, name: &LeaseName) -> Result<(), BoxError> {
        let _row = self.wait_for_row(name).await;
        if let Some(row) = self.store.rows.inspect(name).await? {
            self.store
                .rows
                .release(name, &row.holder, Duration::ZERO)
                .await?;
        }
        Ok(())
    }
}
