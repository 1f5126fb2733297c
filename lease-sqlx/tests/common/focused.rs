//! This crate's own cases, beside the conformance suite: the statements' edges per database
//! (contended takeover, MariaDB's winner detection, renew-many across batches and losses,
//! byte-exact names, setup run twice and at once).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use lease_core::{Fence, HolderId, LeaseName, LeaseStore, Ttl};
use lease_sqlx::SqlxStore;
use lease_tests::{CaseFailure, CaseResult, Context, TestBackend, Verdict};

use super::{Backend, TestDb};

/// Fails the case with a message unless the condition holds.
macro_rules! check {
    ($condition:expr, $($message:tt)+) => {
        if !$condition {
            return Err(CaseFailure::new(format!($($message)+)));
        }
    };
}

/// One test per case below, on the named runtime.
#[macro_export]
macro_rules! focused_suite {
    (mod $module:ident, runtime = $runtime:ident, backend = $backend:expr $(,)?) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            $crate::focused_suite!(@cases $runtime, $backend;
                thirty_two_contenders_one_winner_also_on_takeover,
                same_holder_cannot_take_its_own_lease_twice,
                fences_keep_counting_across_releases,
                renew_many_across_batches_duplicates_and_losses,
                names_are_byte_exact_and_listed_in_byte_order,
                setup_is_idempotent_and_concurrent,
            );
        }
    };
    (@cases $runtime:ident, $backend:expr; $($case:ident),+ $(,)?) => {
        $(
            #[test]
            fn $case() {
                lease_tests::run::$runtime(stringify!($case), $backend, |ctx| async move {
                    common::focused::$case(&*ctx).await
                });
            }
        )+
    };
}

fn name(text: &str) -> LeaseName {
    LeaseName::new(text).expect("a valid name")
}

fn secs(secs: u64) -> Ttl {
    Ttl::from_secs(secs).expect("a valid TTL")
}

/// 32 callers race for a lease that has no row yet, then, round after round, for the same
/// lease once its holder let it lapse or released it (the takeover paths, where MariaDB tells
/// the winner from `RETURNING`): exactly one wins each round, with the next fence, and the row
/// names the winner. The contenders ask for a long TTL, so however slowly the pool hands out
/// connections, nobody may win a second time in one round.
pub async fn thirty_two_contenders_one_winner_also_on_takeover<DB: TestDb>(
    ctx: &Context<Backend<DB>>,
) -> CaseResult
where
    lease_sqlx::SqlxExecutor<DB>: lease_sqlx::Execute,
    Backend<DB>: TestBackend<Store = SqlxStore<DB>>,
{
    let store = ctx.store().await?;
    let lease = name("sweep");
    let mut last = Fence::new(0);
    for round in 0..5 {
        let holders: Vec<HolderId> = (0..32).map(|_| HolderId::generate()).collect();
        let attempts = join_all(holders.iter().map(|holder| {
            let store = Arc::clone(&store);
            let lease = lease.clone();
            async move { store.try_acquire(&lease, holder, secs(60)).await }
        }))
        .await;
        let mut winners = Vec::new();
        for (holder, attempt) in holders.iter().zip(attempts) {
            if let Some(fence) = attempt? {
                winners.push((holder.clone(), fence));
            }
        }
        check!(
            winners.len() == 1,
            "round {round}: {} of 32 contenders won: {winners:?}",
            winners.len()
        );
        let (winner, fence) = &winners[0];
        check!(*fence > last, "round {round}: fence {fence} after {last}");
        last = *fence;
        let info = store.inspect(&lease).await?;
        check!(
            info.as_ref()
                .is_some_and(|info| info.holder == *winner && info.fence == *fence),
            "round {round}: the row does not name the winner: {info:?}"
        );
        // Free it for the next round: by letting it lapse (takeover of an expired lease) or by
        // releasing it (takeover of a released row).
        if round % 2 == 0 {
            check!(
                store.renew(&lease, winner, Ttl::from_millis(200)?).await?,
                "round {round}: the winner could not renew"
            );
            ctx.sleep(Duration::from_millis(300)).await;
        } else {
            check!(
                store.release(&lease, winner, Duration::ZERO).await?,
                "round {round}: the winner could not release"
            );
        }
    }
    Ok(Verdict::Passed)
}

