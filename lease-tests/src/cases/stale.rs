//! A stale holder (one whose lease was taken over, or who never held it) touches nothing.

use std::time::Duration;

use lease_core::{HolderId, LeaseName, LeaseStore};

use super::{long_ttl, name, short_ttl, wait_until_expired};
use crate::failure::{ensure, ensure_eq};
use crate::{CaseFailure, CaseResult, Context, TestBackend, Verdict};

/// After a takeover, the old holder's release and renewal (one by one and in a batch) return
/// `false` and leave the new holder's lease exactly as it was; so do those of a holder that
/// never held it. After the new holder releases, nobody's release or renewal succeeds.
///
/// # Errors
/// A [`CaseFailure`] when the stale holder or a stranger releases, renews, takes or changes the
/// held lease, or anybody releases or renews it once it was released, and, [as any
/// case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, `sweep` stays held by its
/// current holder until its TTL of a minute runs out.
pub async fn stale_holder_touches_nothing<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let store = ctx.store().await?;
    let name = name("sweep");
    let (stale, current, stranger) = (
        HolderId::generate(),
        HolderId::generate(),
        HolderId::generate(),
    );

    store
        .try_acquire(&name, &stale, short_ttl())
        .await?
        .ok_or_else(|| CaseFailure::new(format!("a fresh store refused {name}")))?;
    wait_until_expired(ctx, &*store, &name).await?;
    store
        .try_acquire(&name, &current, long_ttl())
        .await?
        .ok_or_else(|| CaseFailure::new(format!("the expired {name} could not be taken over")))?;
    let before = store.inspect(&name).await?;
    ensure!(
        before.as_ref().is_some_and(|info| info.holder == current),
        "{name}, just taken over, reported as {before:?}"
    );

    for (who, holder) in [("the stale holder", &stale), ("a stranger", &stranger)] {
        ensure!(
            !store.release(&name, holder, Duration::ZERO).await?,
            "{who} released {name}, held by somebody else"
        );
        ensure!(
            !store.release(&name, holder, Duration::from_secs(5)).await?,
            "{who} released {name} with a minimum hold, held by somebody else"
        );
        ensure!(
            !store.renew(&name, holder, long_ttl()).await?,
            "{who} renewed {name}, held by somebody else"
        );
        ensure_eq!(
            store
                .renew_many(&[(name.clone(), holder.clone())], long_ttl())
                .await?,
            vec![false],
            "renew_many by {who} of {name}, held by somebody else"
        );
        let after = store.inspect(&name).await?;
        ensure_eq!(
            untouched(&after),
            untouched(&before),
            "{name} after {who} tried to release and renew it"
        );
        ensure_eq!(
            store.try_acquire(&name, holder, long_ttl()).await?,
            None,
            "{who} acquiring {name} while it is held"
        );
    }

    ensure!(
        store.release(&name, &current, Duration::ZERO).await?,
        "the holder could not release {name}"
    );
    for (who, holder) in [
        ("the holder that released it", &current),
        ("the stale holder", &stale),
    ] {
        ensure!(
            !store.release(&name, holder, Duration::ZERO).await?,
            "{who} released {name} again after it was released"
        );
        ensure!(
            !store.renew(&name, holder, long_ttl()).await?,
            "{who} renewed {name} after it was released"
        );
    }
    ensure_eq!(
        store.inspect(&name).await?,
        None,
        "inspect({name}) after its release"
    );
    Ok(Verdict::Passed)
}

/// What a stale holder must not change: who holds the lease, its fence and its times.
fn untouched(
    info: &Option<lease_core::LeaseInfo>,
) -> Option<(
    LeaseName,
    HolderId,
    lease_core::Fence,
    std::time::SystemTime,
    std::time::SystemTime,
)> {
    info.as_ref().map(|info| {
        (
            info.name.clone(),
            info.holder.clone(),
            info.fence,
            info.taken_at,
            info.expires_at,
        )
    })
}
