//! `inspect` and `list`: what an operator sees agrees with what was taken.

use std::time::Duration;

use lease_core::{HolderId, LeaseInfo, LeaseStore, Ttl};

use super::{long_ttl, name, short_ttl, wait_until_expired};
use crate::failure::{ensure, ensure_eq};
use crate::{CaseFailure, CaseResult, Context, TestBackend, Verdict};

/// How far a reported lease length may be from the TTL it was taken with: the store's timestamp
/// precision, not a unit mistake (seconds for milliseconds would be far off).
const LENGTH_TOLERANCE: Duration = Duration::from_millis(50);

/// A fresh store lists nothing. After leases are taken, `inspect` reports each one's holder,
/// fence and a length equal to its TTL; `list` reports exactly the same leases, ordered by name;
/// an expired, unreleased lease is in both and marked expired; a released one is in neither, and
/// neither is a name never taken. Renewal moves the expiry and keeps the rest.
///
/// # Errors
/// A [`CaseFailure`] when a fresh store lists anything, `inspect` misreports a lease's name,
/// holder, fence, expiry or length, `list` disagrees with it or is not ordered by name, a released
/// lease or a name never taken is reported, the wrong leases are marked expired, or renewal changes
/// more than the expiry, and, [as any case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, the three leases it holds
/// stay until their TTL of a minute runs out.
pub async fn inspect_and_list_agree<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let store = ctx.store().await?;
    ensure_eq!(store.list().await?, Vec::new(), "list() of a fresh store");

    let ttl = long_ttl();
    let held = [name("uptime:node-a"), name("alerts"), name("sweep")];
    let mut taken = Vec::new();
    for lease in &held {
        let holder = HolderId::generate();
        let fence = store
            .try_acquire(lease, &holder, ttl)
            .await?
            .ok_or_else(|| CaseFailure::new(format!("{lease} was refused in a fresh store")))?;
        taken.push((lease.clone(), holder, fence));
    }
    let expired = name("mail-checks");
    let expired_holder = HolderId::generate();
    store
        .try_acquire(&expired, &expired_holder, short_ttl())
        .await?
        .ok_or_else(|| CaseFailure::new(format!("{expired} was refused in a fresh store")))?;
    let released = name("reports");
    let released_holder = HolderId::generate();
    store
        .try_acquire(&released, &released_holder, ttl)
        .await?
        .ok_or_else(|| CaseFailure::new(format!("{released} was refused in a fresh store")))?;
    ensure!(
        store
            .release(&released, &released_holder, Duration::ZERO)
            .await?,
        "releasing {released} failed"
    );
    wait_until_expired(ctx, &*store, &expired).await?;

    let mut inspected = Vec::new();
    for (lease, holder, fence) in &taken {
        let info = store
            .inspect(lease)
            .await?
            .ok_or_else(|| CaseFailure::new(format!("inspect({lease}) reported nothing")))?;
        ensure_eq!(info.name, *lease, "name reported by inspect({lease})");
        ensure_eq!(info.holder, *holder, "holder reported by inspect({lease})");
        ensure_eq!(info.fence, *fence, "fence reported by inspect({lease})");
        ensure!(!info.is_expired(), "{lease} is reported expired: {info:?}");
        check_times(&info, ttl)?;
        inspected.push(info);
    }
    let expired_info = store
        .inspect(&expired)
        .await?
        .ok_or_else(|| CaseFailure::new(format!("inspect({expired}) reported nothing")))?;
    ensure_eq!(
        expired_info.holder,
        expired_holder,
        "holder of the expired {expired}"
    );
    check_times(&expired_info, short_ttl())?;
    inspected.push(expired_info);
    ensure_eq!(
        store.inspect(&released).await?,
        None,
        "inspect({released}) after release"
    );
    ensure_eq!(
        store.inspect(&name("never-taken")).await?,
        None,
        "inspect of a name never taken"
    );

    inspected.sort_by(|a, b| a.name.cmp(&b.name));
    let listed = store.list().await?;
    ensure_eq!(
        listed.iter().map(comparable).collect::<Vec<_>>(),
        inspected.iter().map(comparable).collect::<Vec<_>>(),
        "list() against inspect() of every lease, ordered by name"
    );
    ensure!(
        listed
            .iter()
            .all(|info| info.is_expired() == (info.name == expired)),
        "list() marks the wrong leases expired: {listed:?}"
    );

    let (lease, holder, fence) = &taken[0];
    ensure!(
        store.renew(lease, holder, ttl).await?,
        "renewing {lease} failed"
    );
    let renewed = store.inspect(lease).await?.ok_or_else(|| {
        CaseFailure::new(format!("inspect({lease}) reported nothing after renewal"))
    })?;
    let before = &inspected
        .iter()
        .find(|info| info.name == *lease)
        .expect("inspected above");
    ensure!(
        renewed.expires_at > before.expires_at,
        "renewal did not move the expiry of {lease}: before {before:?}, after {renewed:?}"
    );
    // A TTL from the renewal, not from the expiry it found: a lease is free at most one TTL
    // after its last renewal. Read after the renewal, so its time is no earlier.
    let renewed_for = renewed
        .expires_at
        .duration_since(renewed.observed_at)
        .unwrap_or_default();
    ensure!(
        renewed_for <= ttl.get() + LENGTH_TOLERANCE,
        "renewed for {ttl:?}, {lease} runs {renewed_for:?} past the time it was read: renewal counts from the old expiry, not from now ({renewed:?})"
    );
    ensure_eq!(
        (&renewed.holder, renewed.fence, renewed.taken_at),
        (holder, *fence, before.taken_at),
        "holder, fence and time taken of {lease} after renewal"
    );
    Ok(Verdict::Passed)
}

/// Everything `list` and `inspect` must agree on; the time of reading differs between calls.
fn comparable(
    info: &LeaseInfo,
) -> (
    &str,
    &HolderId,
    lease_core::Fence,
    std::time::SystemTime,
    std::time::SystemTime,
) {
    (
        info.name.as_str(),
        &info.holder,
        info.fence,
        info.taken_at,
        info.expires_at,
    )
}

/// The lease was taken before it was read and runs for its TTL from when it was taken.
fn check_times(info: &LeaseInfo, ttl: Ttl) -> Result<(), CaseFailure> {
    ensure!(
        info.taken_at <= info.observed_at,
        "{} was taken after it was read: {info:?}",
        info.name
    );
    let length = info
        .expires_at
        .duration_since(info.taken_at)
        .unwrap_or_default();
    ensure!(
        length.abs_diff(ttl.get()) <= LENGTH_TOLERANCE,
        "{} taken for {ttl:?} runs {length:?} from when it was taken: {info:?}",
        info.name
    );
    Ok(())
}