/// A holder that holds a lease gets `None` when it tries to take it again, like anybody else,
/// and its lease is unchanged (MariaDB: the upsert touches no column).
pub async fn same_holder_cannot_take_its_own_lease_twice<DB: TestDb>(
    ctx: &Context<Backend<DB>>,
) -> CaseResult
where
    lease_sqlx::SqlxExecutor<DB>: lease_sqlx::Execute,
    Backend<DB>: TestBackend<Store = SqlxStore<DB>>,
{
    let store = ctx.store().await?;
    let lease = name("alerts");
    let holder = HolderId::generate();
    let fence = store.try_acquire(&lease, &holder, secs(60)).await?;
    check!(fence == Some(Fence::new(1)), "a fresh lease gave {fence:?}");
    let before = store.inspect(&lease).await?;
    ctx.sleep(Duration::from_millis(5)).await;
    let again = store.try_acquire(&lease, &holder, secs(600)).await?;
    check!(again.is_none(), "taking a held lease again gave {again:?}");
    let after = store.inspect(&lease).await?;
    check!(
        before.as_ref().map(|i| (i.fence, i.taken_at, i.expires_at))
            == after.as_ref().map(|i| (i.fence, i.taken_at, i.expires_at)),
        "a refused acquisition changed the lease: {before:?} then {after:?}"
    );
    Ok(Verdict::Passed)
}

/// Long enough that a busy machine cannot let it pass between the release and the next try.
const MIN_HOLD: Duration = Duration::from_millis(1500);

/// Release keeps the row, so fences go on counting: acquire, release, acquire by another, with
/// and without a minimum hold, and the minimum hold keeps others out until it ends.
pub async fn fences_keep_counting_across_releases<DB: TestDb>(
    ctx: &Context<Backend<DB>>,
) -> CaseResult
where
    lease_sqlx::SqlxExecutor<DB>: lease_sqlx::Execute,
    Backend<DB>: TestBackend<Store = SqlxStore<DB>>,
{
    let store = ctx.store().await?;
    let lease = name("mail-checks");
    let mut seen = Vec::new();
    for _ in 0..5 {
        let holder = HolderId::generate();
        let fence = store.try_acquire(&lease, &holder, secs(60)).await?;
        let fence = fence.ok_or_else(|| CaseFailure::new("a released lease was refused"))?;
        seen.push(fence.get());
        check!(
            store.release(&lease, &holder, Duration::ZERO).await?,
            "the holder could not release"
        );
        check!(
            !store.release(&lease, &holder, Duration::ZERO).await?,
            "a second release matched a row"
        );
        check!(
            store.inspect(&lease).await?.is_none(),
            "a released lease is still listed"
        );
    }
    check!(seen == [1, 2, 3, 4, 5], "fences across releases: {seen:?}");

    let holder = HolderId::generate();
    store.try_acquire(&lease, &holder, secs(60)).await?;
    check!(
        store.release(&lease, &holder, MIN_HOLD).await?,
        "release with a minimum hold did not match"
    );
    let held = store.inspect(&lease).await?;
    check!(
        held.as_ref().is_some_and(|info| info.holder == holder
            && !info.is_expired()
            && info
                .expires_at
                .duration_since(info.taken_at)
                .unwrap_or_default()
                <= MIN_HOLD),
        "the minimum hold did not keep the lease until taken_at + {MIN_HOLD:?}: {held:?}"
    );
    let other = HolderId::generate();
    check!(
        store.try_acquire(&lease, &other, secs(60)).await?.is_none(),
        "the lease was taken during its minimum hold"
    );
    ctx.sleep(MIN_HOLD + Duration::from_millis(200)).await;
    let fence = store.try_acquire(&lease, &other, secs(60)).await?;
    check!(
        fence == Some(Fence::new(7)),
        "after the minimum hold: {fence:?}"
    );
    Ok(Verdict::Passed)
}

