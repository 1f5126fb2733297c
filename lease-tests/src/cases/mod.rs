//! The conformance cases: one `pub async fn` per rule, each taking a [`Context`] and answering
//! a [`CaseResult`](crate::CaseResult). [`conformance_suite!`](crate::conformance_suite) turns each into a test.
//!
//! Time-based cases use TTLs of a fraction of a second to a second, and wait on the store's own
//! clock (through [`LeaseInfo::is_expired`]) rather than on this machine's, so they hold on a
//! busy machine and against a database whose clock is not this one's. They assert outcomes and
//! order, never tight timings.
//!
//! # Errors
//!
//! A case answers `Ok` with its [`Verdict`](crate::Verdict): `Passed`, or `NotApplicable` when
//! the backend lacks what the case needs (a pool, a fenced check, a store that can be
//! unreachable). It answers a [`CaseFailure`] when the store broke the rule the case checks,
//! naming what was expected and what happened, and also when a call the case needs fails: the
//! backend cannot make its store, a store call answers an error where the rule wants an answer,
//! or a lease the case waits on is not reported expired by the store's clock within ten seconds.
//!
//! # Cancel safety
//!
//! No case is cancel safe, and none needs to be: [`run_case`](crate::run::run_case) awaits a case
//! to its end, and only then runs the [teardown](Context::teardown) of the stores it made; only a
//! case still running after [`CASE_LIMIT`](crate::run::CASE_LIMIT) (five minutes, a wait that
//! never ends) is dropped, and fails. A case whose future is dropped stops at the await it was
//! in, with no verdict, and leaves what it had made as it is:
//!
//! - The stores it made through its [`Context`] stay registered there, and are removed only if
//!   that context's teardown still runs: dropping `run_case`'s future drops the context without
//!   it, and leaves them behind.
//! - Leases it took straight through the store are renewed by nobody: each lapses after the TTL
//!   it was last taken or renewed with.
//! - Its clients go with it. Each guard releases its lease in the background, as a dropped
//!   [`LeaseGuard`](lease_core::LeaseGuard) does where the runtime can spawn (a guard that had
//!   seen its loss sends no release); a client's renewal task ends once the client and its
//!   guards are gone; a dropped [`Leader`](lease_core::Leader) ends its campaign and gives its
//!   lease back; a dropped [`Scheduled`](lease_core::Scheduled) stops its schedule.
//! - A client's acquisition cut off before the store answered may have taken the lease for a
//!   holder nobody renews, as [`LeaseClient::try_acquire`] says: it lapses after the client's TTL.
//! - A fenced write cut off before its commit commits nothing: its transaction is dropped with
//!   it, and the driver rolls it back or closes its connection.
//! - No task the case spawned itself runs on, except the racing contenders of
//!   [`one_holder_among_contenders`].
//!
//! Each case's own section says what it leaves.

mod batch;
mod batch_seams;
mod byte_order;
mod campaign;
mod exclusion;
mod expiry;
mod fence;
mod fenced;
mod grant_witness;
mod guard;
mod input;
mod listing;
mod longest;
mod observed;
mod outage;
mod pool;
mod prune;
mod pushed;
mod reentry;
mod release_count;
mod ride_out;
mod schedule;
pub(crate) mod severable;
mod shutdown;
mod stale;
mod takeover;
mod waiting;

use std::future::Future;
use std::time::Duration;

use futures::channel::oneshot;
use lease_core::{Fence, HolderId, LeaseClient, LeaseInfo, LeaseName, LeaseStore, Runtime, Ttl};

pub use batch::renew_many_reports_exactly_the_lost;
pub use batch_seams::renew_many_across_batches_duplicates_and_losses;
pub use byte_order::names_are_byte_exact_and_listed_in_byte_order;
pub use campaign::campaign_takes_over_when_the_leader_resigns;
pub use exclusion::one_holder_among_contenders;
pub use expiry::{
    expired_lease_cannot_be_renewed, expired_lease_is_taken_over,
    late_renewal_keeps_the_minimum_hold, no_takeover_before_the_expiry,
    release_with_min_hold_keeps_the_lease, renewed_lease_is_never_taken_over,
};
pub use fence::fences_strictly_increase;
pub use fenced::{
    expired_lease_fails_fenced_check, fenced_work_spans_a_renewal, fenced_write_commits_while_held,
    freed_lease_fails_fenced_check, renewal_goes_on_during_fenced_work,
    stale_fenced_write_commits_nothing, takeover_during_fenced_work_commits_nothing,
    takeover_waits_for_fenced_transaction,
};
pub use guard::{
    guard_loses_lease_when_store_hangs, guard_loses_lease_when_store_refuses,
    lost_signal_after_takeover,
};
pub use input::names_round_trip_verbatim;
pub use listing::inspect_and_list_agree;
pub use longest::longest_ttls_and_holds_are_kept_whole;
pub use observed::stats_and_health_follow_the_store;
pub use outage::unreachable_store_returns_errors;
pub use pool::no_connection_held;
pub use prune::prune_deletes_only_rows_free_longer_than_the_bound;
pub use pushed::{
    listening_takes_no_connection_of_the_pool, releases_are_pushed_only_when_they_free_the_lease,
};
pub use reentry::holder_cannot_take_its_own_lease_twice;
pub use release_count::fences_keep_counting_across_releases;
pub use ride_out::acquire_rides_out_a_store_outage;
pub use schedule::{
    schedule_on_leader_runs_each_round_on_the_leader, schedule_runs_each_round_on_one_instance,
};
pub use shutdown::shutdown_hands_every_lease_over;
pub use stale::stale_holder_touches_nothing;
pub use takeover::one_winner_on_every_takeover;
pub use waiting::{acquire_waits_for_the_release, release_wakes_a_waiter};

