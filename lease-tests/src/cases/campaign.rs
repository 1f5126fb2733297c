//! Campaigns through the store: one leader at a time, a resignation hands leadership over, and
//! what a `Leader` says agrees with the store.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use lease_core::{Leader, LeaseClient, LeaseName, LeaseStore};

use super::{client_of, name};
use crate::failure::{ensure, ensure_eq};
use crate::{CaseFailure, CaseResult, Context, TestBackend, Verdict};

/// How long one store call may take before the client counts it failed.
const STORE_TIMEOUT: Duration = Duration::from_secs(3);
/// How often a campaign that does not lead tries again (its clients' renewal period).
const RETRY: Duration = Duration::from_millis(300);
/// How long a campaign may take to lead once nobody holds the lease.
const LEAD_LIMIT: Duration = Duration::from_secs(5);

fn client<S: LeaseStore, B: TestBackend>(
    store: S,
    ctx: &Context<B>,
) -> Result<LeaseClient, CaseFailure> {
    client_of(ctx, store, Duration::from_secs(10), RETRY, STORE_TIMEOUT)
}

/// Waits until `leader` leads, for at most `limit`: whether it does.
async fn leads<B: TestBackend>(ctx: &Context<B>, leader: &Leader, limit: Duration) -> bool {
    let mut changes = leader.changes();
    ctx.within(limit, async {
        while let Some(leading) = changes.next().await {
            if leading {
                return;
            }
        }
        futures::future::pending::<()>().await;
    })
    .await
    .is_some()
}

/// `fence()` and `is_leader()` of a leading campaign against what `inspect` reports.
async fn agrees_with_the_store<S: LeaseStore + ?Sized>(
    store: &S,
    leader: &Leader,
    lease: &LeaseName,
    who: &str,
) -> Result<lease_core::Fence, CaseFailure> {
    let info = store.inspect(lease).await?.ok_or_else(|| {
        CaseFailure::new(format!("inspect({lease}) reported nothing while {who} led"))
    })?;
    ensure!(leader.is_leader(), "{who} stopped leading {lease}");
    ensure_eq!(
        leader.fence(),
        Some(info.fence),
        "fence() of {who} against inspect({lease}) ({info:?})"
    );
    ensure!(
        !info.is_expired(),
        "{lease} is expired while {who} leads: {info:?}"
    );
    Ok(info.fence)
}

/// A campaign on a free lease leads, and its `fence()` is the one `inspect` reports; a second
/// campaign on the same lease, through another client, does not lead meanwhile. When the first
/// resigns, the second leads within a few retries, with a higher fence that again agrees with
/// `inspect`, and the first says it no longer leads. When the second resigns, the lease is
/// released.
///
/// # Errors
/// A [`CaseFailure`] when a campaign does not lead within five seconds of the lease being free, the
/// second leads while the first does, a leader's fence disagrees with `inspect` or the second
/// term's is not above the first's, a campaign still says it leads after resigning, or the lease is
/// still held once both resigned, and, [as any case](crate::cases#errors), when a call it needs
/// fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, its two `Leader`s go with
/// it, so each campaign ends and gives the lease back, as a dropped [`Leader`] does; a resignation
/// already under way completes all the same.
pub async fn campaign_takes_over_when_the_leader_resigns<B: TestBackend>(
    ctx: &Context<B>,
) -> CaseResult {
    let store = ctx.store().await?;
    let lease = name("alerts");
    let (first_client, second_client) = (
        client(Arc::clone(&store), ctx)?,
        client(Arc::clone(&store), ctx)?,
    );

    let first = first_client.campaign(lease.clone())?;
    ensure!(
        leads(ctx, &first, LEAD_LIMIT).await,
        "the first campaign on the free {lease} did not lead within {LEAD_LIMIT:?}"
    );
    let first_fence = agrees_with_the_store(&*store, &first, &lease, "the first campaign").await?;

    let second = second_client.campaign(lease.clone())?;
    ensure!(
        !leads(ctx, &second, RETRY * 3).await,
        "a second campaign led {lease} while the first still did"
    );
    ensure!(
        !second.is_leader(),
        "the second campaign says it leads {lease}"
    );
    ensure_eq!(
        second.fence(),
        None,
        "fence() of the campaign that does not lead"
    );
    agrees_with_the_store(&*store, &first, &lease, "the first campaign").await?;

    let first_view = first.clone();
    first.resign().await;
    ensure!(
        !first_view.is_leader() && first_view.fence().is_none(),
        "the first campaign still says it leads {lease} after resigning"
    );
    ensure!(
        leads(ctx, &second, LEAD_LIMIT).await,
        "the second campaign did not lead {lease} within {LEAD_LIMIT:?} of the first resigning"
    );
    let second_fence =
        agrees_with_the_store(&*store, &second, &lease, "the second campaign").await?;
    ensure!(
        second_fence > first_fence,
        "the second term's fence {second_fence} is not above the first's {first_fence}"
    );

    let second_view = second.clone();
    second.resign().await;
    ensure!(
        !second_view.is_leader(),
        "the second campaign still says it leads {lease} after resigning"
    );
    ensure_eq!(
        store.inspect(&lease).await?,
        None,
        "inspect({lease}) after every campaign resigned"
    );
    Ok(Verdict::Passed)
}
