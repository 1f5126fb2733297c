//! [`CountingStore`]: a store that passes every call on and watches the renewals: how many
//! calls each round makes, how long it takes, and the longest wait of any lease between two of
//! its renewals.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use lease_core::{Error, Fence, HolderId, LeaseInfo, LeaseName, LeaseStore, ReleaseEvents, Ttl};

/// One `renew_many` call.
#[derive(Debug, Clone, Copy)]
pub struct Call {
    /// When it was sent.
    pub start: Instant,
    /// When it answered.
    pub end: Instant,
    /// How many leases it carried.
    pub leases: usize,
}

/// Wraps a store whose leases are named `<prefix><index>`, index below a known count.
pub struct CountingStore {
    inner: Arc<dyn LeaseStore>,
    prefix: String,
    origin: Instant,
    /// Per lease: nanoseconds after `origin` at which its last acquisition or renewal was sent,
    /// plus one (zero: never). Allocated up front so watching costs no memory per call.
    last: Vec<AtomicU64>,
    worst_gap: AtomicU64,
    calls: Mutex<Vec<Call>>,
}

impl std::fmt::Debug for CountingStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountingStore")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl CountingStore {
    /// Watches `inner`, whose leases are `prefix0` to `prefix{count - 1}`.
    pub fn new(inner: Arc<dyn LeaseStore>, prefix: &str, count: usize) -> Self {
        Self {
            inner,
            prefix: prefix.to_owned(),
            origin: Instant::now(),
            last: (0..count).map(|_| AtomicU64::new(0)).collect(),
            worst_gap: AtomicU64::new(0),
            calls: Mutex::new(Vec::new()),
        }
    }

    fn index(&self, name: &LeaseName) -> Option<usize> {
        let index: usize = name.as_str().strip_prefix(&self.prefix)?.parse().ok()?;
        (index < self.last.len()).then_some(index)
    }

    fn stamp(&self, at: Instant) -> u64 {
        u64::try_from(at.duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX) + 1
    }

    /// Notes that `name` was acquired or renewed by a call sent at `at`.
    fn touched(&self, name: &LeaseName, at: Instant) {
        let Some(index) = self.index(name) else {
            return;
        };
        let now = self.stamp(at);
        let previous = self.last[index].swap(now, Ordering::Relaxed);
        if previous != 0 {
            self.worst_gap
                .fetch_max(now.saturating_sub(previous), Ordering::Relaxed);
        }
    }

    /// The longest time any lease waited between two of its renewals (or its acquisition and
    /// its first renewal), counted from when each call was sent, or since its last renewal
    /// until `now`: a lease the renewer stopped renewing counts for as long as it has waited,
    /// though no renewal ends its wait.
    pub fn worst_gap_until(&self, now: Instant) -> Duration {
        let now = self.stamp(now);
        let waiting = self
            .last
            .iter()
            .map(|last| last.load(Ordering::Relaxed))
            .filter(|&last| last != 0)
            .map(|last| now.saturating_sub(last))
            .max()
            .unwrap_or(0);
        Duration::from_nanos(self.worst_gap.load(Ordering::Relaxed).max(waiting))
    }

    /// The `renew_many` calls sent since `since`.
    pub fn calls_since(&self, since: Instant) -> Vec<Call> {
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter(|call| call.start >= since)
            .copied()
            .collect()
    }
}

/// When the last call of `round` to end ended: not always the last to start, as the renewer
/// sends later batches while a held-up one still runs.
///
/// # Panics
/// When `round` is empty, which [`rounds`] never makes.
pub fn round_end(round: &[Call]) -> Instant {
    round
        .iter()
        .map(|call| call.end)
        .max()
        .expect("a round has a call")
}

/// Groups `calls` into rounds: a call that starts less than `pause` after every earlier call
/// of the round ended belongs to it.
pub fn rounds(mut calls: Vec<Call>, pause: Duration) -> Vec<Vec<Call>> {
    calls.sort_by_key(|call| call.start);
    let mut rounds: Vec<Vec<Call>> = Vec::new();
    for call in calls {
        match rounds.last_mut() {
            Some(round) if call.start.saturating_duration_since(round_end(round)) < pause => {
                round.push(call);
            }
            _ => rounds.push(vec![call]),
        }
    }
    rounds
}

