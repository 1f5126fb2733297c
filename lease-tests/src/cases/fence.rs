//! Fencing tokens strictly increase per name, across every way a lease changes hands.

use std::time::Duration;

use lease_core::{Fence, HolderId, LeaseStore};

use super::{acquire, long_ttl, name, short_ttl, wait_until_expired};
use crate::failure::{ensure, ensure_eq};
use crate::{CaseFailure, CaseResult, Context, TestBackend, Verdict};

/// How many release and re-acquire cycles the case runs.
const CYCLES: usize = 20;

/// Fences are positive and strictly increase across acquire, renewal (which keeps the fence),
/// release and re-acquire by the same or another holder, and takeover after expiry. A release
/// never resets the count (deleting the row would).
///
/// # Errors
/// A [`CaseFailure`] when the first fence is not positive, renewal changes the fence, or an
/// acquisition's fence is not above the one before it, and, [as any case](crate::cases#errors),
/// when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, the leases it holds on
/// `alerts` and `sweep` stay until their TTL runs out: a minute, or 300 ms for the one taken short.
pub async fn fences_strictly_increase<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let store = ctx.store().await?;
    let name = name("alerts");
    let mut fences: Vec<(&str, Fence)> = Vec::new();

    let first = HolderId::generate();
    let fence = acquire(&*store, &name, &first).await?;
    ensure!(
        fence.get() >= 1,
        "the first fence of {name} is {fence}, not positive"
    );
    fences.push(("first acquisition", fence));

    ensure!(
        store.renew(&name, &first, long_ttl()).await?,
        "renewing {name} failed"
    );
    let renewed = store.inspect(&name).await?.map(|info| info.fence);
    ensure_eq!(renewed, Some(fence), "fence of {name} after renewal");
    ensure!(
        store.release(&name, &first, Duration::ZERO).await?,
        "releasing {name} failed"
    );

    for cycle in 0..CYCLES {
        let holder = HolderId::generate();
        fences.push((
            "re-acquisition after release",
            acquire(&*store, &name, &holder).await?,
        ));
        ensure!(
            store.release(&name, &holder, Duration::ZERO).await?,
            "releasing {name} in cycle {cycle} failed"
        );
    }

    let expiring = HolderId::generate();
    store
        .try_acquire(&name, &expiring, short_ttl())
        .await?
        .map(|fence| fences.push(("acquisition with a short TTL", fence)))
        .ok_or_else(|| CaseFailure::new(format!("{name} could not be taken after its release")))?;
    wait_until_expired(ctx, &*store, &name).await?;
    let taker = HolderId::generate();
    fences.push((
        "takeover after expiry",
        acquire(&*store, &name, &taker).await?,
    ));

    // Another name's acquisitions do not disturb this one's order.
    acquire(&*store, &super::name("sweep"), &HolderId::generate()).await?;
    ensure!(
        store.release(&name, &taker, Duration::ZERO).await?,
        "releasing {name} after the takeover failed"
    );
    fences.push((
        "re-acquisition after takeover",
        acquire(&*store, &name, &HolderId::generate()).await?,
    ));

    for pair in fences.windows(2) {
        let [(before_what, before), (after_what, after)] = pair else {
            unreachable!("windows(2) yields pairs");
        };
        ensure!(
            after > before,
            "fences of {name} went from {before} ({before_what}) to {after} ({after_what}): \
             they must strictly increase; all of them: {fences:?}"
        );
    }
    Ok(Verdict::Passed)
}
