//! A release keeps the count: fences go on rising across releases, with and without a minimum
//! hold.

use std::time::{Duration, Instant};

use lease_core::{Fence, HolderId, LeaseStore};

use super::{long_ttl, name, wait_until_expired};
use crate::failure::{ensure, ensure_eq};
use crate::{CaseFailure, CaseResult, Context, TestBackend, Verdict};

/// How many take, renew and release cycles the case runs.
const CYCLES: usize = 5;
/// Long enough that a busy machine cannot let it pass between the release and the next try.
const MIN_HOLD: Duration = Duration::from_millis(1500);

/// Take, renew (which keeps the fence), release, by a new holder each time: every acquisition
/// gets a higher fence, a second release by the same holder matches nothing, and a released
/// lease is neither inspected nor listed. Then a release with a minimum hold keeps the lease
/// for its holder until at most that long after it was taken, nobody can take it meanwhile,
/// and the next holder, once it lapsed, gets a higher fence still.
///
/// # Errors
/// A [`CaseFailure`] when a fence does not rise across a release, renewal changes it, a second
/// release by the same holder matches, a released lease is inspected or listed, or a release with a
/// minimum hold keeps the lease past that hold or lets another holder take it meanwhile, and, [as
/// any case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, `mail-checks` stays held
/// until its TTL of a minute, or its minimum hold of 1.5 s, runs out.
pub async fn fences_keep_counting_across_releases<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let store = ctx.store().await?;
    let lease = name("mail-checks");
    let mut fences: Vec<Fence> = Vec::new();
    for cycle in 0..CYCLES {
        let holder = HolderId::generate();
        let fence = store
            .try_acquire(&lease, &holder, long_ttl())
            .await?
            .ok_or_else(|| {
                CaseFailure::new(format!("cycle {cycle}: the released {lease} was refused"))
            })?;
        fences.push(fence);
        ensure!(
            fences.windows(2).all(|pair| pair[0] < pair[1]),
            "cycle {cycle}: fences of {lease} across releases did not strictly increase: {fences:?}"
        );
        ensure!(
            store.renew(&lease, &holder, long_ttl()).await?,
            "cycle {cycle}: renewing {lease} failed"
        );
        let info = store.inspect(&lease).await?;
        ensure_eq!(
            info.map(|info| info.fence),
            Some(fence),
            "cycle {cycle}: fence of {lease} after renewal"
        );
        ensure!(
            store.release(&lease, &holder, Duration::ZERO).await?,
            "cycle {cycle}: the holder could not release {lease}"
        );
        ensure!(
            !store.release(&lease, &holder, Duration::ZERO).await?,
            "cycle {cycle}: a second release of {lease} by the same holder matched"
        );
        ensure_eq!(
            store.inspect(&lease).await?,
            None,
            "cycle {cycle}: inspect({lease}) after release"
        );
        ensure_eq!(
            store.list().await?,
            Vec::new(),
            "cycle {cycle}: list() after release"
        );
    }

    // A round this machine stalls past the minimum hold between the acquisition and the
    // rival's try (a loaded runner, a clock-skew run) cannot tell a hold that ended on time
    // from one that was never kept: it is played again on another name, at most twice.
    let mut round = 1;
    let (lease, other) = loop {
        let lease = match round {
            1 => lease.clone(),
            _ => name(&format!("mail-checks-{round}")),
        };
        let started = Instant::now();
        let holder = HolderId::generate();
        let held = store
            .try_acquire(&lease, &holder, long_ttl())
            .await?
            .ok_or_else(|| CaseFailure::new(format!("the released {lease} was refused")))?;
        if round > 1 {
            fences = Vec::new();
        }
        fences.push(held);
        ensure!(
            store.release(&lease, &holder, MIN_HOLD).await?,
            "release of {lease} with a minimum hold of {MIN_HOLD:?} did not match"
        );
        let info = store.inspect(&lease).await?;
        let other = HolderId::generate();
        let rival = store.try_acquire(&lease, &other, long_ttl()).await?;
        if started.elapsed() >= MIN_HOLD && round < 3 {
            round += 1;
            continue;
        }
        ensure!(
            info.as_ref().is_some_and(|info| info.holder == holder
                && !info.is_expired()
                && info
                    .expires_at
                    .duration_since(info.taken_at)
                    .unwrap_or_default()
                    <= MIN_HOLD),
            "the minimum hold did not keep {lease} until taken_at + {MIN_HOLD:?}: {info:?}"
        );
        ensure_eq!(rival, None, "acquiring {lease} during its minimum hold");
        break (lease, other);
    };
    wait_until_expired(ctx, &*store, &lease).await?;
    let after_hold = store
        .try_acquire(&lease, &other, long_ttl())
        .await?
        .ok_or_else(|| {
            CaseFailure::new(format!("{lease} was still refused after its minimum hold"))
        })?;
    fences.push(after_hold);
    ensure!(
        fences.windows(2).all(|pair| pair[0] < pair[1]),
        "fences of {lease} across releases did not strictly increase: {fences:?}"
    );
    Ok(Verdict::Passed)
}
