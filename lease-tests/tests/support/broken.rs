//! Memory stores that each break one rule of the contract, and a backend to run cases on them.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use futures::channel::mpsc::UnboundedSender;
use lease_core::{
    BoxError, Error, Fence, HolderId, LeaseInfo, LeaseName, LeaseStore, MemoryStore, Operation,
    ReleaseEvents, StoreErrorKind, Ttl,
};
use lease_tests::{Capability, FreshStore, TestBackend};

/// The rule a store breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flaw {
    /// Acquire takes the lease even while somebody holds it.
    AcquireIgnoresHolder,
    /// Acquire takes the lease while somebody holds it, once (the first time it finds a
    /// holder whose lease runs); correct afterwards.
    AcquireIgnoresHolderOnce,
    /// Acquire refuses a lease whose holder's lease expired.
    AcquireIgnoresExpiry,
    /// Renewal revives a lease that expired.
    RenewIgnoresExpiry,
    /// Renewal answers that the holder's running lease was renewed, without moving its expiry.
    RenewLeavesExpiry,
    /// Renewal extends the lease whoever asks, as long as somebody holds it.
    RenewIgnoresHolder,
    /// Release frees the lease whoever asks.
    ReleaseIgnoresHolder,
    /// Release deletes the row, so the fence starts over.
    ReleaseResetsFence,
    /// `renew_many` answers `true` for every lease.
    RenewManyReportsAllRenewed,
    /// `list` leaves out expired leases that `inspect` reports.
    ListHidesExpired,
    /// Names are compared without case and surrounding spaces, like a case-insensitive,
    /// padding collation.
    NamesFoldCase,
    /// When unreachable, calls fail with the wrong error.
    UnreachableGivesWrongError,
    /// When unreachable, calls fail with a permanent store error, on a backend that says its
    /// unreachable store's errors are transient (a server's driver that misreads a refused
    /// connection: every campaign would end at the first outage).
    UnreachableFailsPermanently,
    /// The backend offers a pool, and `pooled` answers `None`: a wrapper backend that does not
    /// forward it.
    PoolNotForwarded,
    /// The backend offers fenced writes, and `fenced` answers `None`.
    FencedNotForwarded,
    /// The backend offers an unreachable store, and `unreachable` answers `None`.
    UnreachableNotForwarded,
    /// Acquire reads the row, then writes it unconditionally: every caller that found the
    /// lease expired takes it over, overwriting the others (a lost update).
    TakeoverOverwrites,
    /// Acquire by the holder of a held lease renews it and answers its fence, as if holding
    /// were re-entrant.
    AcquireReentrant,
    /// `list` orders names as a case-insensitive collation does, not by their bytes.
    ListInCollationOrder,
    /// Forwards everything to a store that pushes releases except `release_events`, which
    /// answers `None`: the mistake of a wrapper store.
    ReleaseEventsNotForwarded,
    /// Release events push every release, also one a minimum hold keeps taken and a stale
    /// holder's that frees nothing.
    ReleasePushesUnfreed,
    /// Acquire answers a fence one above the one the row holds.
    AcquireMisreportsFence,
    /// Release answers that it released, and leaves the lease taken until it expires.
    ReleaseKeepsLease,
    /// Release frees the lease at once, whatever minimum hold it was given.
    ReleaseIgnoresMinHold,
    /// Release keeps the lease for its minimum hold rounded down to whole milliseconds (a
    /// store whose table keeps milliseconds, dividing the hold's microseconds).
    ReleaseRoundsMinHoldDown,
    /// Renewal adds the TTL to the expiry it finds, not to now: a lease renewed often runs
    /// further ahead with every renewal.
    RenewExtendsFromExpiry,
    /// Renewal sets the expiry to the TTL from now, even where that is earlier than it was:
    /// a renewal arriving after a release with a minimum hold cuts the hold short.
    RenewMovesExpiryBack,
    /// Prune deletes every free row, however recently it was freed.
    PruneIgnoresBound,
    /// Prune deletes the rows it should, and a name whose row went starts its fences over.
    PruneResetsFence,
    /// Prune deletes nothing (the default a wrapper store might answer).
    PruneDoesNothing,
    /// Prune deletes released rows only, and keeps the rows of leases that expired unreleased
    /// (here: takes them again for their holder first, out of its reach).
    PruneSkipsExpired,
    /// Acquire counts a lease free [`EARLY`] before its expiry: a tolerance for clock drift
    /// added the wrong way.
    AcquireEarly,
    /// TTLs and minimum holds are bound as 32-bit microseconds, which wrap at 71 minutes.
    TimesWrapAt32BitMicros,
    /// Renewals alone bind their TTL as 32-bit microseconds: a lease taken for two hours
    /// keeps them, and its renewals cut them to 48 minutes.
    RenewalsWrapAt32BitMicros,
    /// Acquire by the holder of a held lease answers `None`, and renews it on the way (an
    /// upsert whose update runs before its condition is checked).
    AcquireByHolderRenews,
    /// The takeover of an expired lease starts its fences over (a row replaced, not updated).
    TakeoverResetsFence,
    /// `renew_many` revives a lease that expired unreleased, where `renew` does not.
    RenewManyIgnoresExpiry,
    /// After a spell of more than [`IDLE`] without calls (a connection the server closed while
    /// idle, or one an outage broke), every call fails as a transient store error for
    /// [`RECOVERY`] while the store reconnects: an outage that ended lasts seconds longer for
    /// its callers.
    ConnectionRecoversLate,
    /// Acquire and renewal keep the lease for half the TTL they were given (a TTL bound at the
    /// wrong scale): the row expires while its guard, counting the whole TTL, still believes
    /// it holds the lease.
    TtlHalved,
    /// Release events open a stream that never yields: a wrapper store that subscribes to
    /// nothing, and waiters wait for their next poll.
    ReleaseEventsNeverYield,
    /// Acquire answers only after [`LATE`], within the schedules' store timeout: every round's
    /// acquisition overruns several periods, which the schedules count as missed, and hardly a
    /// round runs.
    AcquireAnswersLate,
}

