//! A store wrapper for tests: counts every call, and fails or hangs on command.

#![allow(dead_code)]

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;

use futures::future::BoxFuture;
use lease_core::{
    Error, Fence, HolderId, LeaseClient, LeaseClientBuilder, LeaseInfo, LeaseName, LeaseStore,
    MemoryStore, Operation, ReleaseEvents, Runtime, StoreErrorKind, Ttl, async_trait,
    runtime::TokioRuntime,
};

/// What the wrapped store does with each call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Mode {
    Pass = 0,
    Fail = 1,
    Hang = 2,
    /// Fails every call with a permanent error, as a revoked permission does.
    Refuse = 3,
}

#[derive(Debug)]
pub struct Faulty {
    pub inner: MemoryStore,
    mode: AtomicU8,
    /// Milliseconds every renewal waits before it reaches the store.
    renew_delay: std::sync::atomic::AtomicU64,
    /// Milliseconds every acquisition waits before it reaches the store.
    acquire_delay: std::sync::atomic::AtomicU64,
    /// Milliseconds every acquisition's answer waits after the store ran it.
    answer_delay: std::sync::atomic::AtomicU64,
    /// Milliseconds every release waits before it reaches the store.
    release_delay: std::sync::atomic::AtomicU64,
    /// Milliseconds opening the release events takes; `u64::MAX` (the default) forwards none.
    subscribe_delay: std::sync::atomic::AtomicU64,
    /// Release events that end as soon as they are opened: a listening connection cut at once.
    events_end_at_once: std::sync::atomic::AtomicBool,
    /// How often the release events were opened.
    pub subscribes: AtomicUsize,
    /// How many of the release events opened are still open (not dropped).
    pub live_subscriptions: Arc<AtomicUsize>,
    pub acquires: AtomicUsize,
    pub renews: AtomicUsize,
    pub renew_manys: AtomicUsize,
    pub renewed_leases: AtomicUsize,
    pub releases: AtomicUsize,
    /// Releases still to fail, as a connection that broke does, before they reach the store.
    failing_releases: AtomicUsize,
    /// Releases still to run in the store and then fail, as a connection that broke while the
    /// answer was on its way does.
    unanswered_releases: AtomicUsize,
    /// Acquisitions still to run in the store and then fail with their answer lost
    /// (`OutcomeUnknown`).
    unanswered_acquires: AtomicUsize,
    /// Leases whose rows another transaction keeps locked: every renewal that carries one waits
    /// for ever, the other leases of its statement with it.
    locked_rows: std::sync::Mutex<Vec<LeaseName>>,
}

impl Faulty {
    pub fn new(inner: MemoryStore) -> Arc<Self> {
        Arc::new(Self {
            inner,
            mode: AtomicU8::new(Mode::Pass as u8),
            renew_delay: std::sync::atomic::AtomicU64::new(0),
            acquire_delay: std::sync::atomic::AtomicU64::new(0),
            answer_delay: std::sync::atomic::AtomicU64::new(0),
            release_delay: std::sync::atomic::AtomicU64::new(0),
            subscribe_delay: std::sync::atomic::AtomicU64::new(u64::MAX),
            events_end_at_once: std::sync::atomic::AtomicBool::new(false),
            subscribes: AtomicUsize::new(0),
            live_subscriptions: Arc::default(),
            acquires: AtomicUsize::new(0),
            renews: AtomicUsize::new(0),
            renew_manys: AtomicUsize::new(0),
            renewed_leases: AtomicUsize::new(0),
            releases: AtomicUsize::new(0),
            failing_releases: AtomicUsize::new(0),
            unanswered_releases: AtomicUsize::new(0),
            unanswered_acquires: AtomicUsize::new(0),
            locked_rows: std::sync::Mutex::default(),
        })
    }

    /// Keeps the row of `name` locked, as a transaction left open on it does: every renewal
    /// statement that carries `name` waits for ever (until its store timeout cuts it).
    pub fn lock_row(&self, name: &str) {
        self.locked_rows
            .lock()
            .unwrap()
            .push(LeaseName::new(name).unwrap());
    }