use crate::failure::ensure;
use crate::{CaseFailure, Context, TestBackend};

/// A TTL that runs out within a case: long enough to act on, short enough to wait for.
const SHORT_TTL: Duration = Duration::from_millis(300);
/// A TTL that does not run out within a case.
const LONG_TTL: Duration = Duration::from_secs(60);
/// How long a short lease may take to be reported expired by the store's own clock before the
/// case gives up: generous, for a busy machine and a store whose clock runs slow.
const EXPIRY_WAIT: Duration = Duration::from_secs(10);

fn short_ttl() -> Ttl {
    Ttl::new(SHORT_TTL).expect("a valid TTL")
}

fn long_ttl() -> Ttl {
    Ttl::new(LONG_TTL).expect("a valid TTL")
}

/// Takes the free lease `name` for `holder` with a long TTL, and answers its fence.
async fn acquire<S: LeaseStore + ?Sized>(
    store: &S,
    name: &LeaseName,
    holder: &HolderId,
) -> Result<Fence, CaseFailure> {
    store
        .try_acquire(name, holder, long_ttl())
        .await?
        .ok_or_else(|| CaseFailure::new(format!("{name} was refused although nobody held it")))
}

/// A client of `store` on the case's runtime: leases of `ttl`, renewed every `renew_every`, each
/// store call bounded by `store_timeout`.
fn client_of<S: LeaseStore, B: TestBackend>(
    ctx: &Context<B>,
    store: S,
    ttl: Duration,
    renew_every: Duration,
    store_timeout: Duration,
) -> Result<LeaseClient, CaseFailure> {
    Ok(LeaseClient::builder(store, ctx.runtime().clone())
        .ttl(Ttl::new(ttl)?)
        .renew_every(renew_every)
        .store_timeout(store_timeout)
        .build()?)
}

fn name(text: &str) -> LeaseName {
    LeaseName::new(text).expect("a valid lease name")
}

/// Waits until the store itself reports `name` expired, so the case does not depend on this
/// machine's clock agreeing with the store's. Returns what the store reported.
async fn wait_until_expired<B: TestBackend, S: LeaseStore + ?Sized>(
    ctx: &Context<B>,
    store: &S,
    name: &LeaseName,
) -> Result<LeaseInfo, CaseFailure> {
    let started = ctx.runtime().now();
    loop {
        let info = store.inspect(name).await?;
        let Some(info) = info else {
            return Err(CaseFailure::new(format!(
                "inspect({name}) reported nothing while waiting for the lease to expire: a taken, \
                 unreleased lease must be reported until somebody takes it over"
            )));
        };
        if info.is_expired() {
            return Ok(info);
        }
        ensure!(
            ctx.runtime().now().duration_since(started) < EXPIRY_WAIT,
            "lease {name} with a TTL of {SHORT_TTL:?} was still not expired after {EXPIRY_WAIT:?}: {info:?}"
        );
        ctx.sleep(SHORT_TTL / 3).await;
    }
}

/// Runs every future at once, spawned on the case's runtime where it can spawn (so a
/// multi-threaded runtime really runs them in parallel), and returns their outputs in order.
async fn concurrently<B, F>(
    ctx: &Context<B>,
    futures: Vec<F>,
) -> Result<Vec<F::Output>, CaseFailure>
where
    B: TestBackend,
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let mut receivers = Vec::with_capacity(futures.len());
    let mut unspawned = Vec::new();
    for future in futures {
        let (sender, receiver) = oneshot::channel();
        let task = Box::pin(async move {
            // The receiver only goes away when the case has already failed.
            let _ = sender.send(future.await);
        });
        if let Err(task) = ctx.runtime().spawn(task) {
            unspawned.push(task);
        }
        receivers.push(receiver);
    }
    futures::future::join_all(unspawned).await;
    let mut outputs = Vec::with_capacity(receivers.len());
    for receiver in receivers {
        outputs.push(
            receiver
                .await
                .map_err(|_| CaseFailure::new("a concurrent task panicked"))?,
        );
    }
    Ok(outputs)
}