/// How early [`Flaw::AcquireEarly`] counts a lease free.
const EARLY: Duration = Duration::from_millis(250);

/// How long the store of [`Flaw::ConnectionRecoversLate`] may go without calls before its
/// connection is gone.
const IDLE: Duration = Duration::from_millis(500);
/// How long the store of [`Flaw::ConnectionRecoversLate`] takes to reconnect.
const RECOVERY: Duration = Duration::from_secs(6);
/// How long the acquisitions of [`Flaw::AcquireAnswersLate`] take.
const LATE: Duration = Duration::from_millis(2500);

/// The connection of [`Flaw::ConnectionRecoversLate`]'s store.
#[derive(Debug, Clone, Copy)]
struct Connection {
    /// When the last call that went through was made.
    last_call: Instant,
    /// Until when calls fail, while the store reconnects.
    down_until: Option<Instant>,
}

/// `length` as 32-bit microseconds keep it: wrapped at 2^32 µs.
fn wrapped(length: Duration) -> Duration {
    Duration::from_micros(length.as_micros() as u64 % (1 << 32))
}

/// Gives way to the other futures on the task once, so callers that read together write
/// after each other, as concurrent statements would.
struct YieldNow(bool);

impl std::future::Future for YieldNow {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            std::task::Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }
}

/// A backend whose stores have `flaw`.
#[derive(Debug, Clone, Copy)]
pub struct BrokenBackend(pub Flaw);

#[async_trait]
impl TestBackend for BrokenBackend {
    type Store = BrokenStore;

    fn name(&self) -> &str {
        "broken-memory"
    }

    /// Pushed releases, like the memory store it wraps; what its flaw says it offers besides.
    fn offers(&self, capability: Capability) -> bool {
        match capability {
            Capability::PushedReleases => true,
            Capability::Pool => self.0 == Flaw::PoolNotForwarded,
            Capability::FencedWrites => self.0 == Flaw::FencedNotForwarded,
            Capability::Unreachable => matches!(
                self.0,
                Flaw::UnreachableGivesWrongError
                    | Flaw::UnreachableFailsPermanently
                    | Flaw::UnreachableNotForwarded
            ),
            Capability::TransientWhenUnreachable => self.0 == Flaw::UnreachableFailsPermanently,
            _ => false,
        }
    }

    async fn store(&self) -> Result<FreshStore<BrokenStore>, BoxError> {
        Ok(FreshStore::new(BrokenStore::new(self.0)))
    }

    async fn unreachable(&self) -> Result<Option<BrokenStore>, BoxError> {
        Ok(matches!(
            self.0,
            Flaw::UnreachableGivesWrongError | Flaw::UnreachableFailsPermanently
        )
        .then(|| BrokenStore::new(self.0)))
    }
}

