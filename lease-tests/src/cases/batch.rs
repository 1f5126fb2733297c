//! `renew_many`: one call, and an exact answer for every lease in it.

use std::time::Duration;

use lease_core::{HolderId, LeaseName, LeaseStore};

use super::{long_ttl, name, short_ttl, wait_until_expired};
use crate::failure::{ensure, ensure_eq};
use crate::{CaseFailure, CaseResult, Context, TestBackend, Verdict};

/// How many leases the large batch renews: more than one statement's worth in most stores'
/// batching, so a store that splits batches is checked across the seams.
const LARGE_BATCH: usize = 300;

/// `renew_many` answers `true` for exactly the leases still held and `false`, in the same
/// position, for one that expired, one taken over, one released and one never taken; it
/// extends the held ones and revives none. An empty batch answers an empty list, and a large
/// batch with every third lease released answers exactly that pattern.
///
/// # Errors
/// A [`CaseFailure`] when `renew_many` answers a wrong list, does not extend a held lease or
/// changes its fence, or revives the expired one, and, [as any case](crate::cases#errors), when a
/// call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, the leases it took, over
/// three hundred, stay held until their TTL of a minute runs out.
pub async fn renew_many_reports_exactly_the_lost<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let store = ctx.store().await?;
    ensure_eq!(
        store.renew_many(&[], long_ttl()).await?,
        Vec::<bool>::new(),
        "renew_many of no leases"
    );

    let held = [name("sweep"), name("alerts"), name("uptime:node-a")];
    let (expired, taken_over, released, never) = (
        name("mail-checks"),
        name("uptime:node-b"),
        name("reports"),
        name("never-taken"),
    );
    let mut holders = Vec::new();
    for lease in &held {
        holders.push((lease.clone(), take(&*store, lease, long_ttl()).await?));
    }
    let expired_holder = take(&*store, &expired, short_ttl()).await?;
    let stale_holder = take(&*store, &taken_over, short_ttl()).await?;
    let released_holder = take(&*store, &released, long_ttl()).await?;
    ensure!(
        store
            .release(&released, &released_holder, Duration::ZERO)
            .await?,
        "releasing {released} failed"
    );
    wait_until_expired(ctx, &*store, &expired).await?;
    wait_until_expired(ctx, &*store, &taken_over).await?;
    take(&*store, &taken_over, long_ttl()).await?;
    let before = store.inspect(&held[1]).await?;

    let batch = vec![
        holders[0].clone(),
        (expired.clone(), expired_holder),
        holders[1].clone(),
        (taken_over.clone(), stale_holder),
        (released.clone(), released_holder),
        holders[2].clone(),
        (never.clone(), HolderId::generate()),
    ];
    let renewed = store.renew_many(&batch, long_ttl()).await?;
    ensure_eq!(
        renewed,
        vec![true, false, true, false, false, true, false],
        "renew_many of {:?}",
        batch
            .iter()
            .map(|(name, _)| name.as_str())
            .collect::<Vec<_>>()
    );

    let after = store.inspect(&held[1]).await?;
    match (before, after) {
        (Some(before), Some(after)) => ensure!(
            after.expires_at > before.expires_at && after.fence == before.fence,
            "renew_many did not extend {} (or changed its fence): before {before:?}, after {after:?}",
            held[1]
        ),
        other => {
            return Err(CaseFailure::new(format!(
                "inspect({}) around renew_many: {other:?}",
                held[1]
            )));
        }
    }
    let still_expired = store.inspect(&expired).await?;
    ensure!(
        still_expired.as_ref().is_some_and(|info| info.is_expired()),
        "renew_many revived the expired {expired}: {still_expired:?}"
    );

    let mut large = Vec::with_capacity(LARGE_BATCH);
    for index in 0..LARGE_BATCH {
        let lease = name(&format!("node-{index:04}"));
        let holder = take(&*store, &lease, long_ttl()).await?;
        large.push((lease, holder));
    }
    for (lease, holder) in large.iter().step_by(3) {
        ensure!(
            store.release(lease, holder, Duration::ZERO).await?,
            "releasing {lease} failed"
        );
    }
    let renewed = store.renew_many(&large, long_ttl()).await?;
    let expected: Vec<bool> = (0..LARGE_BATCH).map(|index| index % 3 != 0).collect();
    if renewed != expected {
        let wrong: Vec<usize> = (0..LARGE_BATCH)
            .filter(|&index| renewed.get(index) != expected.get(index))
            .collect();
        return Err(CaseFailure::new(format!(
            "renew_many of {LARGE_BATCH} leases, every third released: {} answers, wrong at \
             positions {wrong:?}",
            renewed.len()
        )));
    }
    Ok(Verdict::Passed)
}

async fn take<S: LeaseStore + ?Sized>(
    store: &S,
    name: &LeaseName,
    ttl: lease_core::Ttl,
) -> Result<HolderId, CaseFailure> {
    let holder = HolderId::generate();
    store
        .try_acquire(name, &holder, ttl)
        .await?
        .ok_or_else(|| CaseFailure::new(format!("{name} was refused although nobody held it")))?;
    Ok(holder)
}
