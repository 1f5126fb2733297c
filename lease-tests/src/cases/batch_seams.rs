//! `renew_many` across batches: an exact answer at the seams, for repeats, strangers and
//! leases lost in any batch.

use std::collections::HashSet;

use lease_core::{HolderId, LeaseStore, Ttl};

use super::{long_ttl, name, wait_until_expired};
use crate::failure::{ensure, ensure_eq};
use crate::{CaseResult, Context, TestBackend, Verdict};

/// More leases than one statement's batch in the SQL stores (1,000 pairs at most).
const LEASES: usize = 1_200;
/// Leases lost to a takeover, spread over the batches: the first, one in the middle, a pair at
/// a seam of 500-pair batches, the last.
const TAKEN_OVER: [usize; 5] = [0, 3, 750, 751, 1_199];

/// Renew-many over more leases than one batch, with repeats, a name never taken, a stranger and
/// a stale holder of held leases, and leases lost to expiry and to takeover spread across the
/// batches: the answer is exact, in input order; the held leases were extended, keeping their
/// fence; a lapsed one was not revived. An empty call answers nothing.
///
/// # Errors
/// A [`CaseFailure`](crate::CaseFailure) when `renew_many` answers a wrong list across the batches,
/// does not extend a held lease or changes its fence, or revives a lapsed one, and, [as any
/// case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, the 1,200 leases it took
/// stay held until their TTL runs out: a minute, or two once the large call renewed them.
pub async fn renew_many_across_batches_duplicates_and_losses<B: TestBackend>(
    ctx: &Context<B>,
) -> CaseResult {
    let store = ctx.store().await?;
    let short = Ttl::from_millis(400)?;
    // Lost: every 97th lapses (taken with a short TTL), and these are taken over once they
    // lapsed.
    let taken_over: HashSet<usize> = TAKEN_OVER.into_iter().collect();
    let lost: HashSet<usize> = (0..LEASES)
        .filter(|i| i % 97 == 0 || taken_over.contains(i))
        .collect();
    let mut leases = Vec::with_capacity(LEASES);
    for i in 0..LEASES {
        let lease = name(&format!("job:{i:04}"));
        let holder = HolderId::generate();
        let ttl = if lost.contains(&i) { short } else { long_ttl() };
        ensure!(
            store.try_acquire(&lease, &holder, ttl).await?.is_some(),
            "{lease} was refused in a fresh store"
        );
        leases.push((lease, holder));
    }
    // The last one taken with a short TTL lapses last.
    let last = lost.iter().max().expect("some leases are lost");
    wait_until_expired(ctx, &*store, &leases[*last].0).await?;
    for &i in &TAKEN_OVER {
        let (lease, _) = &leases[i];
        ensure!(
            store
                .try_acquire(lease, &HolderId::generate(), long_ttl())
                .await?
                .is_some(),
            "the lapsed {lease} could not be taken over"
        );
    }

    let mut request = leases.clone();
    request.push(leases[3].clone());
    request.push(leases[10].clone());
    request.push(leases[750].clone());
    request.push((name("never-taken"), HolderId::generate()));
    request.push((leases[5].0.clone(), HolderId::generate()));
    request.push(leases[0].clone());
    request.push(leases[1].clone());

    let before = store.inspect(&leases[1].0).await?;
    let renewed = store.renew_many(&request, Ttl::from_secs(120)?).await?;
    let expected: Vec<bool> = request
        .iter()
        .map(|(lease, holder)| {
            leases
                .iter()
                .position(|(l, h)| l == lease && h == holder)
                .is_some_and(|i| !lost.contains(&i))
        })
        .collect();
    ensure_eq!(
        renewed.len(),
        request.len(),
        "answers of renew_many for {} pairs",
        request.len()
    );
    let wrong: Vec<usize> = (0..request.len())
        .filter(|&i| renewed[i] != expected[i])
        .collect();
    ensure!(
        wrong.is_empty(),
        "renew_many of {} pairs answered wrongly at positions {wrong:?}",
        request.len()
    );
    let after = store.inspect(&leases[1].0).await?;
    ensure!(
        matches!((&before, &after), (Some(b), Some(a)) if a.expires_at > b.expires_at && a.fence == b.fence),
        "renew_many did not extend {} (or changed its fence): {before:?} then {after:?}",
        leases[1].0
    );
    let lapsed = store.inspect(&leases[97].0).await?;
    ensure!(
        lapsed.as_ref().is_some_and(|info| info.is_expired()),
        "renew_many revived the lapsed {}: {lapsed:?}",
        leases[97].0
    );
    ensure_eq!(
        store.renew_many(&[], Ttl::from_secs(1)?).await?,
        Vec::<bool>::new(),
        "renew_many of no leases"
    );
    Ok(Verdict::Passed)
}