pub struct BrokenStore {
    flaw: Flaw,
    inner: MemoryStore,
    /// One store per name, for [`Flaw::ReleaseResetsFence`] (a release replaces it) and
    /// [`Flaw::PruneResetsFence`] (a prune that deletes its row does).
    per_name: Mutex<HashMap<LeaseName, MemoryStore>>,
    /// The subscribers of [`Flaw::ReleasePushesUnfreed`], told of every release.
    pushed_to: Mutex<Vec<UnboundedSender<LeaseName>>>,
    /// Whether [`Flaw::AcquireIgnoresHolderOnce`] has taken a held lease.
    overwrote: AtomicBool,
    /// The connection of [`Flaw::ConnectionRecoversLate`].
    connection: Mutex<Connection>,
}

impl fmt::Debug for BrokenStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BrokenStore")
            .field("flaw", &self.flaw)
            .finish_non_exhaustive()
    }
}

impl BrokenStore {
    fn new(flaw: Flaw) -> Self {
        Self {
            flaw,
            inner: MemoryStore::new(),
            per_name: Mutex::new(HashMap::new()),
            pushed_to: Mutex::new(Vec::new()),
            overwrote: AtomicBool::new(false),
            connection: Mutex::new(Connection {
                last_call: Instant::now(),
                down_until: None,
            }),
        }
    }

    fn name(&self, name: &LeaseName) -> LeaseName {
        if self.flaw == Flaw::NamesFoldCase {
            LeaseName::new(name.as_str().trim().to_lowercase()).unwrap()
        } else {
            name.clone()
        }
    }

    /// The store that holds `name`.
    fn store(&self, name: &LeaseName) -> MemoryStore {
        if self.per_name_stores() {
            let mut stores = self.per_name.lock().unwrap();
            stores.entry(name.clone()).or_default().clone()
        } else {
            self.inner.clone()
        }
    }

    /// `ttl` as the store keeps it, for a renewal or an acquisition.
    fn ttl(&self, ttl: Ttl, renewal: bool) -> Ttl {
        let wraps = self.flaw == Flaw::TimesWrapAt32BitMicros
            || (renewal && self.flaw == Flaw::RenewalsWrapAt32BitMicros);
        if wraps {
            Ttl::new(wrapped(ttl.get())).unwrap_or(Ttl::MIN)
        } else if self.flaw == Flaw::TtlHalved {
            Ttl::new(ttl.get() / 2).unwrap_or(Ttl::MIN)
        } else {
            ttl
        }
    }

    fn per_name_stores(&self) -> bool {
        matches!(
            self.flaw,
            Flaw::ReleaseResetsFence | Flaw::PruneResetsFence | Flaw::TakeoverResetsFence
        )
    }

    /// The error of an unreachable store with this flaw, or of one whose connection is still
    /// recovering, for `operation` on `name`.
    fn connection_error(
        &self,
        operation: Operation,
        name: Option<&LeaseName>,
    ) -> Result<(), Error> {
        match self.flaw {
            Flaw::UnreachableGivesWrongError => Err(Error::InvalidConfig {
                reason: "not a store error".to_owned(),
            }),
            Flaw::UnreachableFailsPermanently => Err(Error::store_of_kind(
                operation,
                name,
                StoreErrorKind::Permanent,
                "connection refused",
            )),
            Flaw::ConnectionRecoversLate => self.recovering(operation, name),
            _ => Ok(()),
        }
    }

    /// For [`Flaw::ConnectionRecoversLate`]: fails the call while the store reconnects, which
    /// it starts on the first call after more than [`IDLE`] without one.
    fn recovering(&self, operation: Operation, name: Option<&LeaseName>) -> Result<(), Error> {
        let now = Instant::now();
        let mut connection = self.connection.lock().unwrap();
        let down = match connection.down_until {
            Some(until) => now < until,
            None => now.duration_since(connection.last_call) > IDLE,
        };
        if down {
            connection.down_until.get_or_insert(now + RECOVERY);
            return Err(Error::store(
                operation,
                name,
                "connection reset; reconnecting",
            ));
        }
        connection.down_until = None;
        connection.last_call = now;
        Ok(())
    }
}