/// Renew-many over more leases than one batch (1,000 on MariaDB and SQLite), with repeats, a
/// name never taken, a stale holder, and leases lost to expiry and takeover spread across the
/// batches: the answer is exact, in input order, and only the held leases were extended.
pub async fn renew_many_across_batches_duplicates_and_losses<DB: TestDb>(
    ctx: &Context<Backend<DB>>,
) -> CaseResult
where
    lease_sqlx::SqlxExecutor<DB>: lease_sqlx::Execute,
    Backend<DB>: TestBackend<Store = SqlxStore<DB>>,
{
    let store = ctx.store().await?;
    let short = Ttl::from_millis(400)?;
    let mut leases = Vec::new();
    for i in 0..1_200 {
        let lease = name(&format!("job:{i}"));
        let holder = HolderId::generate();
        // Every 97th lease gets a short TTL and will have lapsed by the renewal.
        let ttl = if i % 97 == 0 { short } else { secs(60) };
        check!(
            store.try_acquire(&lease, &holder, ttl).await?.is_some(),
            "{lease} was refused in a fresh table"
        );
        leases.push((lease, holder));
    }
    ctx.sleep(short.get() + Duration::from_millis(100)).await;
    // Some lapsed ones are taken over by somebody else, the rest just lapse.
    for (i, (lease, _)) in leases.iter().enumerate() {
        if i % 194 == 0 {
            store
                .try_acquire(lease, &HolderId::generate(), secs(60))
                .await?;
        }
    }
    let mut request = leases.clone();
    request.push(leases[3].clone());
    request.push((name("never-taken"), HolderId::generate()));
    request.push((leases[5].0.clone(), HolderId::generate()));
    request.push(leases[0].clone());

    let before = store.inspect(&leases[1].0).await?;
    let renewed = store.renew_many(&request, secs(120)).await?;
    let expected: Vec<bool> = request
        .iter()
        .map(|(lease, holder)| {
            leases
                .iter()
                .position(|(l, h)| l == lease && h == holder)
                .is_some_and(|i| i % 97 != 0)
        })
        .collect();
    check!(
        renewed.len() == request.len(),
        "{} answers for {} pairs",
        renewed.len(),
        request.len()
    );
    let wrong: Vec<usize> = (0..request.len())
        .filter(|&i| renewed[i] != expected[i])
        .collect();
    check!(wrong.is_empty(), "renew-many answered wrongly at {wrong:?}");
    let after = store.inspect(&leases[1].0).await?;
    check!(
        matches!((&before, &after), (Some(b), Some(a)) if a.expires_at > b.expires_at && a.fence == b.fence),
        "a renewed lease was not extended: {before:?} then {after:?}"
    );
    let lapsed = store.inspect(&leases[97].0).await?;
    check!(
        lapsed.as_ref().is_some_and(|info| info.is_expired()),
        "a lapsed lease was revived by renew-many: {lapsed:?}"
    );
    check!(
        store.renew_many(&[], secs(1)).await?.is_empty(),
        "renew-many of nothing answered something"
    );
    Ok(Verdict::Passed)
}

/// Names are compared byte for byte (no case folding, no trailing-space padding, which a
/// MariaDB collation would do) and listed in byte order, as the memory store lists them.
pub async fn names_are_byte_exact_and_listed_in_byte_order<DB: TestDb>(
    ctx: &Context<Backend<DB>>,
) -> CaseResult
where
    lease_sqlx::SqlxExecutor<DB>: lease_sqlx::Execute,
    Backend<DB>: TestBackend<Store = SqlxStore<DB>>,
{
    let store = ctx.store().await?;
    let texts = [
        "a",
        "A",
        "a ",
        "A ",
        "é",
        "e\u{301}",
        "Z",
        "z",
        "_",
        "it's \"quoted\" \\ `back`",
        "'; DROP TABLE leases; --",
        "🔒 $1 ?1 ? %s",
    ];
    for text in texts {
        let fence = store
            .try_acquire(&name(text), &HolderId::generate(), secs(60))
            .await?;
        check!(
            fence == Some(Fence::new(1)),
            "{text:?} was not a new lease: {fence:?}"
        );
    }
    let listed: Vec<String> = store
        .list()
        .await?
        .into_iter()
        .map(|info| info.name.as_str().to_owned())
        .collect();
    let mut expected: Vec<String> = texts.iter().map(|t| (*t).to_owned()).collect();
    expected.sort();
    check!(
        listed == expected,
        "listed {listed:?}, expected {expected:?}"
    );
    let distinct: HashSet<&String> = listed.iter().collect();
    check!(distinct.len() == texts.len(), "names collapsed: {listed:?}");
    Ok(Verdict::Passed)
}

/// Setup runs again on an existing table without harm, and four setups at once on a new
/// table all succeed (PostgreSQL's catalog would otherwise fail one of them).
pub async fn setup_is_idempotent_and_concurrent<DB: TestDb>(
    ctx: &Context<Backend<DB>>,
) -> CaseResult
where
    lease_sqlx::SqlxExecutor<DB>: lease_sqlx::Execute,
    Backend<DB>: TestBackend<Store = SqlxStore<DB>>,
{
    let store = ctx.store().await?;
    let lease = name("uptime:node-a");
    let holder = HolderId::generate();
    store.try_acquire(&lease, &holder, secs(60)).await?;
    DB::setup(&store).await?;
    check!(
        store
            .inspect(&lease)
            .await?
            .is_some_and(|info| info.holder == holder),
        "setup on an existing table lost its rows"
    );

    let table = lease_tests::env::unique_table("lease_sqlx_setup");
    let stores: Vec<SqlxStore<DB>> = (0..4)
        .map(|_| SqlxStore::with_table(store.executor().clone(), &table))
        .collect::<Result<_, _>>()?;
    let results = join_all(stores.iter().map(|s| DB::setup(s))).await;
    let drop = DB::execute(store.executor().pool(), format!("DROP TABLE {table}")).await;
    for result in results {
        result?;
    }
    drop.map_err(|e| CaseFailure::new(format!("dropping {table}: {e}")))?;
    Ok(Verdict::Passed)
}
