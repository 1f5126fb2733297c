//! [`MemoryStore`]: leases in this process's memory.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use futures::StreamExt;
use futures::channel::mpsc;

use crate::{
    Error, Fence, HolderId, LeaseInfo, LeaseName, LeaseStore, MAX_MIN_HOLD, ReleaseEvents, Ttl,
};

/// Leases in memory: the reference store, with exactly the semantics every database store has.
///
/// Use it for unit tests of code that takes leases, and for work that only has to be exclusive
/// within one process. Its clock is the monotonic clock (or the one given to
/// [`MemoryStore::with_clock`]), so changing the system time changes nothing.
///
/// ```
/// # futures::executor::block_on(async {
/// use std::time::Duration;
/// use lease_core::{HolderId, LeaseName, LeaseStore, MemoryStore, Ttl};
///
/// let store = MemoryStore::new();
/// let name = LeaseName::new("sweep")?;
/// let (a, b) = (HolderId::generate(), HolderId::generate());
/// let ttl = Ttl::from_secs(60)?;
///
/// let fence = store.try_acquire(&name, &a, ttl).await?.expect("free");
/// assert_eq!(store.try_acquire(&name, &b, ttl).await?, None);
/// assert!(store.release(&name, &a, Duration::ZERO).await?);
/// assert!(store.try_acquire(&name, &b, ttl).await?.unwrap() > fence);
/// # Ok::<(), lease_core::Error>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

struct Inner {
    rows: Mutex<BTreeMap<LeaseName, Row>>,
    /// The greatest fence of a row [`LeaseStore::prune`] deleted, changed only under the `rows`
    /// lock: a name whose row was deleted starts above it, so fences never go back.
    pruned_fence: AtomicU64,
    /// Subscribers to [`LeaseStore::release_events`].
    released: Mutex<Vec<mpsc::UnboundedSender<LeaseName>>>,
    clock: Box<dyn Fn() -> Instant + Send + Sync>,
    /// The wall-clock time matching `origin`, to report times as [`SystemTime`]s.
    epoch: SystemTime,
    origin: Instant,
}

/// One lease. Released leases keep their row (with no holder) so the fence never goes back.
struct Row {
    holder: Option<HolderId>,
    fence: u64,
    taken_at: Instant,
    expires_at: Instant,
}

impl Row {
    fn held_by(&self, holder: &HolderId, now: Instant) -> bool {
        self.holder.as_ref() == Some(holder) && self.expires_at > now
    }
}

impl MemoryStore {
    /// An empty store on the monotonic clock.
    pub fn new() -> Self {
        Self::with_clock(Instant::now)
    }

    /// An empty store on the given monotonic clock, such as a runtime's mockable one:
    /// `MemoryStore::with_clock(|| tokio::time::Instant::now().into_std())`.
    pub fn with_clock(clock: impl Fn() -> Instant + Send + Sync + 'static) -> Self {
        let origin = clock();
        Self {
            inner: Arc::new(Inner {
                rows: Mutex::new(BTreeMap::new()),
                pruned_fence: AtomicU64::new(0),
                released: Mutex::new(Vec::new()),
                clock: Box::new(clock),
                epoch: SystemTime::now(),
                origin,
            }),
        }
    }

    fn rows(&self) -> MutexGuard<'_, BTreeMap<LeaseName, Row>> {
        lock(&self.inner.rows)
    }

    fn now(&self) -> Instant {
        (self.inner.clock)()
    }

    fn wall(&self, at: Instant) -> SystemTime {
        self.inner.epoch + at.saturating_duration_since(self.inner.origin)
    }

    fn info(&self, name: &LeaseName, row: &Row, now: Instant) -> Option<LeaseInfo> {
        Some(LeaseInfo::new(
            name.clone(),
            row.holder.clone()?,
            Fence::new(row.fence),
            self.wall(row.taken_at),
            self.wall(row.expires_at),
            self.wall(now),
        ))
    }
}

/// Locks `mutex`. A panic elsewhere while holding it leaves the data consistent: each operation
/// writes a row, or the subscriber list, in one step.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("leases", &self.rows().len())
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl LeaseStore for MemoryStore {
    async fn try_acquire(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<Option<Fence>, Error> {
        let now = self.now();
        let mut rows = self.rows();
        let fence = match rows.get(name) {
            Some(row) if row.holder.is_some() && row.expires_at > now => return Ok(None),
            Some(row) => row.fence + 1,
            None => self.inner.pruned_fence.load(Ordering::Relaxed) + 1,
        };
        rows.insert(
            name.clone(),
            Row {
                holder: Some(holder.clone()),
                fence,
                taken_at: now,
                expires_at: now + ttl.get(),
            },
        );
        Ok(Some(Fence::new(fence)))
    }

    async fn renew(&self, name: &LeaseName, holder: &HolderId, ttl: Ttl) -> Result<bool, Error> {
        let now = self.now();
        match self.rows().get_mut(name) {
            Some(row) if row.held_by(holder, now) => {
                row.expires_at = row.expires_at.max(now + ttl.get());
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn release(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        min_hold: Duration,
    ) -> Result<bool, Error> {
        let now = self.now();
        let freed = match self.rows().get_mut(name) {
            Some(row) if row.held_by(holder, now) => {
                // Cut to `MAX_MIN_HOLD` as every store does; where even that would leave the
                // platform's `Instant`, the lease is kept until it expires.
                // Counted from the acquisition, or from now where the clock reads the
                // acquisition ahead of it (a clock given to `with_clock` stepped back).
                let hold_until = row
                    .taken_at
                    .min(now)
                    .checked_add(min_hold.min(MAX_MIN_HOLD))
                    .unwrap_or(row.expires_at);
                if hold_until > now {
                    row.expires_at = hold_until;
                    false
                } else {
                    row.holder = None;
                    row.expires_at = now;
                    true
                }
            }
            _ => return Ok(false),
        };
        if freed {
            lock(&self.inner.released)
                .retain(|subscriber| subscriber.unbounded_send(name.clone()).is_ok());
        }
        Ok(true)
    }

    async fn inspect(&self, name: &LeaseName) -> Result<Option<LeaseInfo>, Error> {
        let now = self.now();
        Ok(self
            .rows()
            .get(name)
            .and_then(|row| self.info(name, row, now)))
    }

    async fn list(&self) -> Result<Vec<LeaseInfo>, Error> {
        let now = self.now();
        Ok(self
            .rows()
            .iter()
            .filter_map(|(name, row)| self.info(name, row, now))
            .collect())
    }

    async fn prune(&self, released_for: Duration) -> Result<u64, Error> {
        let now = self.now();
        let mut rows = self.rows();
        let before = rows.len();
        let mut pruned_fence = self.inner.pruned_fence.load(Ordering::Relaxed);
        // A row is free from its expiry on (a release sets it to the release's time).
        rows.retain(|_, row| {
            let keep = now.saturating_duration_since(row.expires_at) <= released_for;
            if !keep {
                pruned_fence = pruned_fence.max(row.fence);
            }
            keep
        });
        self.inner
            .pruned_fence
            .store(pruned_fence, Ordering::Relaxed);
        Ok((before - rows.len()) as u64)
    }

    /// Every release that frees a lease at once (not one held on by a minimum hold).
    async fn release_events(&self) -> Result<Option<ReleaseEvents>, Error> {
        let (subscriber, events) = mpsc::unbounded();
        lock(&self.inner.released).push(subscriber);
        Ok(Some(events.boxed()))
    }
}
