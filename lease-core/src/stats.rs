//! [`ClientStats`]: what a client has done since it was built, and the counters behind it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::{FencedCheck, LeaseLabel, LeaseName, LossReason, Operation};

/// What a [`LeaseClient`](crate::LeaseClient) has done since it was built; from
/// [`LeaseClient::stats`](crate::LeaseClient::stats). Counters only grow.
///
/// With the `metrics` feature the same counts are emitted through the `metrics` facade as they
/// happen; see the crate docs for the names and labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ClientStats {
    /// Leases held right now.
    pub held: usize,
    /// Acquisitions won: the store gave this client the lease.
    pub acquired: u64,
    /// Acquisitions skipped: somebody else held the lease.
    pub skipped: u64,
    /// Acquisitions that failed: the store failed or did not answer in time.
    pub acquire_failed: u64,
    /// Lease renewals sent (one per lease per round, however many a `renew_many` call carries),
    /// counted as they are answered. One that succeeded or was refused after its lease was lost
    /// meanwhile (its deadline passed, or it was found gone), or given back, counts nothing
    /// here: the loss is counted once, under [`losses`](ClientStats::losses). One that failed
    /// counts, under [`renewals_failed`](ClientStats::renewals_failed), also past the deadline.
    pub renewals: u64,
    /// Lease renewals whose call failed or timed out: the lease stays held until its deadline
    /// and is renewed again soon.
    pub renewals_failed: u64,
    /// Lease renewals that succeeded with less than the safety margin to spare: the answer came
    /// less than [`LeaseConfig::safety_margin`](crate::LeaseConfig::safety_margin) before the
    /// lease's local deadline. A sign that renewals fail or the store is slow.
    pub renewals_late: u64,
    /// Leases given back (a release the store answered `true`, minimum holds included): also
    /// those a shutdown released by force (counted under [`losses`](ClientStats::losses) as
    /// well) and those an acquisition that failed without an answer had taken (counted under
    /// [`acquire_failed`](ClientStats::acquire_failed), not [`acquired`](ClientStats::acquired)).
    pub released: u64,
    /// Leases lost, by how.
    pub losses: Losses,
    /// [`LeaseStore::try_acquire`](crate::LeaseStore::try_acquire) calls.
    pub acquire_calls: CallStats,
    /// [`LeaseStore::renew_many`](crate::LeaseStore::renew_many) calls.
    pub renew_calls: CallStats,
    /// [`LeaseStore::release`](crate::LeaseStore::release) calls.
    pub release_calls: CallStats,
    /// [`LeaseStore::release_events`](crate::LeaseStore::release_events) calls: the client's
    /// subscription to releases, opened by its first wait in
    /// [`acquire`](crate::LeaseClient::acquire) and again after the stream ends. An error here
    /// means the client's waiters poll.
    pub subscribe_calls: CallStats,
    /// Fenced checks of this client's leases, by how they ended (the SQL stores' fenced
    /// transactions; see [`FencedCheck`]).
    pub fenced_checks: FencedChecks,
}

/// Leases lost, by [`LossReason`].
///
/// A campaign that gives its leadership back tells its term's lease
/// ([`Leader::lease`](crate::Leader::lease)) so, with [`LossReason::Resigned`] or, at the
/// client's shutdown, [`LossReason::ShutDown`]; that is counted as a release
/// ([`ClientStats::released`]), not here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Losses {
    /// [`LossReason::Rejected`]: a renewal the store refused.
    pub rejected: u64,
    /// [`LossReason::DeadlinePassed`]: no renewal succeeded before the local deadline.
    pub deadline_passed: u64,
    /// [`LossReason::NotHeld`]: a fenced check found the lease gone.
    pub not_held: u64,
    /// [`LossReason::ShutDown`]: the client's shutdown gave back a guard its owner had not
    /// released within the grace period.
    pub shut_down: u64,
}

impl Losses {
    /// Every loss, whatever its reason.
    pub fn total(&self) -> u64 {
        self.rejected + self.deadline_passed + self.not_held + self.shut_down
    }
}

/// Fenced checks of a client's leases, by [`FencedCheck`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct FencedChecks {
    /// [`FencedCheck::Passed`]: the lease was held; the transaction could commit.
    pub passed: u64,
    /// [`FencedCheck::NotHeld`]: the lease was gone; nothing of the transaction committed.
    pub not_held: u64,
    /// [`FencedCheck::Failed`]: the check's statement failed.
    pub failed: u64,
    /// [`FencedCheck::Unknown`]: the answer to the check and the commit was lost; the
    /// transaction may have committed.
    pub unknown: u64,
}

impl FencedChecks {
    /// Every check, however it ended.
    pub fn total(&self) -> u64 {
        self.passed + self.not_held + self.failed + self.unknown
    }
}