#[async_trait]
impl LeaseStore for CountingStore {
    async fn try_acquire(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<Option<Fence>, Error> {
        let sent = Instant::now();
        let fence = self.inner.try_acquire(name, holder, ttl).await?;
        if fence.is_some() {
            self.touched(name, sent);
        }
        Ok(fence)
    }

    async fn renew(&self, name: &LeaseName, holder: &HolderId, ttl: Ttl) -> Result<bool, Error> {
        self.inner.renew(name, holder, ttl).await
    }

    async fn renew_many(
        &self,
        leases: &[(LeaseName, HolderId)],
        ttl: Ttl,
    ) -> Result<Vec<bool>, Error> {
        let start = Instant::now();
        let renewed = self.inner.renew_many(leases, ttl).await?;
        let end = Instant::now();
        for ((name, _), renewed) in leases.iter().zip(&renewed) {
            if *renewed {
                self.touched(name, start);
            }
        }
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Call {
                start,
                end,
                leases: leases.len(),
            });
        Ok(renewed)
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

    async fn release_events(&self) -> Result<Option<ReleaseEvents>, Error> {
        self.inner.release_events().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lease_core::MemoryStore;

    #[tokio::test]
    async fn tracks_the_longest_wait_between_renewals() {
        let store = CountingStore::new(Arc::new(MemoryStore::new()), "n", 2);
        let ttl = Ttl::from_secs(60).unwrap();
        let (a, b) = (LeaseName::new("n0").unwrap(), LeaseName::new("n1").unwrap());
        let (ha, hb) = (HolderId::generate(), HolderId::generate());
        assert!(store.try_acquire(&a, &ha, ttl).await.unwrap().is_some());
        assert!(store.try_acquire(&b, &hb, ttl).await.unwrap().is_some());
        tokio::time::sleep(Duration::from_millis(30)).await;
        let leases = vec![(a.clone(), ha), (b, HolderId::generate())];
        assert_eq!(store.renew_many(&leases, ttl).await.unwrap(), [true, false]);
        assert!(store.worst_gap_until(Instant::now()) >= Duration::from_millis(30));
        assert_eq!(store.calls_since(store.origin).len(), 1);
    }

    #[tokio::test]
    async fn a_lease_no_longer_renewed_counts_until_now() {
        let store = CountingStore::new(Arc::new(MemoryStore::new()), "n", 2);
        let ttl = Ttl::from_secs(60).unwrap();
        let (a, b) = (LeaseName::new("n0").unwrap(), LeaseName::new("n1").unwrap());
        let (ha, hb) = (HolderId::generate(), HolderId::generate());
        assert!(store.try_acquire(&a, &ha, ttl).await.unwrap().is_some());
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(store.try_acquire(&b, &hb, ttl).await.unwrap().is_some());
        assert_eq!(store.renew_many(&[(b, hb)], ttl).await.unwrap(), [true]);
        // `n1` was renewed at once; `n0`, never renewed, has waited 50 ms and more.
        assert!(store.worst_gap_until(Instant::now()) >= Duration::from_millis(50));
    }

    #[test]
    fn calls_close_together_make_one_round() {
        let t = Instant::now();
        let call = |start_ms: u64, end_ms: u64| Call {
            start: t + Duration::from_millis(start_ms),
            end: t + Duration::from_millis(end_ms),
            leases: 1,
        };
        let grouped = rounds(
            vec![call(0, 5), call(6, 9), call(500, 510), call(10, 12)],
            Duration::from_millis(100),
        );
        assert_eq!(grouped.iter().map(Vec::len).collect::<Vec<_>>(), [3, 1]);
    }

    /// A held-up batch that ends after the later ones: the round lasts until it ends, and a
    /// call that starts while it still runs belongs to the round.
    #[test]
    fn a_round_ends_with_its_slowest_call() {
        let t = Instant::now();
        let call = |start_ms: u64, end_ms: u64| Call {
            start: t + Duration::from_millis(start_ms),
            end: t + Duration::from_millis(end_ms),
            leases: 1,
        };
        let grouped = rounds(
            vec![
                call(0, 8_000),
                call(10, 20),
                call(30, 40),
                call(7_950, 7_960),
            ],
            Duration::from_millis(100),
        );
        assert_eq!(grouped.iter().map(Vec::len).collect::<Vec<_>>(), [4]);
        assert_eq!(
            round_end(&grouped[0]) - grouped[0][0].start,
            Duration::from_secs(8)
        );
    }
}
