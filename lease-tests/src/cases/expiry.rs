//! Expiry on the store's clock: an expired lease is taken over, a renewed one never is, and a
//! lapsed lease is never revived.

use std::time::{Duration, Instant};

use lease_core::{HolderId, LeaseStore, Runtime, Ttl};

use super::{EXPIRY_WAIT, SHORT_TTL, long_ttl, name, short_ttl, wait_until_expired};
use crate::failure::{ensure, ensure_eq};
use crate::{CaseFailure, CaseResult, Context, TestBackend, Verdict};

/// A lease whose holder stopped renewing is taken by the next caller, once the store's clock
/// says it expired, with a higher fence; the old holder can then neither renew nor release it.
///
/// # Errors
/// A [`CaseFailure`] when the lease is taken while its holder's runs, is not taken over once the
/// store reports it expired or is taken over with a fence not above the old one, or the old holder
/// can still renew or release it, and, [as any case](crate::cases#errors), when a call it needs
/// fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, `alerts` (or `alerts-2`,
/// `alerts-3`, after rounds this machine stalled past the short TTL) stays held until its TTL
/// runs out: 300 ms for its first holder, a minute once taken over.
pub async fn expired_lease_is_taken_over<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let store = ctx.store().await?;
    let (old, new) = (HolderId::generate(), HolderId::generate());

    // A round this machine stalls past the short TTL between the two acquisitions (a loaded CI
    // runner, a clock-skew run) cannot tell whether the lease still ran when the contender was
    // let in: it is played again on another name, at most twice. The store's clock cannot have
    // moved further between the two statements than this one did around them.
    let mut round = 1;
    let (name, old_fence) = loop {
        let name = match round {
            1 => name("alerts"),
            _ => name(&format!("alerts-{round}")),
        };
        let started = Instant::now();
        let old_fence = store
            .try_acquire(&name, &old, short_ttl())
            .await?
            .ok_or_else(|| CaseFailure::new(format!("a fresh store refused {name}")))?;
        match store.try_acquire(&name, &new, long_ttl()).await? {
            None => break (name, old_fence),
            Some(_) if started.elapsed() >= SHORT_TTL && round < 3 => round += 1,
            Some(fence) => {
                return Err(CaseFailure::new(format!(
                    "acquiring {name} while its holder's lease runs: expected None, got \
                     {fence:?}, {:?} after the first acquisition",
                    started.elapsed()
                )));
            }
        }
    };

    wait_until_expired(ctx, &*store, &name).await?;
    let new_fence = store.try_acquire(&name, &new, long_ttl()).await?;
    let Some(new_fence) = new_fence else {
        return Err(CaseFailure::new(format!(
            "{name} was reported expired, yet taking it over returned None"
        )));
    };
    ensure!(
        new_fence > old_fence,
        "the takeover's fence {new_fence} is not above the expired holder's {old_fence}"
    );
    ensure!(
        !store.renew(&name, &old, long_ttl()).await?,
        "the old holder renewed {name} after it was taken over"
    );
    ensure!(
        !store.release(&name, &old, Duration::ZERO).await?,
        "the old holder released {name} after it was taken over"
    );
    let info = store.inspect(&name).await?;
    ensure_eq!(
        info.map(|info| (info.holder, info.fence)),
        Some((new, new_fence)),
        "holder and fence of {name} after the takeover"
    );
    Ok(Verdict::Passed)
}