/// The calls of one store operation, as the client timed them (the store timeout included).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct CallStats {
    /// Calls made.
    pub calls: u64,
    /// Calls that failed or did not answer within the store timeout.
    pub errors: u64,
    /// The time all calls took together.
    pub total: Duration,
    /// The longest call.
    pub max: Duration,
}

impl CallStats {
    /// The mean time of a call; `None` before the first.
    pub fn mean(&self) -> Option<Duration> {
        // In nanoseconds, exact for any count: the mean is at most the total, a `Duration`.
        let nanos = self.total.as_nanos().checked_div(u128::from(self.calls))?;
        let secs = u64::try_from(nanos / 1_000_000_000).ok()?;
        let subsec = u32::try_from(nanos % 1_000_000_000).ok()?;
        Some(Duration::new(secs, subsec))
    }
}

/// How a store call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallOutcome {
    Ok,
    Error,
    Timeout,
}

impl CallOutcome {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Error => "error",
            Self::Timeout => "timeout",
        }
    }
}

/// The label of an operation in metrics and spans: `acquire`, `renew_many`, `release`, ...
pub(crate) fn operation_label(operation: Operation) -> &'static str {
    match operation {
        Operation::Acquire => "acquire",
        Operation::Renew => "renew",
        Operation::RenewMany => "renew_many",
        Operation::Release => "release",
        Operation::Inspect => "inspect",
        Operation::List => "list",
        Operation::Setup => "setup",
        Operation::Subscribe => "subscribe",
        Operation::Fence => "fence",
        Operation::Prune => "prune",
    }
}

/// How an acquisition ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Acquired {
    Won,
    Skipped,
    Failed,
}

/// How one lease's renewal ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Renewed {
    /// Renewed, with at least the safety margin to spare.
    InTime,
    /// Renewed with less than the safety margin to spare.
    Late,
    /// The call failed or timed out.
    Failed,
    /// The store refused it: the lease is lost.
    Rejected,
}

#[derive(Debug, Default)]
struct Calls {
    calls: AtomicU64,
    errors: AtomicU64,
    total_nanos: AtomicU64,
    max_nanos: AtomicU64,
}

