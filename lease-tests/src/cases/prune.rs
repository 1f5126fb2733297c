//! Pruning deletes the rows of leases free for longer than its bound, and only those; fences
//! keep increasing for a name whose row it deleted.

use std::time::Duration;

use lease_core::{HolderId, LeaseName, LeaseStore, Runtime};

use super::{acquire, name, short_ttl, wait_until_expired};
use crate::failure::ensure;
use crate::{CaseFailure, CaseResult, Context, TestBackend, Verdict};

/// The prune's bound: rows free for longer go, rows freed since stay.
const BOUND: Duration = Duration::from_millis(400);
/// How long the case waits, by the store's clock, for the old row to be free for twice the
/// bound before it gives up.
const WAIT_LIMIT: Duration = Duration::from_secs(10);

/// A lease released more than the bound ago is deleted; one released just now, and one held,
/// are not (the prune answers exactly one row, then none); the held lease is still held by its
/// holder; and the pruned name, acquired again, gets a fence above every fence it had. Then a
/// lease never released but expired more than the bound ago is deleted too, the held one kept,
/// and its name's fence goes on rising. (A prune
/// this machine sends later than the bound after the recent release tells nothing of the bound:
/// it is played again on `recent-report-2`, then `recent-report-3`.)
///
/// # Errors
/// A [`CaseFailure`] when a prune deletes other than the one row free for longer than its bound, a
/// second prune deletes anything, the held lease changes, a fence does not rise for a name acquired
/// again, or the store's clock does not move on 800 ms within ten seconds, and, [as any
/// case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, `sweeper`, and any lease
/// it had taken and not yet released, stays held until its TTL of a minute runs out; a prune cut
/// off deleted its rows entirely or not at all.
pub async fn prune_deletes_only_rows_free_longer_than_the_bound<B: TestBackend>(
    ctx: &Context<B>,
) -> CaseResult {
    let store = ctx.store().await?;
    let (old, held) = (name("old-report"), name("sweeper"));

    let first = HolderId::generate();
    let old_fence = acquire(&*store, &old, &first).await?;
    release(&*store, &old, &first).await?;
    let holder = HolderId::generate();
    acquire(&*store, &held, &holder).await?;
    let released_at = observed_at(&*store, &held).await?;

    // Wait on the store's own clock (read from the held lease) until the old row has been free
    // for twice the bound.
    twice_the_bound_after(ctx, &*store, &held, released_at).await?;

    // On a loaded machine the prune may come more than the bound after the release: then the
    // recent row has been free longer than the bound too, and may go with the old one, which
    // tells nothing of the bound. Such a round is played again on another recent name, at most
    // twice (the old row gone, the prune must then delete nothing).
    let mut attempt = 1;
    let mut old_gone = false;
    let (recent, recent_fence, releasing) = loop {
        let recent = match attempt {
            1 => name("recent-report"),
            _ => name(&format!("recent-report-{attempt}")),
        };
        let second = HolderId::generate();
        let recent_fence = acquire(&*store, &recent, &second).await?;
        let releasing = ctx.runtime().now();
        release(&*store, &recent, &second).await?;
        let pruned = store.prune(BOUND).await?;
        let expected = u64::from(!old_gone);
        if pruned == expected {
            break (recent, recent_fence, releasing);
        }
        let late = ctx.runtime().now().duration_since(releasing) >= BOUND;
        if late && pruned == expected + 1 && attempt < 3 {
            old_gone = true;
            attempt += 1;
            continue;
        }
        return Err(CaseFailure::new(format!(
            "rows pruned with a bound of {BOUND:?}: {pruned}, where only {expected} may go ({old}, \
             free for more than {:?}, if not pruned yet; {recent} was freed {:?} before the prune \
             and {held} is held)",
            BOUND * 2,
            ctx.runtime().now().duration_since(releasing)
        )));
    };
    // The recent row, which the prune kept, may have aged past the bound by now too.
    let again_pruned = store.prune(BOUND).await?;
    let recent_may_go_now = ctx.runtime().now().duration_since(releasing) >= BOUND;
    ensure!(
        again_pruned == 0 || (recent_may_go_now && again_pruned == 1),
        "rows pruned by a second prune with the same bound: {again_pruned}"
    );
    let info = store.inspect(&held).await?;
    ensure!(
        info.as_ref().is_some_and(|info| info.holder == holder),
        "the held {held} after the prune: {info:?}"
    );

    let again = acquire(&*store, &old, &HolderId::generate()).await?;
    ensure!(
        again > old_fence,
        "{old} acquired again after its row was pruned got fence {again}, not above its earlier \
         {old_fence}: fences must keep increasing across a prune"
    );
    let recent_again = acquire(&*store, &recent, &HolderId::generate()).await?;
    ensure!(
        recent_again > recent_fence,
        "{recent} acquired again got fence {recent_again}, not above its earlier {recent_fence}"
    );

    // A lease whose holder stopped renewing without releasing it (a crash) is free once it
    // expired: pruned as a released row is, once expired for longer than the bound.
    let lapsed = name("lapsed-report");
    let lapsed_fence = store
        .try_acquire(&lapsed, &HolderId::generate(), short_ttl())
        .await?
        .ok_or_else(|| CaseFailure::new(format!("the free {lapsed} was not acquired")))?;
    let expired = wait_until_expired(ctx, &*store, &lapsed).await?;
    twice_the_bound_after(ctx, &*store, &held, expired.expires_at).await?;
    store.prune(BOUND).await?;
    let left = store.inspect(&lapsed).await?;
    ensure!(
        left.is_none(),
        "{lapsed}, expired more than {:?} before a prune with a bound of {BOUND:?}, was kept: \
         {left:?}",
        BOUND * 2
    );
    let info = store.inspect(&held).await?;
    ensure!(
        info.as_ref().is_some_and(|info| info.holder == holder),
        "the held {held} after the prune of expired rows: {info:?}"
    );
    let lapsed_again = acquire(&*store, &lapsed, &HolderId::generate()).await?;
    ensure!(
        lapsed_again > lapsed_fence,
        "{lapsed} acquired again after its expired row was pruned got fence {lapsed_again}, not \
         above its earlier {lapsed_fence}"
    );
    Ok(Verdict::Passed)
}