/// A lease renewed well within its TTL is never taken over, for several TTLs; once renewal
/// stops, it is. (A round this machine stalls for a whole TTL is played again on
/// `mail-checks-2`, then `mail-checks-3`.)
///
/// # Errors
/// A [`CaseFailure`] when a renewal fails, a rival takes the renewed lease, its holder or fence
/// changes, or the rival cannot take it once renewal has stopped, and, [as any
/// case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, nobody renews
/// `mail-checks` (or the name it was played again on) any more, and it lapses within its TTL of
/// a second.
pub async fn renewed_lease_is_never_taken_over<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    // Renewal every fifth of the TTL leaves most of it as slack for a busy machine.
    let ttl = Ttl::from_secs(1)?;
    let period = ttl.get() / 5;
    let rounds = 12;

    let store = ctx.store().await?;
    let (holder, rival) = (HolderId::generate(), HolderId::generate());

    // A round this machine stalls for a whole TTL after a renewal was sent (a loaded CI runner)
    // cannot tell whether the lease still ran when the next renewal or the rival came: it is
    // played again on another name, at most twice. The store's clock cannot have moved further
    // since the renewal than this one did.
    let mut attempt = 1;
    let (name, fence) = 'attempts: loop {
        let name = match attempt {
            1 => name("mail-checks"),
            _ => name(&format!("mail-checks-{attempt}")),
        };
        let mut sent = Instant::now();
        let fence = store
            .try_acquire(&name, &holder, ttl)
            .await?
            .ok_or_else(|| CaseFailure::new(format!("a fresh store refused {name}")))?;
        for round in 0..rounds {
            ctx.sleep(period).await;
            let renewing = Instant::now();
            let renewed = store.renew(&name, &holder, ttl).await?;
            if !renewed && sent.elapsed() >= ttl.get() && attempt < 3 {
                attempt += 1;
                continue 'attempts;
            }
            ensure!(
                renewed,
                "renewal {round} of {name} failed although it was renewed every {period:?} with a TTL of {ttl:?}, the last {:?} before",
                sent.elapsed()
            );
            sent = renewing;
            match store.try_acquire(&name, &rival, ttl).await? {
                None => {}
                Some(_) if sent.elapsed() >= ttl.get() && attempt < 3 => {
                    attempt += 1;
                    continue 'attempts;
                }
                Some(rival_fence) => {
                    return Err(CaseFailure::new(format!(
                        "a rival acquired {name} with fence {rival_fence} {:?} after renewal {round} was sent, with a TTL of {ttl:?}",
                        sent.elapsed()
                    )));
                }
            }
        }
        break (name, fence);
    };
    let info = store.inspect(&name).await?;
    ensure_eq!(
        info.map(|info| (info.holder, info.fence)),
        Some((holder, fence)),
        "holder and fence of {name} after {rounds} renewals"
    );

    wait_until_expired(ctx, &*store, &name).await?;
    ensure!(
        store.try_acquire(&name, &rival, ttl).await?.is_some(),
        "{name} could not be taken over once its holder stopped renewing"
    );
    Ok(Verdict::Passed)
}

/// Renewing a lease that expired fails even when nobody took it over, by `renew` and by
/// `renew_many`, and leaves it expired; releasing it fails too.
///
/// # Errors
/// A [`CaseFailure`] when `renew` or `renew_many` revives the expired lease, `release` reports
/// giving it back, or it is no longer reported as it was, expired, and, [as any
/// case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, it leaves
/// `uptime:node-a`, taken for 300 ms, to lapse.
pub async fn expired_lease_cannot_be_renewed<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let store = ctx.store().await?;
    let name = name("uptime:node-a");
    let holder = HolderId::generate();
    store
        .try_acquire(&name, &holder, short_ttl())
        .await?
        .ok_or_else(|| CaseFailure::new(format!("a fresh store refused {name}")))?;
    let expired = wait_until_expired(ctx, &*store, &name).await?;

    ensure!(
        !store.renew(&name, &holder, long_ttl()).await?,
        "renew revived {name} after it expired"
    );
    ensure_eq!(
        store
            .renew_many(&[(name.clone(), holder.clone())], long_ttl())
            .await?,
        vec![false],
        "renew_many of {name} after it expired"
    );
    ensure!(
        !store.release(&name, &holder, Duration::ZERO).await?,
        "release reported giving back {name} after it expired"
    );
    let after = store.inspect(&name).await?;
    let Some(after) = after else {
        return Err(CaseFailure::new(format!(
            "inspect({name}) reported nothing: an expired lease nobody released or took over \
             must still be reported"
        )));
    };
    ensure!(after.is_expired(), "{name} is no longer expired: {after:?}");
    ensure_eq!(
        (after.holder, after.fence, after.expires_at),
        (expired.holder, expired.fence, expired.expires_at),
        "holder, fence and expiry of {name} after the failed renewals"
    );
    Ok(Verdict::Passed)
}

