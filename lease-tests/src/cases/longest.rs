//! The longest TTL and minimum hold a store must keep, whole.

use std::time::Duration;

use lease_core::{HolderId, LeaseInfo, LeaseName, LeaseStore, MAX_MIN_HOLD, Ttl};

use super::{acquire, long_ttl, name};
use crate::failure::ensure;
use crate::{CaseFailure, CaseResult, Context, TestBackend, Verdict};

/// How far a store's times may be from the exact length: SQLite's table keeps milliseconds.
const PRECISION: Duration = Duration::from_millis(1);

/// Leases taken for two hours and for [`Ttl::MAX`] (365 days) expire that long after they were
/// taken, and a rival is refused them; released with [`MAX_MIN_HOLD`] (a thousand years), a
/// lease stays taken that long after it was taken, and a rival is still refused. Renewed by
/// `renew` and by `renew_many` with the same TTLs, each lease expires that TTL from the
/// renewal. The other cases use TTLs of ten minutes at most: a store that binds a TTL as
/// 32-bit microseconds (which wrap at 71 minutes) or whose date arithmetic overflows into a
/// `NULL` expiry (a free lease) would pass them, and hand an hourly job's lease to the next
/// instance early.
///
/// # Errors
/// A [`CaseFailure`] when a lease's expiry is not its TTL or hold after it was taken (within a
/// millisecond) or after its renewal, or a rival takes it, and, [as any
/// case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, `archive-2h` and
/// `archive-year` stay taken for their TTLs, and `archive-held` for a thousand years, in the
/// case's own fresh store.
pub async fn longest_ttls_and_holds_are_kept_whole<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let store = ctx.store().await?;
    let rival = HolderId::generate();
    for (lease, ttl) in [
        ("archive-2h", Ttl::from_secs(2 * 60 * 60)?),
        ("archive-year", Ttl::MAX),
    ] {
        let (name, holder) = (name(lease), HolderId::generate());
        store
            .try_acquire(&name, &holder, ttl)
            .await?
            .ok_or_else(|| CaseFailure::new(format!("a fresh store refused {name}")))?;
        kept_whole(
            &*store,
            &name,
            &rival,
            ttl.get(),
            &format!("taken for {ttl:?}"),
        )
        .await?;
        // Renewed with it, a lease taken for a minute expires that TTL from the renewal (a
        // renewal never moves an expiry back, so one taken for the TTL would not show it).
        for call in ["renew", "renew_many"] {
            let renewed_name = super::name(&format!("{lease}-{call}"));
            acquire(&*store, &renewed_name, &holder).await?;
            let pair = [(renewed_name.clone(), holder.clone())];
            let renewed = match call {
                "renew" => store.renew(&renewed_name, &holder, ttl).await?,
                _ => store.renew_many(&pair, ttl).await?.first() == Some(&true),
            };
            ensure!(renewed, "{call} of {renewed_name} for {ttl:?} failed");
            renewed_whole(
                &*store,
                &renewed_name,
                ttl.get(),
                &format!("renewed by {call} for {ttl:?}"),
            )
            .await?;
        }
    }
    let (name, holder) = (name("archive-held"), HolderId::generate());
    store
        .try_acquire(&name, &holder, long_ttl())
        .await?
        .ok_or_else(|| CaseFailure::new(format!("a fresh store refused {name}")))?;
    ensure!(
        store.release(&name, &holder, MAX_MIN_HOLD).await?,
        "the release of {name} with the longest minimum hold failed"
    );
    kept_whole(
        &*store,
        &name,
        &rival,
        MAX_MIN_HOLD,
        "released with the longest minimum hold",
    )
    .await?;
    Ok(Verdict::Passed)
}

/// How long a renewal and the read after it may take, at most, for [`renewed_whole`]: a
/// renewal's expiry is its TTL from the renewal's own time, before the read.
const RENEWAL_TO_READ: Duration = Duration::from_secs(60);

/// The lease `name` as the store reads it, or a failure saying it read nothing (`what` says how
/// the lease was taken).
async fn inspected<S: LeaseStore + ?Sized>(
    store: &S,
    name: &LeaseName,
    what: &str,
) -> Result<LeaseInfo, CaseFailure> {
    store
        .inspect(name)
        .await?
        .ok_or_else(|| CaseFailure::new(format!("inspect reported nothing for {name}, {what}")))
}

/// Checks that the lease `name`, just renewed (`what` says how), expires its `ttl` from the
/// store's time of the renewal: no later than `ttl` after the read, and no more than
/// [`RENEWAL_TO_READ`] earlier.
async fn renewed_whole<S: LeaseStore + ?Sized>(
    store: &S,
    name: &LeaseName,
    ttl: Duration,
    what: &str,
) -> Result<(), CaseFailure> {
    let info = inspected(store, name, what).await?;
    let left = info
        .expires_at
        .duration_since(info.observed_at)
        .unwrap_or(Duration::ZERO);
    ensure!(
        left <= ttl + PRECISION && left + RENEWAL_TO_READ >= ttl,
        "{name}, {what}, expires {left:?} after it was read ({:?} to {:?}), not its TTL",
        info.observed_at,
        info.expires_at
    );
    Ok(())
}

/// Checks that the lease `name` (`what` says how it was taken) expires `length` after it was
/// taken, within [`PRECISION`], reads held, and is refused to `rival`.
async fn kept_whole<S: LeaseStore + ?Sized>(
    store: &S,
    name: &LeaseName,
    rival: &HolderId,
    length: Duration,
    what: &str,
) -> Result<(), CaseFailure> {
    let info = inspected(store, name, what).await?;
    let held = info
        .expires_at
        .duration_since(info.taken_at)
        .unwrap_or(Duration::ZERO);
    ensure!(
        held.abs_diff(length) <= PRECISION,
        "{name}, {what}, expires {held:?} after it was taken ({:?} to {:?}), not {length:?}",
        info.taken_at,
        info.expires_at
    );
    // Not expired already, as an expiry that wrapped into the past would be.
    ensure!(
        !info.is_expired(),
        "{name}, {what}, reads expired: {info:?}"
    );
    ensure!(
        store.try_acquire(name, rival, long_ttl()).await?.is_none(),
        "a rival took {name}, {what}"
    );
    Ok(())
}
