//! One holder: of many callers racing for one name, exactly one wins.

use std::sync::Arc;

use lease_core::{HolderId, LeaseStore};

use super::{concurrently, long_ttl, name};
use crate::failure::{ensure, ensure_eq};
use crate::{CaseFailure, CaseResult, Context, TestBackend, Verdict};

/// How many callers race for one name.
const CONTENDERS: usize = 32;
/// How many names they race for, one after another, to give a race more chances to show.
const ROUNDS: usize = 4;

/// 32 concurrent callers of `try_acquire` on one name: exactly one gets a fence, every other
/// gets `None`, and `inspect` names the winner.
///
/// # Errors
/// A [`CaseFailure`] when a round has no winner or more than one, `inspect` does not name the
/// winner with its fence, unexpired, or a contender's task panicked, and, [as any
/// case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety), and more: each round's 32
/// contenders run as tasks of their own on the runtime, so, dropped during a race, they run on
/// until the store answers them (each keeping the store alive until then), and the winner keeps its
/// lease until its TTL of a minute runs out.
pub async fn one_holder_among_contenders<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let store = ctx.store().await?;
    for round in 0..ROUNDS {
        let name = name(&format!("sweep-{round}"));
        let holders: Vec<HolderId> = (0..CONTENDERS).map(|_| HolderId::generate()).collect();
        let attempts = holders
            .iter()
            .map(|holder| {
                let (store, name, holder) = (Arc::clone(&store), name.clone(), holder.clone());
                async move { store.try_acquire(&name, &holder, long_ttl()).await }
            })
            .collect();
        let mut winners = Vec::new();
        for (holder, outcome) in holders.iter().zip(concurrently(ctx, attempts).await?) {
            if let Some(fence) = outcome? {
                winners.push((holder.clone(), fence));
            }
        }
        ensure_eq!(
            winners.len(),
            1,
            "winners among {CONTENDERS} concurrent contenders for {name} ({winners:?})"
        );
        let (winner, fence) = &winners[0];
        let info = store.inspect(&name).await?.ok_or_else(|| {
            CaseFailure::new(format!(
                "inspect({name}) reported nothing after {winner} took it"
            ))
        })?;
        ensure_eq!(info.holder, *winner, "holder of {name} after the race");
        ensure_eq!(info.fence, *fence, "fence of {name} after the race");
        ensure!(
            !info.is_expired(),
            "{name} was reported expired right after it was taken for {:?}: {info:?}",
            long_ttl()
        );
    }
    Ok(Verdict::Passed)
}