#[async_trait]
impl LeaseStore for BrokenStore {
    async fn try_acquire(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<Option<Fence>, Error> {
        self.connection_error(Operation::Acquire, Some(name))?;
        if self.flaw == Flaw::AcquireAnswersLate {
            tokio::time::sleep(LATE).await;
        }
        let name = &self.name(name);
        let store = self.store(name);
        let current = store.inspect(name).await?;
        match (self.flaw, current) {
            (Flaw::AcquireIgnoresHolder, Some(info)) => {
                store.release(name, &info.holder, Duration::ZERO).await?;
            }
            (Flaw::AcquireIgnoresHolderOnce, Some(info))
                if !info.is_expired() && !self.overwrote.swap(true, Ordering::SeqCst) =>
            {
                store.release(name, &info.holder, Duration::ZERO).await?;
            }
            (Flaw::AcquireIgnoresExpiry, Some(_)) => return Ok(None),
            (Flaw::AcquireEarly, Some(info)) if !info.is_expired() && info.expires_in() < EARLY => {
                store.release(name, &info.holder, Duration::ZERO).await?;
            }
            (Flaw::TakeoverOverwrites, Some(info)) if info.is_expired() => {
                YieldNow(false).await;
                if let Some(now) = store.inspect(name).await? {
                    store.release(name, &now.holder, Duration::ZERO).await?;
                }
            }
            (Flaw::AcquireReentrant, Some(info))
                if info.holder == *holder && !info.is_expired() =>
            {
                store.renew(name, holder, ttl).await?;
                return Ok(Some(info.fence));
            }
            (Flaw::AcquireByHolderRenews, Some(info))
                if info.holder == *holder && !info.is_expired() =>
            {
                store.renew(name, holder, ttl).await?;
                return Ok(None);
            }
            (Flaw::TakeoverResetsFence, Some(info)) if info.is_expired() => {
                self.per_name.lock().unwrap().remove(name);
                return self
                    .store(name)
                    .try_acquire(name, holder, self.ttl(ttl, false))
                    .await;
            }
            _ => {}
        }
        let ttl = self.ttl(ttl, false);
        let fence = store.try_acquire(name, holder, ttl).await?;
        if self.flaw == Flaw::AcquireMisreportsFence {
            return Ok(fence.map(|fence| Fence::new(fence.get() + 1)));
        }
        Ok(fence)
    }

    async fn renew(&self, name: &LeaseName, holder: &HolderId, ttl: Ttl) -> Result<bool, Error> {
        self.connection_error(Operation::Renew, Some(name))?;
        let name = &self.name(name);
        let store = self.store(name);
        let info = store.inspect(name).await?;
        match (self.flaw, info) {
            (Flaw::RenewIgnoresExpiry, Some(info))
                if info.holder == *holder && info.is_expired() =>
            {
                Ok(store.try_acquire(name, holder, ttl).await?.is_some())
            }
            (Flaw::RenewIgnoresHolder, Some(info)) => store.renew(name, &info.holder, ttl).await,
            (Flaw::RenewLeavesExpiry, Some(info)) => {
                Ok(info.holder == *holder && !info.is_expired())
            }
            // The TTL from now plus what was left: the old expiry plus the TTL.
            (Flaw::RenewExtendsFromExpiry, Some(info))
                if info.holder == *holder && !info.is_expired() =>
            {
                let left = info
                    .expires_at
                    .duration_since(info.observed_at)
                    .unwrap_or_default();
                store.renew(name, holder, Ttl::new(ttl.get() + left)?).await
            }
            // The row is taken anew for the same holder, so its expiry is the TTL from now.
            (Flaw::RenewMovesExpiryBack, Some(info))
                if info.holder == *holder && !info.is_expired() =>
            {
                store.release(name, holder, Duration::ZERO).await?;
                Ok(store.try_acquire(name, holder, ttl).await?.is_some())
            }
            _ => store.renew(name, holder, self.ttl(ttl, true)).await,
        }
    }

    async fn renew_many(
        &self,
        leases: &[(LeaseName, HolderId)],
        ttl: Ttl,
    ) -> Result<Vec<bool>, Error> {
        let mut renewed = Vec::with_capacity(leases.len());
        for (name, holder) in leases {
            if self.flaw == Flaw::RenewManyIgnoresExpiry {
                let name = &self.name(name);
                let store = self.store(name);
                if let Some(info) = store.inspect(name).await?
                    && info.holder == *holder
                    && info.is_expired()
                {
                    renewed.push(store.try_acquire(name, holder, ttl).await?.is_some());
                    continue;
                }
            }
            let done = self.renew(name, holder, ttl).await?;
            renewed.push(done || self.flaw == Flaw::RenewManyReportsAllRenewed);
        }
        Ok(renewed)
    }

    async fn release(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        min_hold: Duration,
    ) -> Result<bool, Error> {
        self.connection_error(Operation::Release, Some(name))?;
        if self.flaw == Flaw::ReleaseKeepsLease {
            return Ok(true);
        }
        if self.flaw == Flaw::ReleasePushesUnfreed {
            self.pushed_to
                .lock()
                .unwrap()
                .retain(|subscriber| subscriber.unbounded_send(name.clone()).is_ok());
        }
        let name = &self.name(name);
        let store = self.store(name);
        let holder = match (self.flaw, store.inspect(name).await?) {
            (Flaw::ReleaseIgnoresHolder, Some(info)) => info.holder,
            _ => holder.clone(),
        };
        let min_hold = match self.flaw {
            Flaw::ReleaseIgnoresMinHold => Duration::ZERO,
            Flaw::ReleaseRoundsMinHoldDown => Duration::from_millis(
                u64::try_from(min_hold.as_millis()).expect("a test's hold fits in u64"),
            ),
            Flaw::TimesWrapAt32BitMicros => wrapped(min_hold),
            _ => min_hold,
        };
        let released = store.release(name, &holder, min_hold).await?;
        if released && self.flaw == Flaw::ReleaseResetsFence {
            self.per_name.lock().unwrap().remove(name);
        }
        Ok(released)
    }

    async fn inspect(&self, name: &LeaseName) -> Result<Option<LeaseInfo>, Error> {
        self.connection_error(Operation::Inspect, Some(name))?;
        let name = &self.name(name);
        self.store(name).inspect(name).await
    }

    async fn list(&self) -> Result<Vec<LeaseInfo>, Error> {
        self.connection_error(Operation::List, None)?;
        let mut listed = if self.per_name_stores() {
            let stores: Vec<MemoryStore> =
                self.per_name.lock().unwrap().values().cloned().collect();
            let mut listed = Vec::new();
            for store in stores {
                listed.extend(store.list().await?);
            }
            listed.sort_by(|a, b| a.name.cmp(&b.name));
            listed
        } else {
            self.inner.list().await?
        };
        if self.flaw == Flaw::ListHidesExpired {
            listed.retain(|info| !info.is_expired());
        }
        if self.flaw == Flaw::ListInCollationOrder {
            listed.sort_by_key(|info| info.name.as_str().to_lowercase());
        }
        Ok(listed)
    }

    async fn prune(&self, released_for: Duration) -> Result<u64, Error> {
        self.connection_error(Operation::Prune, None)?;
        match self.flaw {
            Flaw::PruneIgnoresBound => self.inner.prune(Duration::ZERO).await,
            Flaw::PruneDoesNothing => Ok(0),
            Flaw::PruneSkipsExpired => {
                for info in self.inner.list().await? {
                    if info.is_expired() {
                        self.inner
                            .try_acquire(&info.name, &info.holder, Ttl::from_secs(60)?)
                            .await?;
                    }
                }
                self.inner.prune(released_for).await
            }
            _ if self.per_name_stores() => {
                let stores: Vec<(LeaseName, MemoryStore)> = self
                    .per_name
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|(name, store)| (name.clone(), store.clone()))
                    .collect();
                let mut pruned = 0;
                for (name, store) in stores {
                    let deleted = store.prune(released_for).await?;
                    if deleted > 0 && self.flaw == Flaw::PruneResetsFence {
                        self.per_name.lock().unwrap().remove(&name);
                    }
                    pruned += deleted;
                }
                Ok(pruned)
            }
            _ => self.inner.prune(released_for).await,
        }
    }

    async fn release_events(&self) -> Result<Option<ReleaseEvents>, Error> {
        if self.flaw == Flaw::ReleaseEventsNotForwarded {
            return Ok(None);
        }
        if self.flaw == Flaw::ReleaseEventsNeverYield {
            return Ok(Some(futures::stream::pending().boxed()));
        }
        if self.flaw == Flaw::ReleasePushesUnfreed {
            let (subscriber, events) = futures::channel::mpsc::unbounded();
            self.pushed_to.lock().unwrap().push(subscriber);
            return Ok(Some(events.boxed()));
        }
        self.inner.release_events().await
    }
}
