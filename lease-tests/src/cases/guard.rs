//! The guard's view: it learns of a takeover within one renewal period, and of an outage by its
//! local deadline, before the store could hand the lease to somebody else.

use std::sync::Arc;
use std::time::Duration;

use lease_core::{Error, HolderId, LeaseClient, LeaseStore, LossReason, Ttl};

use super::severable::{Link, Severable};
use super::{long_ttl, name};
use crate::failure::{ensure, ensure_eq};
use crate::{CaseFailure, CaseResult, Context, TestBackend, Verdict};

/// Room for scheduling and a statement's round trip on a busy machine, on top of the bounds
/// the cases assert.
const SLACK: Duration = Duration::from_millis(1500);
/// How long one store call may take before the client counts it failed: well above a
/// statement's round trip on a busy machine, so a slow answer is not mistaken for an outage
/// (the default, one renewal period, is only a few hundred milliseconds here).
const STORE_TIMEOUT: Duration = Duration::from_secs(3);

/// A guard whose lease was taken over (its holder's row released and taken by a rival, as
/// after an expiry the guard did not notice) sees the lost signal within one renewal period,
/// as [`LossReason::Rejected`], long before its local deadline; it then reports the lease not
/// held, its release fails as lost, and the rival's lease is untouched.
///
/// # Errors
/// A [`CaseFailure`] when the guard does not see the takeover within a renewal period and some
/// slack, sees it other than as [`LossReason::Rejected`], still says it holds the lease, its
/// release does not fail as lost, or the rival's lease changed, and, [as any
/// case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, the rival keeps `alerts`
/// until its TTL of a minute runs out: the guard's background release matches nothing once the
/// rival holds the lease, and a guard that saw its loss sends none.
pub async fn lost_signal_after_takeover<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    // The local deadline is seconds away, so only a rejected renewal can end the lease in time.
    let ttl = Ttl::from_secs(10)?;
    let period = Duration::from_millis(400);
    let store = ctx.store().await?;
    let client = LeaseClient::builder(Arc::clone(&store), ctx.runtime().clone())
        .ttl(ttl)
        .renew_every(period)
        .store_timeout(STORE_TIMEOUT)
        .build()?;
    let lease = name("alerts");
    let guard = client
        .try_acquire(&lease)
        .await?
        .ok_or_else(|| CaseFailure::new(format!("a fresh store refused {lease}")))?;
    ctx.sleep(period * 2).await;
    ensure!(
        guard.is_held(),
        "{lease} was not held after two renewal periods"
    );
    // The takeover follows a renewal at once, so the next is a whole period away: a renewal
    // between the release and the rival's acquisition would find the lease free, which every
    // store refuses, and the case could not tell a store that renews for anybody from one
    // that does not.
    let renewals = client.stats().renewals;
    let renewed = ctx
        .within(period * 3, async {
            while client.stats().renewals == renewals {
                ctx.sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
    ensure!(
        renewed.is_some(),
        "{lease} was not renewed within three renewal periods"
    );

    ensure!(
        store
            .release(&lease, guard.holder(), Duration::ZERO)
            .await?,
        "freeing {lease} behind the guard's back failed"
    );
    let rival = HolderId::generate();
    let rival_fence = store
        .try_acquire(&lease, &rival, long_ttl())
        .await?
        .ok_or_else(|| CaseFailure::new(format!("the rival could not take the freed {lease}")))?;
    ensure!(
        rival_fence > guard.fence(),
        "the rival's fence {rival_fence} is not above the guard's {}",
        guard.fence()
    );

    let reason = ctx
        .within(period + SLACK, guard.lost())
        .await
        .ok_or_else(|| {
            CaseFailure::new(format!(
                "the guard of {lease} did not see the takeover within {:?} (renewal every {period:?})",
                period + SLACK
            ))
        })?;
    ensure_eq!(
        reason,
        LossReason::Rejected,
        "how the guard of {lease} lost it"
    );
    ensure!(!guard.is_held(), "the guard still says it holds {lease}");
    let released = guard.release().await;
    ensure!(
        matches!(released, Err(Error::Lost { .. })),
        "releasing the lost {lease} gave {released:?}, not Error::Lost"
    );
    let info = store.inspect(&lease).await?;
    ensure_eq!(
        info.map(|info| (info.holder, info.fence)),
        Some((rival, rival_fence)),
        "holder and fence of {lease} after the old guard gave up"
    );
    Ok(Verdict::Passed)
}

/// With the store refusing every call, a guard reports [`LossReason::DeadlinePassed`] by its
/// local deadline, and does so while the store still holds the lease for it: nobody else can
/// have taken it yet. New acquisitions fail with [`Error::Store`].
///
/// # Errors
/// A [`CaseFailure`] when the guard does not report [`LossReason::DeadlinePassed`] by its local
/// deadline and some slack, the store no longer holds the lease for the guard by then, an
/// acquisition in the outage answers other than [`Error::Store`], or the guard's release afterwards
/// does not fail as lost, and, [as any case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped during the outage, the
/// guard's release goes through the cut link and is refused (a guard that saw its loss sends none),
/// and `sweep` lapses after its TTL of two seconds.
pub async fn guard_loses_lease_when_store_refuses<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    loss_by_deadline(ctx, Link::Refusing).await
}

/// As [`guard_loses_lease_when_store_refuses`], with every call hanging instead (dropped
/// packets): the client's store timeout turns the silence into errors and the loss.
///
/// # Errors
/// As [`guard_loses_lease_when_store_refuses`].
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped during the outage, the
/// guard's release hangs in the cut link until the client's store timeout of a second ends it (a
/// guard that saw its loss sends none), and `sweep` lapses after its TTL of two seconds.
pub async fn guard_loses_lease_when_store_hangs<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    loss_by_deadline(ctx, Link::BlackHole).await
}

