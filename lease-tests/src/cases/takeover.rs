//! One winner on every takeover: callers racing for a lease that lapsed or was released find
//! exactly one winner, as they do for a lease never taken.

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use lease_core::{Fence, HolderId, LeaseStore};

use super::{long_ttl, name, wait_until_expired};
use crate::failure::{ensure, ensure_eq};
use crate::{CaseResult, Context, TestBackend, Verdict};

/// How many callers race in each round.
const CONTENDERS: usize = 32;
/// How many rounds: the first on a name never taken, then takeovers of a lapsed and of a
/// released lease in turn.
const ROUNDS: usize = 5;

/// 32 callers race for a lease that has no row yet, then, round after round, for the same
/// lease once its holder let it lapse or released it (the takeover paths, where MariaDB tells
/// the winner from `RETURNING`): exactly one wins each round, with a higher fence than the
/// round before, and `inspect` names the winner. The contenders ask for a long TTL, so however
/// slowly the store serves them, nobody may win a second time in one round.
///
/// # Errors
/// A [`CaseFailure`](crate::CaseFailure) when a round has no winner or more than one, the winner's
/// fence is not above the last round's, `inspect` does not name the winner with its fence, or no
/// round took over a lapsed row (a release with a hold freed it at once every time), and,
/// [as any case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, the racing calls go with
/// it, as they run on the case's own task, and `sweep` stays held by the last winner until its TTL
/// runs out: a minute, or about 500 ms once released with a short hold for the next round.
pub async fn one_winner_on_every_takeover<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let store = ctx.store().await?;
    let lease = name("sweep");
    let mut last = Fence::new(0);
    // Whether this round takes over a lapsed row (its holder still named), and how many did: a
    // release with a hold that reached the store after the hold ended frees the row at once,
    // so on a slow machine a lapse round can turn into a release round; up to four more rounds
    // make sure the lapsed path ran at least once.
    let (mut lapsed_row, mut lapsed_takeovers) = (false, 0);
    let mut round = 0;
    while round < ROUNDS || (lapsed_takeovers == 0 && round < ROUNDS + 4) {
        let holders: Vec<HolderId> = (0..CONTENDERS).map(|_| HolderId::generate()).collect();
        let attempts = join_all(holders.iter().map(|holder| {
            let (store, lease) = (Arc::clone(&store), lease.clone());
            async move { store.try_acquire(&lease, holder, long_ttl()).await }
        }))
        .await;
        let mut winners = Vec::new();
        for (holder, attempt) in holders.iter().zip(attempts) {
            if let Some(fence) = attempt? {
                winners.push((holder.clone(), fence));
            }
        }
        ensure_eq!(
            winners.len(),
            1,
            "round {round}: winners among {CONTENDERS} contenders for {lease} ({winners:?})"
        );
        let (winner, fence) = &winners[0];
        ensure!(
            *fence > last,
            "round {round}: the winner's fence {fence} is not above the last round's {last}"
        );
        last = *fence;
        lapsed_takeovers += usize::from(std::mem::take(&mut lapsed_row));
        let info = store.inspect(&lease).await?;
        // How long the winner has held it, by the store's clock.
        let held_for = info
            .as_ref()
            .and_then(|info| info.observed_at.duration_since(info.taken_at).ok())
            .unwrap_or_default();
        ensure_eq!(
            info.map(|info| (info.holder, info.fence)),
            Some((winner.clone(), *fence)),
            "round {round}: holder and fence of {lease} after the race"
        );
        // Free it for the next round: by letting it lapse (the takeover of an expired lease
        // whose row still names its holder: released with a minimum hold that ends 500 ms
        // after the store's time of the inspect above, so the release keeps the holder) or by
        // releasing it (the takeover of a released row).
        if round % 2 == 0 {
            let hold = held_for + Duration::from_millis(500);
            ensure!(
                store.release(&lease, winner, hold).await?,
                "round {round}: the winner could not release {lease} with a hold of {hold:?}"
            );
            // A release that reached the store after the hold ended freed the row at once: the
            // next round then takes over a released row, as the odd rounds do.
            if store.inspect(&lease).await?.is_some() {
                lapsed_row = true;
                wait_until_expired(ctx, &*store, &lease).await?;
            }
        } else {
            ensure!(
                store
                    .release(&lease, winner, std::time::Duration::ZERO)
                    .await?,
                "round {round}: the winner could not release {lease}"
            );
        }
        round += 1;
    }
    ensure!(
        lapsed_takeovers > 0,
        "in {round} rounds no release with a hold kept {lease}'s holder named until the next \
         round: the takeover of a lapsed row never ran"
    );
    Ok(Verdict::Passed)
}
