//! This crate's own cases, beside the conformance suite: setup run twice and at once, which
//! the suite cannot reach (setup is not part of `LeaseStore`), and a pool whose sessions a
//! demotion left read-only (`lease_tests::read_only`), which needs the store's executor.

use futures::future::join_all;
use lease_core::{HolderId, LeaseName, LeaseStore, Ttl};
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