async fn loss_by_deadline<B: TestBackend>(ctx: &Context<B>, outage: Link) -> CaseResult {
    let ttl = Ttl::from_secs(2)?;
    let period = Duration::from_millis(300);
    // A wide margin, so the store still holds the lease when the guard gives up and the case
    // can see that it does.
    let margin = Duration::from_millis(700);
    // Headroom over the renewal period for a slow answer, yet short of the local validity
    // (1.3 s), so a hanging call ends before the guard's deadline would anyway.
    let store_timeout = Duration::from_secs(1);
    let store = ctx.store().await?;
    let severable = Arc::new(Severable::new(Arc::clone(&store)));
    let client = LeaseClient::builder(Arc::clone(&severable), ctx.runtime().clone())
        .ttl(ttl)
        .renew_every(period)
        .safety_margin(margin)
        .store_timeout(store_timeout)
        .build()?;
    let validity = client.config().local_validity();
    let store_timeout = client.config().store_timeout;
    let lease = name("sweep");
    let guard = client
        .try_acquire(&lease)
        .await?
        .ok_or_else(|| CaseFailure::new(format!("a fresh store refused {lease}")))?;
    ctx.sleep(period * 2).await;
    ensure!(
        guard.is_held(),
        "{lease} was not held after two renewal periods"
    );

    severable.set(outage);
    let reason = ctx
        .within(validity + SLACK, guard.lost())
        .await
        .ok_or_else(|| {
            CaseFailure::new(format!(
                "the guard of {lease} did not report the loss within {:?} of the outage \
                 (local validity {validity:?})",
                validity + SLACK
            ))
        })?;
    ensure_eq!(
        reason,
        LossReason::DeadlinePassed,
        "how the guard of {lease} lost it in the outage"
    );
    ensure!(!guard.is_held(), "the guard still says it holds {lease}");

    // The store itself still has the lease for the guard's holder: the guard gave up first.
    let info = store.inspect(&lease).await?;
    ensure!(
        info.as_ref()
            .is_some_and(|info| info.holder == *guard.holder() && !info.is_expired()),
        "when the guard gave {lease} up, the store no longer held it for the guard: {info:?}"
    );

    let attempt = ctx
        .within(store_timeout + SLACK, client.try_acquire("mail-checks"))
        .await
        .ok_or_else(|| {
            CaseFailure::new(format!(
                "acquiring during the outage did not return within {:?}",
                store_timeout + SLACK
            ))
        })?;
    ensure!(
        matches!(attempt, Err(Error::Store { .. })),
        "acquiring during the outage gave {:?}, not Error::Store",
        attempt.map(|guard| guard.map(|guard| guard.fence()))
    );
    severable.set(Link::Up);
    let released = guard.release().await;
    ensure!(
        matches!(released, Err(Error::Lost { .. })),
        "releasing {lease} after the outage ended it gave {released:?}, not Error::Lost"
    );
    Ok(Verdict::Passed)
}