/// A release with a minimum hold keeps the lease until that long after it was taken (at most
/// once per period), then frees it; a release whose minimum hold has passed frees it at once.
/// A hold is a minimum: a store that keeps times coarser than the hold rounds it up, never down
/// (the hold here has a part of half a millisecond).
///
/// # Errors
/// A [`CaseFailure`] when the lease is taken within its minimum hold, is kept other than until that
/// hold ends (or kept for less than the hold by the store's own times), cannot be taken once it has
/// ended, or a release whose minimum hold had passed does not free it at once, and,
/// [as any case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, `mail-checks` (or
/// `mail-checks-2`, `mail-checks-3`, after rounds this machine stalled past the minimum hold)
/// stays held until its minimum hold of 600 ms, or its TTL of a minute, runs out.
pub async fn release_with_min_hold_keeps_the_lease<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let min_hold = SHORT_TTL * 2 + Duration::from_micros(500);
    let store = ctx.store().await?;
    let (first, second, third) = (
        HolderId::generate(),
        HolderId::generate(),
        HolderId::generate(),
    );

    // A round this machine stalls past the minimum hold (a loaded CI runner, a clock-skew run)
    // cannot tell whether the hold was kept: it is played again on another name, at most twice.
    let mut round = 1;
    let name = loop {
        let name = match round {
            1 => name("mail-checks"),
            _ => name(&format!("mail-checks-{round}")),
        };
        let started = Instant::now();
        store
            .try_acquire(&name, &first, long_ttl())
            .await?
            .ok_or_else(|| CaseFailure::new(format!("a fresh store refused {name}")))?;
        ensure!(
            store.release(&name, &first, min_hold).await?,
            "release of {name} with a minimum hold of {min_hold:?} failed"
        );
        match store.try_acquire(&name, &second, long_ttl()).await? {
            None => break name,
            Some(_) if started.elapsed() >= min_hold && round < 3 => round += 1,
            Some(fence) => {
                return Err(CaseFailure::new(format!(
                    "acquiring {name} within the minimum hold of its release: expected None, \
                     got {fence:?}, {:?} after the first acquisition",
                    started.elapsed()
                )));
            }
        }
    };
    let held = store.inspect(&name).await?.ok_or_else(|| {
        CaseFailure::new(format!(
            "inspect({name}) reported nothing within the minimum hold of its release"
        ))
    })?;
    let held_for = held
        .expires_at
        .duration_since(held.taken_at)
        .unwrap_or_default();
    // The row's times come from the store's clock; allow for its timestamp precision.
    ensure!(
        held_for.abs_diff(min_hold) < Duration::from_millis(50),
        "{name} released with a minimum hold of {min_hold:?} now expires {held_for:?} after it was taken"
    );
    // Both times are the row's own, so no precision excuses a hold shorter than asked.
    ensure!(
        held_for >= min_hold,
        "{name} released with a minimum hold of {min_hold:?} is held for {held_for:?} from when \
         it was taken: the hold was cut short"
    );

    wait_until_expired(ctx, &*store, &name).await?;
    store
        .try_acquire(&name, &second, long_ttl())
        .await?
        .ok_or_else(|| {
            CaseFailure::new(format!(
                "{name} could not be taken once its minimum hold ended"
            ))
        })?;
    // Past a minimum hold of 1 ms for certain, whatever the store's timestamp precision.
    ctx.sleep(Duration::from_millis(50)).await;
    ensure!(
        store
            .release(&name, &second, Duration::from_millis(1))
            .await?,
        "release of {name} failed"
    );
    ensure_eq!(
        store.inspect(&name).await?,
        None,
        "inspect({name}) after a release whose minimum hold had passed"
    );
    ensure!(
        store
            .try_acquire(&name, &third, long_ttl())
            .await?
            .is_some(),
        "{name} could not be taken straight after a release whose minimum hold had passed"
    );
    Ok(Verdict::Passed)
}

