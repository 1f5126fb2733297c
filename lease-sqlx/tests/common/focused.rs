//! This crate's own cases, beside the conformance suite: setup run twice and at once, which
//! the suite cannot reach (setup is not part of `LeaseStore`), a pool whose sessions a
//! demotion left read-only (`lease_tests::read_only`), which needs the store's executor, and a
//! release after the database's clock stepped back, which needs the table's rows moved by SQL.

use futures::future::join_all;
use lease_core::{HolderId, LeaseName, LeaseStore, Ttl};
use lease_sql::Dialect;
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
                setup_is_idempotent_and_concurrent,
                demoted_sessions_cost_no_call,
                a_release_after_the_clock_stepped_back_frees_the_lease,
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

/// `lease_tests::read_only::demoted_sessions_cost_no_call`.
pub async fn demoted_sessions_cost_no_call<DB: TestDb>(ctx: &Context<Backend<DB>>) -> CaseResult
where
    lease_sqlx::SqlxExecutor<DB>: lease_sqlx::Execute,
    Backend<DB>: TestBackend<Store = SqlxStore<DB>>,
{
    lease_tests::read_only::demoted_sessions_cost_no_call(ctx).await
}

/// A lease taken while the database's clock read an hour later than it reads now (an NTP step
/// back, a snapshot restored: here the row's times are moved an hour ahead instead): released
/// without a hold, as `leasectl release` and a shutdown do, it is free at once, not an hour on;
/// released with a hold, the hold counts from the release.
pub async fn a_release_after_the_clock_stepped_back_frees_the_lease<DB: TestDb>(
    ctx: &Context<Backend<DB>>,
) -> CaseResult
where
    lease_sqlx::SqlxExecutor<DB>: lease_sqlx::Execute,
    Backend<DB>: TestBackend<Store = SqlxStore<DB>>,
{
    let store = ctx.store().await?;
    let (sweep, mail) = (name("sweep"), name("mail-checks"));
    let (a, b) = (HolderId::generate(), HolderId::generate());
    for lease in [&sweep, &mail] {
        check!(
            store.try_acquire(lease, &a, secs(60)).await?.is_some(),
            "{lease} was taken"
        );
    }
    let table = store.table();
    let later = match store.statements().dialect() {
        Dialect::Postgres => "taken_at + interval '1 hour'",
        Dialect::MySql => "taken_at + INTERVAL 1 HOUR",
        // Milliseconds since the epoch.
        Dialect::Sqlite => "taken_at + 3600000",
        other => {
            return Err(CaseFailure::new(format!(
                "no clock step written for {other:?}"
            )));
        }
    };
    let expires = later.replace("taken_at", "expires_at");
    DB::execute(
        store.executor().pool(),
        format!("UPDATE {table} SET taken_at = {later}, expires_at = {expires}"),
    )
    .await?;

    check!(
        store.release(&sweep, &a, std::time::Duration::ZERO).await?,
        "the release of {sweep} matched nothing"
    );
    check!(
        store.try_acquire(&sweep, &b, secs(60)).await?.is_some(),
        "released without a hold, {sweep} stayed taken until the acquisition the clock reads an \
         hour ahead"
    );
    let hold = std::time::Duration::from_secs(5);
    check!(
        store.release(&mail, &a, hold).await?,
        "the release of {mail} matched nothing"
    );
    let info = store
        .inspect(&mail)
        .await?
        .ok_or_else(|| CaseFailure::new(format!("{mail} was freed despite its hold")))?;
    let held_for = info
        .expires_at
        .duration_since(info.observed_at)
        .unwrap_or_default();
    check!(
        held_for <= hold,
        "a hold of {hold:?} keeps {mail} {held_for:?} after the release: {info:?}"
    );
    Ok(Verdict::Passed)
}
