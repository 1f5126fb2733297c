//! What an operator sees, through the store: the client's statistics count what the store
//! answered, and its health turns unhealthy while renewals fail, before the lease is lost.

use std::sync::Arc;
use std::time::Duration;

use lease_core::{LeaseClient, LeaseStore};

use super::severable::{Link, Severable};
use super::{client_of, name};
use crate::failure::{ensure, ensure_eq};
use crate::{CaseFailure, CaseResult, Context, TestBackend, Verdict};

/// The renewal period.
const PERIOD: Duration = Duration::from_millis(300);
/// How long one store call may take: room for a fresh connection's first statement.
const STORE_TIMEOUT: Duration = Duration::from_secs(1);
/// Room for scheduling and a statement's round trip on a busy machine.
const SLACK: Duration = Duration::from_millis(1500);

fn client<S: LeaseStore, B: TestBackend>(
    store: S,
    ctx: &Context<B>,
) -> Result<LeaseClient, CaseFailure> {
    client_of(ctx, store, Duration::from_secs(10), PERIOD, STORE_TIMEOUT)
}

/// A client takes `sweep` and another skips it: `stats()` counts one win and one skip, and
/// after a few periods renewals; `health()` is healthy. With the link cut (every call
/// refused), the client turns unhealthy within a period, a store timeout and some slack, while its guard still holds the lease; once the link is back it is healthy
/// again, and the failed renewals were counted.
///
/// # Errors
/// A [`CaseFailure`] when the client's counts disagree with what the store answered, it reports
/// itself unhealthy while renewals succeed, it does not turn unhealthy in the outage before its
/// guard loses the lease or healthy again once the outage ends, or it does not count the refused
/// renewals or the release, and, [as any case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped while the link is cut, the
/// guard's release is refused like every call, and `sweep` lapses after the client's TTL of ten
/// seconds; dropped otherwise, the guard is released in the background.
pub async fn stats_and_health_follow_the_store<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let store = ctx.store().await?;
    let severable = Arc::new(Severable::new(Arc::clone(&store)));
    let (holder, other) = (
        client(Arc::clone(&severable), ctx)?,
        client(Arc::clone(&store), ctx)?,
    );
    let lease = name("sweep");
    let guard = holder
        .try_acquire(&lease)
        .await?
        .ok_or_else(|| CaseFailure::new(format!("a fresh store refused {lease}")))?;
    ensure!(
        other.try_acquire(&lease).await?.is_none(),
        "a second client took the held {lease}"
    );
    ctx.sleep(PERIOD * 4).await;
    let stats = holder.stats();
    ensure_eq!(
        (stats.held, stats.acquired, stats.skipped),
        (1, 1, 0),
        "(held, acquired, skipped) of the holder: {stats:?}"
    );
    ensure_eq!(other.stats().skipped, 1, "skips of the other client");
    ensure!(
        stats.renewals >= 2,
        "renewals of the holder after four periods: {stats:?}"
    );
    let failed_before = stats.renewals_failed;
    ensure!(
        holder.health().is_healthy(),
        "the holder is unhealthy while renewals succeed (the control): {:?}",
        holder.health()
    );

    severable.set(Link::Refusing);
    let unhealthy = ctx
        .within(PERIOD + STORE_TIMEOUT + SLACK, async {
            while holder.health().is_healthy() {
                ctx.sleep(PERIOD / 6).await;
            }
        })
        .await;
    ensure!(
        unhealthy.is_some(),
        "the holder still reports healthy {:?} into an outage: {:?}",
        PERIOD + STORE_TIMEOUT + SLACK,
        holder.health()
    );
    ensure!(
        guard.is_held(),
        "the guard lost {lease} before the client turned unhealthy"
    );
    severable.set(Link::Up);
    let healthy = ctx
        .within(PERIOD + SLACK, async {
            while !holder.health().is_healthy() {
                ctx.sleep(PERIOD / 6).await;
            }
        })
        .await;
    ensure!(
        healthy.is_some(),
        "the holder did not turn healthy once the store answered: {:?}",
        holder.health()
    );
    ensure!(
        holder.stats().renewals_failed > failed_before,
        "the refused renewals were not counted: {:?}",
        holder.stats()
    );
    guard.release().await?;
    ensure_eq!(holder.stats().released, 1, "releases of the holder");
    Ok(Verdict::Passed)
}
