//! [`TimedStore`]: the client's store, every call bounded by the store timeout.

use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use crate::clock::Clock;
use crate::stats::{CallOutcome, Stats, operation_label};
use crate::{
    Error, Fence, HolderId, LeaseInfo, LeaseName, LeaseStore, Operation, ReleaseEvents, Ttl,
};

/// The store with the clock and the store timeout: each call that fails to answer in time
/// counts as failed, with [`TimedOut`] as its source. Every call runs in a `lease.store` span
/// and is timed into the client's [`Stats`]. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct TimedStore {
    store: Arc<dyn LeaseStore>,
    clock: Clock,
    timeout: Duration,
    stats: Arc<Stats>,
}

impl TimedStore {
    pub(crate) fn new(
        store: Arc<dyn LeaseStore>,
        clock: Clock,
        timeout: Duration,
        stats: Arc<Stats>,
    ) -> Self {
        Self {
            store,
            clock,
            timeout,
            stats,
        }
    }

    /// The client's counters.
    pub(crate) fn stats(&self) -> &Arc<Stats> {
        &self.stats
    }

    /// How long one call may take.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
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
            1,
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
            leases.len(),
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
        let released = self
            .call(
                Operation::Release,
                Some(name),
                1,
                self.store.release(name, holder, min_hold),
            )
            .await;
        if let Ok(true) = released {
            self.stats.released(name);
        }
        released
    }

    /// [`LeaseStore::inspect`], bounded.
    pub(crate) async fn inspect(&self, name: &LeaseName) -> Result<Option<LeaseInfo>, Error> {
        self.call(Operation::Inspect, Some(name), 1, self.store.inspect(name))
            .await
    }

    /// [`LeaseStore::release_events`], bounded: opening the subscription answers within the
    /// store timeout or counts as failed (the client's waiters then poll). The events that
    /// follow are not bounded: the stream stays open while the client lives.
    pub(crate) async fn release_events(&self) -> Result<Option<ReleaseEvents>, Error> {
        self.call(Operation::Subscribe, None, 0, self.store.release_events())
            .await
    }

    /// One store call of `operation` on `name` (or on `leases` leases), bounded by the store
    /// timeout, in a span and timed.
    async fn call<T>(
        &self,
        operation: Operation,
        name: Option<&LeaseName>,
        leases: usize,
        call: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        let span = tracing::debug_span!(
            "lease.store",
            lease.operation = operation_label(operation),
            lease.name = name.map(LeaseName::as_str),
            lease.leases = leases,
            lease.store = self.stats.store_label(),
            lease.outcome = tracing::field::Empty,
        );
        let started = self.clock.now();
        let answer = self
            .clock
            .timeout(self.timeout, call.instrument(span.clone()))
            .await;
        let took = Duration::from_nanos(self.clock.now().saturating_sub(started));
        let (outcome, answer) = match answer {
            Some(Ok(answer)) => (CallOutcome::Ok, Ok(answer)),
            Some(Err(error)) => (CallOutcome::Error, Err(error)),
            None => (
                CallOutcome::Timeout,
                Err(Error::store(operation, name, TimedOut(self.timeout))),
            ),
        };
        span.record("lease.outcome", outcome.as_str());
        self.stats.call(operation, took, outcome);
        answer
    }
}

/// Whether `error` is a call that did not answer within the store timeout.
pub(crate) fn is_timeout(error: &Error) -> bool {
    std::error::Error::source(error).is_some_and(|source| source.is::<TimedOut>())
}

/// A store call that did not answer in time.
#[derive(Debug, thiserror::Error)]
#[error("no answer within {0:?}")]
pub(crate) struct TimedOut(Duration);
