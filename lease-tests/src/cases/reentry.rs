//! A holder cannot take its own lease again: holding is not re-entrant.

use std::time::Duration;

use lease_core::{HolderId, LeaseStore, Runtime};

use super::{long_ttl, name};
use crate::failure::{ensure, ensure_eq};
use crate::{CaseFailure, CaseResult, Context, TestBackend, Verdict};

/// How long the case waits for the store's clock to move past the time the lease was taken.
const CLOCK_WAIT: Duration = Duration::from_secs(5);

/// A holder that holds a lease gets `None` when it tries to take it again, like anybody else,
/// with the same TTL or a longer one, and its lease is unchanged: the same holder, fence, time
/// taken and expiry (on MariaDB the upsert then touches no column), also once the store's clock
/// has moved on, so a statement that rewrote the times would show.
///
/// # Errors
/// A [`CaseFailure`] when the holder takes its own lease again, or its attempt changes the holder,
/// fence, time taken or expiry, or when the store's clock does not move on within five seconds,
/// and, [as any case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, it leaves `alerts`, taken
/// straight through the store, held by its holder until its TTL of a minute runs out.
pub async fn holder_cannot_take_its_own_lease_twice<B: TestBackend>(
    ctx: &Context<B>,
) -> CaseResult {
    let store = ctx.store().await?;
    let lease = name("alerts");
    let holder = HolderId::generate();
    let fence = store
        .try_acquire(&lease, &holder, long_ttl())
        .await?
        .ok_or_else(|| CaseFailure::new(format!("a fresh store refused {lease}")))?;
    let before = store
        .inspect(&lease)
        .await?
        .ok_or_else(|| CaseFailure::new(format!("inspect({lease}) reported nothing")))?;
    // Wait until the store's own clock reads later than the time taken.
    let started = ctx.runtime().now();
    loop {
        let now = store.inspect(&lease).await?.map(|info| info.observed_at);
        if now.is_some_and(|now| now > before.taken_at) {
            break;
        }
        ensure!(
            ctx.runtime().now().duration_since(started) < CLOCK_WAIT,
            "the store's clock did not move past {:?} within {CLOCK_WAIT:?}",
            before.taken_at
        );
        ctx.sleep(Duration::from_millis(5)).await;
    }
    for (attempt, ttl) in [long_ttl(), long_ttl(), lease_core::Ttl::from_secs(600)?]
        .into_iter()
        .enumerate()
    {
        let again = store.try_acquire(&lease, &holder, ttl).await?;
        ensure!(
            again.is_none(),
            "attempt {attempt}: the holder took its own {lease} again: {again:?}"
        );
    }
    let after = store.inspect(&lease).await?;
    ensure_eq!(
        after.map(|info| (info.holder, info.fence, info.taken_at, info.expires_at)),
        Some((holder, fence, before.taken_at, before.expires_at)),
        "holder, fence, time taken and expiry of {lease} after its holder tried to take it again"
    );
    Ok(Verdict::Passed)
}