impl Calls {
    fn record(&self, took: Duration, outcome: CallOutcome) {
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.calls.fetch_add(1, Ordering::Relaxed);
        if outcome != CallOutcome::Ok {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        self.total_nanos.fetch_add(nanos, Ordering::Relaxed);
        self.max_nanos.fetch_max(nanos, Ordering::Relaxed);
    }

    fn snapshot(&self) -> CallStats {
        CallStats {
            calls: self.calls.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            total: Duration::from_nanos(self.total_nanos.load(Ordering::Relaxed)),
            max: Duration::from_nanos(self.max_nanos.load(Ordering::Relaxed)),
        }
    }
}

/// The counters of one client, shared by its store, renewer and leases; every count is also
/// emitted as a metric with the `metrics` feature.
#[derive(Debug)]
pub(crate) struct Stats {
    /// The `store` label of every metric.
    store: Arc<str>,
    /// What the `lease` label of a metric carries (read only to emit metrics).
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    lease_label: LeaseLabel,
    acquired: AtomicU64,
    skipped: AtomicU64,
    acquire_failed: AtomicU64,
    renewals: AtomicU64,
    renewals_failed: AtomicU64,
    renewals_late: AtomicU64,
    released: AtomicU64,
    rejected: AtomicU64,
    deadline_passed: AtomicU64,
    not_held: AtomicU64,
    shut_down: AtomicU64,
    fenced_passed: AtomicU64,
    fenced_not_held: AtomicU64,
    fenced_failed: AtomicU64,
    fenced_unknown: AtomicU64,
    acquire_calls: Calls,
    renew_calls: Calls,
    release_calls: Calls,
    subscribe_calls: Calls,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Stats {
    pub(crate) fn new(store: impl Into<Arc<str>>, lease_label: LeaseLabel) -> Self {
        Self {
            store: store.into(),
            lease_label,
            acquired: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            acquire_failed: AtomicU64::new(0),
            renewals: AtomicU64::new(0),
            renewals_failed: AtomicU64::new(0),
            renewals_late: AtomicU64::new(0),
            released: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            deadline_passed: AtomicU64::new(0),
            not_held: AtomicU64::new(0),
            shut_down: AtomicU64::new(0),
            fenced_passed: AtomicU64::new(0),
            fenced_not_held: AtomicU64::new(0),
            fenced_failed: AtomicU64::new(0),
            fenced_unknown: AtomicU64::new(0),
            acquire_calls: Calls::default(),
            renew_calls: Calls::default(),
            release_calls: Calls::default(),
            subscribe_calls: Calls::default(),
        }
    }

    /// The `store` label of every metric and span.
    pub(crate) fn store_label(&self) -> &str {
        &self.store
    }

    /// A store call of `operation` that took `took`.
    pub(crate) fn call(&self, operation: Operation, took: Duration, outcome: CallOutcome) {
        let calls = match operation {
            Operation::Acquire => &self.acquire_calls,
            Operation::RenewMany | Operation::Renew => &self.renew_calls,
            Operation::Release => &self.release_calls,
            Operation::Subscribe => &self.subscribe_calls,
            _ => return,
        };
        calls.record(took, outcome);
        #[cfg(feature = "metrics")]
        crate::metrics::call(&self.store, operation, took, outcome);
    }

    /// An acquisition of `name`.
    pub(crate) fn acquired(&self, name: &LeaseName, acquired: Acquired) {
        bump(match acquired {
            Acquired::Won => &self.acquired,
            Acquired::Skipped => &self.skipped,
            Acquired::Failed => &self.acquire_failed,
        });
        #[cfg(feature = "metrics")]
        crate::metrics::acquired(&self.store, self.lease_label.of(name), acquired);
        let _ = name;
    }

    /// One lease's renewal.
    pub(crate) fn renewed(&self, name: &LeaseName, renewed: Renewed) {
        bump(&self.renewals);
        match renewed {
            Renewed::InTime | Renewed::Rejected => {}
            Renewed::Late => bump(&self.renewals_late),
            Renewed::Failed => bump(&self.renewals_failed),
        }
        #[cfg(feature = "metrics")]
        crate::metrics::renewed(&self.store, self.lease_label.of(name), renewed);
        let _ = name;
    }

    /// A lease given back.
    pub(crate) fn released(&self, name: &LeaseName) {
        bump(&self.released);
        #[cfg(feature = "metrics")]
        crate::metrics::released(&self.store, self.lease_label.of(name));
        let _ = name;
    }

    /// A lease lost.
    pub(crate) fn lost(&self, name: &LeaseName, reason: LossReason) {
        bump(match reason {
            LossReason::Rejected => &self.rejected,
            LossReason::DeadlinePassed => &self.deadline_passed,
            LossReason::NotHeld => &self.not_held,
            LossReason::ShutDown => &self.shut_down,
            // Only ever told by a campaign that gives its leadership back: counted as released.
            LossReason::Resigned => return,
        });
        #[cfg(feature = "metrics")]
        crate::metrics::lost(&self.store, self.lease_label.of(name), reason);
        let _ = name;
    }

    /// A fenced check of `name`.
    pub(crate) fn fenced_check(&self, name: &LeaseName, check: FencedCheck) {
        bump(match check {
            FencedCheck::Passed => &self.fenced_passed,
            FencedCheck::NotHeld => &self.fenced_not_held,
            FencedCheck::Failed => &self.fenced_failed,
            FencedCheck::Unknown => &self.fenced_unknown,
        });
        #[cfg(feature = "metrics")]
        crate::metrics::fenced_check(&self.store, self.lease_label.of(name), check);
        let _ = name;
    }

    /// One more holding of `name` by this client (taken), or one fewer (given back or lost).
    pub(crate) fn holding(&self, name: &LeaseName, holding: bool) {
        #[cfg(feature = "metrics")]
        crate::metrics::holding(&self.store, self.lease_label.of(name), holding);
        let _ = (name, holding);
    }

    /// The counts so far, with `held` leases held now.
    pub(crate) fn snapshot(&self, held: usize) -> ClientStats {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        ClientStats {
            held,
            acquired: load(&self.acquired),
            skipped: load(&self.skipped),
            acquire_failed: load(&self.acquire_failed),
            renewals: load(&self.renewals),
            renewals_failed: load(&self.renewals_failed),
            renewals_late: load(&self.renewals_late),
            released: load(&self.released),
            losses: Losses {
                rejected: load(&self.rejected),
                deadline_passed: load(&self.deadline_passed),
                not_held: load(&self.not_held),
                shut_down: load(&self.shut_down),
            },
            acquire_calls: self.acquire_calls.snapshot(),
            renew_calls: self.renew_calls.snapshot(),
            release_calls: self.release_calls.snapshot(),
            subscribe_calls: self.subscribe_calls.snapshot(),
            fenced_checks: FencedChecks {
                passed: load(&self.fenced_passed),
                not_held: load(&self.fenced_not_held),
                failed: load(&self.fenced_failed),
                unknown: load(&self.fenced_unknown),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mean_holds_past_four_billion_calls() {
        let calls = CallStats {
            calls: 1 << 32,
            total: Duration::from_secs(1 << 32),
            ..CallStats::default()
        };
        assert_eq!(calls.mean(), Some(Duration::from_secs(1)));
        let calls = CallStats {
            calls: 3,
            total: Duration::from_nanos(10),
            ..CallStats::default()
        };
        assert_eq!(calls.mean(), Some(Duration::from_nanos(3)));
        assert_eq!(CallStats::default().mean(), None);
    }
}