/// A renewal that reaches a lease after its holder released it with a minimum hold (sent
/// before the release, answered after it: a statement still on its way when the client
/// stopped waiting for it) never moves the expiry back: the hold stays whole, whether the store
/// answers the renewal `true` (it matched the row it still keeps for the holder) or `false`.
/// Otherwise an hourly job's hold of most of an hour would end a TTL after the late renewal,
/// and another instance could run the job again within the hour. The same through
/// `renew_many`.
///
/// # Errors
/// A [`CaseFailure`] when a renewal moves the expiry of a held-back lease earlier, or the lease
/// can be taken within its hold, and, [as any case](crate::cases#errors), when a call it needs
/// fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, `digest-hold` stays
/// taken until its minimum hold of two minutes runs out.
pub async fn late_renewal_keeps_the_minimum_hold<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let store = ctx.store().await?;
    let (holder, other) = (HolderId::generate(), HolderId::generate());
    let name = name("digest-hold");
    // Taken for a minute, so a stall before the release cannot let it lapse; the renewals ask
    // for a short TTL, which would end well before the hold.
    let min_hold = Duration::from_secs(120);
    store
        .try_acquire(&name, &holder, long_ttl())
        .await?
        .ok_or_else(|| CaseFailure::new(format!("a fresh store refused {name}")))?;
    ensure!(
        store.release(&name, &holder, min_hold).await?,
        "release of {name} with a minimum hold of {min_hold:?} failed"
    );
    let held = store.inspect(&name).await?.ok_or_else(|| {
        CaseFailure::new(format!(
            "inspect({name}) reported nothing within the minimum hold of its release"
        ))
    })?;
    let hold_end = held.expires_at;
    for call in ["renew", "renew_many"] {
        let renewed = match call {
            "renew" => store.renew(&name, &holder, short_ttl()).await?,
            _ => {
                let answered = store
                    .renew_many(&[(name.clone(), holder.clone())], short_ttl())
                    .await?;
                ensure!(
                    answered.len() == 1,
                    "renew_many of one lease answered {answered:?}"
                );
                answered[0]
            }
        };
        let after = store.inspect(&name).await?.ok_or_else(|| {
            CaseFailure::new(format!(
                "{name} was gone after a late {call} (answered {renewed}) within its minimum hold"
            ))
        })?;
        ensure!(
            after.expires_at >= hold_end,
            "a late {call} (answered {renewed}) moved the expiry of {name}, released with a \
             minimum hold of {min_hold:?}, back by {:?}",
            hold_end
                .duration_since(after.expires_at)
                .unwrap_or_default()
        );
    }
    ensure_eq!(
        store.try_acquire(&name, &other, long_ttl()).await?,
        None,
        "acquiring {name} within the minimum hold of its release, after late renewals"
    );
    Ok(Verdict::Passed)
}

/// A rival that tries a lease every few milliseconds as its holder's TTL runs out takes it no
/// sooner than the expiry the store reported for that holder: the new holding begins (its
/// `taken_at`, by the store's clock) at or after the old one's `expires_at`. A store that counts
/// a lease free a little early (a tolerance for clock drift added the wrong way) lets two
/// holders overlap on every takeover, which no case that first waits for the expiry can see.
///
/// # Errors
/// A [`CaseFailure`] when the rival takes the lease before the holder's reported expiry, or not
/// within ten seconds, and, [as any case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, `reports` stays taken
/// until its TTL runs out: a second for its first holder, a minute once taken over.
pub async fn no_takeover_before_the_expiry<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let store = ctx.store().await?;
    let (old, new) = (HolderId::generate(), HolderId::generate());
    let name = name("reports");
    store
        .try_acquire(&name, &old, Ttl::from_secs(1)?)
        .await?
        .ok_or_else(|| CaseFailure::new(format!("a fresh store refused {name}")))?;
    let held = store.inspect(&name).await?.ok_or_else(|| {
        CaseFailure::new(format!(
            "inspect({name}) reported nothing for a taken lease"
        ))
    })?;
    let started = ctx.runtime().now();
    let fence = loop {
        if let Some(fence) = store.try_acquire(&name, &new, long_ttl()).await? {
            break fence;
        }
        ensure!(
            ctx.runtime().now().duration_since(started) < EXPIRY_WAIT,
            "{name}, taken for a second, could still not be taken over after {EXPIRY_WAIT:?}"
        );
        ctx.sleep(Duration::from_millis(5)).await;
    };
    let taken = store.inspect(&name).await?.ok_or_else(|| {
        CaseFailure::new(format!(
            "inspect({name}) reported nothing after its takeover"
        ))
    })?;
    ensure_eq!(
        (&taken.holder, taken.fence),
        (&new, fence),
        "holder and fence of {name} after the takeover"
    );
    let early = held.expires_at.duration_since(taken.taken_at).ok();
    ensure!(
        taken.taken_at >= held.expires_at,
        "{name} was taken over at {:?}, {early:?} before the expiry the store reported for its \
         holder ({:?})",
        taken.taken_at,
        held.expires_at
    );
    Ok(Verdict::Passed)
}