async fn release<S: LeaseStore + ?Sized>(
    store: &S,
    name: &LeaseName,
    holder: &HolderId,
) -> Result<(), CaseFailure> {
    ensure!(
        store.release(name, holder, Duration::ZERO).await?,
        "releasing {name} matched nothing"
    );
    Ok(())
}

/// Waits until the store's clock (read with the held lease `held`) is more than twice the
/// bound past `since`.
async fn twice_the_bound_after<B: TestBackend, S: LeaseStore + ?Sized>(
    ctx: &Context<B>,
    store: &S,
    held: &LeaseName,
    since: std::time::SystemTime,
) -> Result<(), CaseFailure> {
    let started = ctx.runtime().now();
    while observed_at(store, held)
        .await?
        .duration_since(since)
        .unwrap_or_default()
        <= BOUND * 2
    {
        ensure!(
            ctx.runtime().now().duration_since(started) < WAIT_LIMIT,
            "the store's clock did not move {:?} in {WAIT_LIMIT:?}",
            BOUND * 2
        );
        ctx.sleep(BOUND / 4).await;
    }
    Ok(())
}

/// The store's clock, as it reports it with the held lease `name`.
async fn observed_at<S: LeaseStore + ?Sized>(
    store: &S,
    name: &LeaseName,
) -> Result<std::time::SystemTime, CaseFailure> {
    store
        .inspect(name)
        .await?
        .map(|info| info.observed_at)
        .ok_or_else(|| CaseFailure::new(format!("the held {name} was not reported by inspect")))
}