    /// Fails the next `count` releases with a transient error, before they reach the store.
    pub fn fail_next_releases(&self, count: usize) {
        self.failing_releases.store(count, Ordering::SeqCst);
    }

    /// Runs the next `count` releases in the store, then fails them, their answers lost.
    pub fn lose_release_answers(&self, count: usize) {
        self.unanswered_releases.store(count, Ordering::SeqCst);
    }

    /// Runs the next `count` acquisitions in the store, then fails them as `OutcomeUnknown`.
    pub fn lose_acquire_answers(&self, count: usize) {
        self.unanswered_acquires.store(count, Ordering::SeqCst);
    }

    pub fn set(&self, mode: Mode) {
        self.mode.store(mode as u8, Ordering::SeqCst);
    }

    /// Waits until the renewer sends its next `renew_many` (counted as it is sent, before any
    /// delay or lock holds it up), at most 5 s; fails the test, saying `what`, otherwise.
    pub async fn next_renewal_sent(&self, what: &str) {
        let sent = self.renew_manys.load(Ordering::SeqCst);
        tokio::time::timeout(Duration::from_secs(5), async {
            while self.renew_manys.load(Ordering::SeqCst) == sent {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{what}"));
    }

    pub fn delay_renewals(&self, delay: Duration) {
        self.renew_delay
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    pub fn delay_acquires(&self, delay: Duration) {
        self.acquire_delay
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// Delays every acquisition's answer after the store ran it: a slow network on the way back.
    pub fn delay_acquire_answers(&self, delay: Duration) {
        self.answer_delay
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    pub fn delay_releases(&self, delay: Duration) {
        self.release_delay
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// Forwards the memory store's release events, opening them only after `delay`: a
    /// subscription that takes a while to connect. Without this, the wrapper pushes no releases.
    pub fn push_releases_after(&self, delay: Duration) {
        self.subscribe_delay
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// Opens release events that end at once, every time: a listening connection cut as soon
    /// as it is made. After 1,000 openings it answers that it has none, so that a client that
    /// opens them in a loop ends up polling instead of spinning for ever.
    pub fn end_release_events_at_once(&self) {
        self.events_end_at_once.store(true, Ordering::SeqCst);
    }

    pub fn calls(&self) -> usize {
        [
            &self.acquires,
            &self.renews,
            &self.renew_manys,
            &self.releases,
        ]
        .iter()
        .map(|c| c.load(Ordering::SeqCst))
        .sum()
    }

    async fn gate(&self, operation: Operation) -> Result<(), Error> {
        match self.mode.load(Ordering::SeqCst) {
            0 => Ok(()),
            1 => Err(Error::store(operation, None, "injected failure")),
            3 => Err(Error::store_of_kind(
                operation,
                None,
                StoreErrorKind::Permanent,
                "permission denied",
            )),
            _ => futures::future::pending().await,
        }
    }
}

#[async_trait]
impl LeaseStore for Faulty {
    async fn try_acquire(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<Option<Fence>, Error> {
        self.acquires.fetch_add(1, Ordering::SeqCst);
        self.gate(Operation::Acquire).await?;
        let delay = self.acquire_delay.load(Ordering::SeqCst);
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        let answer = self.inner.try_acquire(name, holder, ttl).await;
        let unanswered =
            self.unanswered_acquires
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if unanswered.is_ok() {
            return Err(Error::store_of_kind(
                Operation::Acquire,
                Some(name),
                StoreErrorKind::OutcomeUnknown,
                "injected loss of the acquisition's answer",
            ));
        }
        let delay = self.answer_delay.load(Ordering::SeqCst);
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        answer
    }

    async fn renew(&self, name: &LeaseName, holder: &HolderId, ttl: Ttl) -> Result<bool, Error> {
        self.renews.fetch_add(1, Ordering::SeqCst);
        self.gate(Operation::Renew).await?;
        self.inner.renew(name, holder, ttl).await
    }

    async fn renew_many(
        &self,
        leases: &[(LeaseName, HolderId)],
        ttl: Ttl,
    ) -> Result<Vec<bool>, Error> {
        self.renew_manys.fetch_add(1, Ordering::SeqCst);
        self.renewed_leases
            .fetch_add(leases.len(), Ordering::SeqCst);
        self.gate(Operation::RenewMany).await?;
        let locked = self.locked_rows.lock().unwrap().clone();
        if leases.iter().any(|(name, _)| locked.contains(name)) {
            futures::future::pending::<()>().await;
        }
        let delay = self.renew_delay.load(Ordering::SeqCst);
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        let mut renewed = Vec::with_capacity(leases.len());
        for (name, holder) in leases {
            renewed.push(self.inner.renew(name, holder, ttl).await?);
        }
        Ok(renewed)
    }

    async fn release(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        min_hold: Duration,
    ) -> Result<bool, Error> {
        self.releases.fetch_add(1, Ordering::SeqCst);
        self.gate(Operation::Release).await?;
        let failing = self
            .failing_releases
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if failing.is_ok() {
            return Err(Error::store(
                Operation::Release,
                Some(name),
                "injected release failure",
            ));
        }
        let delay = self.release_delay.load(Ordering::SeqCst);
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        let released = self.inner.release(name, holder, min_hold).await;
        let unanswered =
            self.unanswered_releases
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if unanswered.is_ok() {
            return Err(Error::store(
                Operation::Release,
                Some(name),
                "injected loss of the release's answer",
            ));
        }
        released
    }

    async fn inspect(&self, name: &LeaseName) -> Result<Option<LeaseInfo>, Error> {
        self.gate(Operation::Inspect).await?;
        self.inner.inspect(name).await
    }

    async fn list(&self) -> Result<Vec<LeaseInfo>, Error> {
        self.gate(Operation::List).await?;
        self.inner.list().await
    }

    async fn prune(&self, released_for: Duration) -> Result<u64, Error> {
        self.gate(Operation::Prune).await?;
        self.inner.prune(released_for).await
    }

    async fn release_events(&self) -> Result<Option<ReleaseEvents>, Error> {
        let opened = self.subscribes.fetch_add(1, Ordering::SeqCst) + 1;
        if self.events_end_at_once.load(Ordering::SeqCst) {
            if opened > 1_000 {
                return Ok(None);
            }
            return Ok(Some(Box::pin(futures::stream::empty())));
        }
        let delay = self.subscribe_delay.load(Ordering::SeqCst);
        if delay == u64::MAX {
            return Ok(None);
        }
        self.gate(Operation::Subscribe).await?;
        tokio::time::sleep(Duration::from_millis(delay)).await;
        let events = self.inner.release_events().await?;
        Ok(events.map(|events| counted(events, &self.live_subscriptions)))
    }
}

/// `events`, counted in `live` until dropped.
fn counted(events: ReleaseEvents, live: &Arc<AtomicUsize>) -> ReleaseEvents {
    /// Counts one open subscription until dropped.
    struct Open(Arc<AtomicUsize>);
    impl Drop for Open {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }
    live.fetch_add(1, Ordering::SeqCst);
    let open = Open(Arc::clone(live));
    Box::pin(futures::StreamExt::map(events, move |name| {
        let _ = &open;
        name
    }))
}

/// A memory store on tokio's clock, so a paused test clock expires its leases too.
pub fn tokio_memory() -> MemoryStore {
    MemoryStore::with_clock(|| tokio::time::Instant::now().into_std())
}

/// A client with a 1 s TTL renewed every 250 ms, a 100 ms margin: local deadline 900 ms.
pub fn fast_client(store: impl LeaseStore) -> LeaseClient {
    renewing_quickly(store, Ttl::from_millis(1_000).unwrap())
        .build()
        .unwrap()
}

/// A client builder with `ttl` renewed every 250 ms, with a 100 ms safety margin: what the
/// clients below share.
fn renewing_quickly(store: impl LeaseStore, ttl: Ttl) -> LeaseClientBuilder {
    LeaseClient::builder(store, TokioRuntime)
        .ttl(ttl)
        .renew_every(Duration::from_millis(250))
        .safety_margin(Duration::from_millis(100))
}

/// [`fast_client`]'s settings with a store timeout of `store_timeout`: one longer than the
/// local validity (900 ms) lets an answer arrive past the lease's local deadline.
pub fn fast_client_timing_out_after(
    store: impl LeaseStore,
    store_timeout: Duration,
) -> LeaseClient {
    renewing_quickly(store, Ttl::from_millis(1_000).unwrap())
        .store_timeout(store_timeout)
        .build()
        .unwrap()
}

/// A client with a 3 s TTL renewed every 250 ms (a 100 ms margin) and `store_timeout`: a lease
/// left to lapse stays taken for seconds after its last renewal, well past the blocked steps of
/// the tests that use it, however late a loaded machine runs them.
pub fn lapsing_client(store: impl LeaseStore, store_timeout: Duration) -> LeaseClient {
    renewing_quickly(store, Ttl::from_secs(3).unwrap())
        .store_timeout(store_timeout)
        .build()
        .unwrap()
}

/// Whether `next` took `name` before `ended()` turned true: tries every 2 ms (giving the lease
/// back at once each time it takes it), and panics if it never took it within 10 s.
pub async fn taken_before(next: &LeaseClient, name: &str, ended: impl Fn() -> bool) -> bool {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(guard) = next.try_acquire(name).await.unwrap() {
                let ended = ended();
                guard.release().await.unwrap();
                return !ended;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await
    .expect("the next instance never took the lease")
}

/// [`fast_client`]'s settings, with the store labelled `billing`: for the tests of what a
/// client reports.
pub fn billing_client(store: impl LeaseStore) -> LeaseClient {
    renewing_quickly(store, Ttl::from_millis(1_000).unwrap())
        .store_label("billing")
        .build()
        .unwrap()
}

/// A runtime on this thread with tokio's clock paused, for tests that install a subscriber or
/// a recorder on the thread.
pub fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

pub fn name(text: &str) -> LeaseName {
    LeaseName::new(text).unwrap()
}

/// A runtime on tokio's clock that can be stopped: a process stopped for a while (a paused VM,
/// SIGSTOP, a runtime thread blocked) sees its clock move on at once when it resumes, and every
/// timer that fell due meanwhile has fired by its next poll. Spawns on tokio.
#[derive(Debug, Clone, Default)]
pub struct Stoppable(Arc<AtomicU64>);

impl Stoppable {
    /// The process was stopped for `duration`, and resumes now.
    pub fn stopped_for(&self, duration: Duration) {
        self.0
            .fetch_add(duration.as_nanos() as u64, Ordering::SeqCst);
    }
}

impl Runtime for Stoppable {
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        let (runtime, until) = (self.clone(), self.now() + duration);
        let mut timer = Box::pin(tokio::time::sleep(duration));
        Box::pin(futures::future::poll_fn(move |cx| {
            if runtime.now() >= until {
                Poll::Ready(())
            } else {
                timer.as_mut().poll(cx)
            }
        }))
    }

    fn now(&self) -> std::time::Instant {
        tokio::time::Instant::now().into_std() + Duration::from_nanos(self.0.load(Ordering::SeqCst))
    }

    fn spawn(&self, task: BoxFuture<'static, ()>) -> Result<(), BoxFuture<'static, ()>> {
        tokio::spawn(task);
        Ok(())
    }
}

/// A runtime on tokio's clock that can sleep but not spawn, like a bare executor: whatever
/// the client would spawn (its renewer, release subscriptions) runs only where a caller's
/// future drives it.
#[derive(Debug)]
pub struct NoSpawn;

impl Runtime for NoSpawn {
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(duration))
    }

    fn now(&self) -> std::time::Instant {
        tokio::time::Instant::now().into_std()
    }
}
