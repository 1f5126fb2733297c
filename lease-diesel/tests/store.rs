//! This crate's own cases, beside the conformance suite, for every database on both pool kinds:
//! setup run at once from many callers, a failed statement giving its connection back,
//! cancelled calls leaving a working pool, and a pool whose sessions a demotion left read-only
//! costing no call (`lease_tests::read_only`).

mod support;

use std::time::Duration;

use diesel_async::pooled_connection::{bb8, deadpool};
use diesel_async::{AsyncMysqlConnection, AsyncPgConnection};
use futures::future::join_all;
use lease_core::{Error, HolderId, LeaseName, LeaseStore, Operation, Ttl};
use lease_diesel::{AsyncSqliteConnection, DieselStore};
use lease_tests::{CaseFailure, CaseResult, Context, Verdict};
use support::{Backend, Database, MariaDb, Postgres, Sqlite, TestPool};

/// Fails the case with a message unless the condition holds.
macro_rules! check {
    ($condition:expr, $($message:tt)+) => {
        if !$condition {
            return Err(CaseFailure::new(format!($($message)+)));
        }
    };
}

/// One test per case for one database on one pool kind, on tokio.
macro_rules! cases {
    (mod $module:ident, $db:ty, $pool:ty) => {
        mod $module {
            use super::*;
            cases!(@each $db, $pool;
                setup_is_idempotent_and_concurrent,
                a_failed_statement_gives_its_connection_back,
                cancelled_calls_leave_a_working_pool,
                demoted_sessions_cost_no_call,
            );
        }
    };
    (@each $db:ty, $pool:ty; $($case:ident),+ $(,)?) => {
        $(
            #[test]
            fn $case() {
                lease_tests::run::tokio(
                    stringify!($case),
                    Backend::<$db, $pool>::new(),
                    |ctx| async move { super::$case(&*ctx).await },
                );
            }
        )+
    };
}

cases!(mod postgres_deadpool, Postgres, deadpool::Pool<AsyncPgConnection>);
cases!(mod postgres_bb8, Postgres, bb8::Pool<AsyncPgConnection>);
cases!(mod mariadb_deadpool, MariaDb, deadpool::Pool<AsyncMysqlConnection>);
cases!(mod mariadb_bb8, MariaDb, bb8::Pool<AsyncMysqlConnection>);
cases!(mod sqlite_deadpool, Sqlite, deadpool::Pool<AsyncSqliteConnection>);
cases!(mod sqlite_bb8, Sqlite, bb8::Pool<AsyncSqliteConnection>);

type Ctx<D, P> = Context<Backend<D, P>>;

fn name(text: &str) -> LeaseName {
    LeaseName::new(text).expect("a valid name")
}

fn secs(secs: u64) -> Ttl {
    Ttl::from_secs(secs).expect("a valid TTL")
}

/// `setup` twice in a row and eight times at once on a table that exists (the leases in it
/// stay), and eight times at once on a table that does not exist yet (where PostgreSQL, without
/// the setup's lock, fails on its catalog).
async fn setup_is_idempotent_and_concurrent<D, P>(ctx: &Ctx<D, P>) -> CaseResult
where
    D: Database,
    P: TestPool<Connection = D::Connection>,
    DieselStore<P>: LeaseStore,
{
    let store = ctx.store().await?;
    let lease = name("uptime:node-a");
    let holder = HolderId::generate();
    let fence = store.try_acquire(&lease, &holder, secs(60)).await?;
    store.setup().await?;
    for result in join_all((0..8).map(|_| store.setup())).await {
        result?;
    }
    let info = store.inspect(&lease).await?;
    check!(
        info.is_some_and(|info| Some(info.fence) == fence),
        "setup lost the lease"
    );

    let table = format!("{}_new", store.table());
    let fresh = DieselStore::with_table(store.pool().clone(), &table)?;
    let results = join_all((0..8).map(|_| fresh.setup())).await;
    let taken = fresh.try_acquire(&lease, &holder, secs(60)).await;
    Backend::<D, P>::drop_table(store.pool(), &table).await?;
    for result in results {
        result?;
    }
    check!(taken?.is_some(), "the new table does not take leases");
    Ok(Verdict::Passed)
}

/// On a pool of one connection, every operation on a table that does not exist fails with
/// `Error::Store` for itself, and the connection is back in the pool, idle and working.
async fn a_failed_statement_gives_its_connection_back<D, P>(ctx: &Ctx<D, P>) -> CaseResult
where
    D: Database,
    P: TestPool<Connection = D::Connection>,
    DieselStore<P>: LeaseStore,
{
    let Some(pooled) = ctx.pooled(1).await? else {
        return Err(CaseFailure::new("the backend has no pool"));
    };
    let pool = pooled.store().pool().clone();
    let missing = DieselStore::with_table(pool, "lease_diesel_no_such_table")?;
    let (lease, holder) = (name("sweep"), HolderId::generate());
    let pair = [(lease.clone(), holder.clone())];
    let outcomes = [
        (
            Operation::Acquire,
            missing.try_acquire(&lease, &holder, secs(1)).await.err(),
        ),
        (
            Operation::Renew,
            missing.renew(&lease, &holder, secs(1)).await.err(),
        ),
        (
            Operation::RenewMany,
            missing.renew_many(&pair, secs(1)).await.err(),
        ),
        (
            Operation::Release,
            missing.release(&lease, &holder, Duration::ZERO).await.err(),
        ),
        (Operation::Inspect, missing.inspect(&lease).await.err()),
        (Operation::List, missing.list().await.err()),
    ];
    for (operation, error) in outcomes {
        check!(
            matches!(
                &error,
                Some(Error::Store { operation: reported, .. }) if *reported == operation
            ),
            "{operation} on a missing table gave {error:?}"
        );
    }
    let stats = pooled.stats();
    check!(
        stats.size == 1 && stats.idle == 1,
        "the connection is not back in the pool: {stats:?}"
    );
    // The same connection still works for the real table.
    let taken = pooled
        .store()
        .try_acquire(&lease, &holder, secs(60))
        .await?;
    check!(taken.is_some(), "the pool's connection no longer works");
    pooled.probe().await?;
    Ok(Verdict::Passed)
}

/// `lease_tests::read_only::demoted_sessions_cost_no_call`.
async fn demoted_sessions_cost_no_call<D, P>(ctx: &Ctx<D, P>) -> CaseResult
where
    D: Database,
    P: TestPool<Connection = D::Connection>,
    DieselStore<P>: LeaseStore,
{
    lease_tests::read_only::demoted_sessions_cost_no_call(ctx).await
}

/// On a pool of one connection, calls dropped at every moment of their statement (as a timeout
/// around a renewal drops them) leave the pool's connection working: the next calls answer
/// correctly, and a write through the pool commits.
async fn cancelled_calls_leave_a_working_pool<D, P>(ctx: &Ctx<D, P>) -> CaseResult
where
    D: Database,
    P: TestPool<Connection = D::Connection>,
    DieselStore<P>: LeaseStore,
{
    let Some(pooled) = ctx.pooled(1).await? else {
        return Err(CaseFailure::new("the backend has no pool"));
    };
    let store = pooled.store();
    let mut held = Vec::new();
    for i in 0..200 {
        let (lease, holder) = (name(&format!("job-{i}")), HolderId::generate());
        check!(
            store
                .try_acquire(&lease, &holder, secs(60))
                .await?
                .is_some(),
            "job-{i} was refused in a fresh table"
        );
        held.push((lease, holder));
    }
    for round in 0..30u64 {
        // From before the connection is taken to while the rows come back.
        let cut = Duration::from_micros(round * round * 20);
        let _ = tokio::time::timeout(cut, store.renew_many(&held, secs(60))).await;
        let _ = tokio::time::timeout(cut, store.list()).await;
        let (lease, holder) = &held[round as usize];
        check!(
            store.renew(lease, holder, secs(60)).await?,
            "round {round}: a renewal after a cancelled call failed"
        );
        let stranger = store
            .try_acquire(lease, &HolderId::generate(), secs(60))
            .await?;
        check!(
            stranger.is_none(),
            "round {round}: a held lease was taken after a cancelled call"
        );
    }
    let renewed = store.renew_many(&held, secs(60)).await?;
    check!(
        renewed.iter().all(|renewed| *renewed),
        "leases were lost: {renewed:?}"
    );
    check!(
        store.list().await?.len() == held.len(),
        "list lost leases after cancelled calls"
    );
    pooled.probe().await?;
    Ok(Verdict::Passed)
}

#[test]
fn debug_shows_no_url_or_password() {
    let manager =
        diesel_async::pooled_connection::AsyncDieselConnectionManager::<AsyncPgConnection>::new(
            "postgres://app:s3cret-pw@db.internal:5432/app",
        );
    let pool = deadpool::Pool::builder(manager)
        .max_size(2)
        .build()
        .unwrap();
    let store = DieselStore::with_table(pool, "jobs.leases").unwrap();
    let debug = format!("{store:?}");
    assert!(
        debug.contains("postgres") && debug.contains("deadpool"),
        "{debug}"
    );
    assert!(debug.contains("jobs.leases"), "{debug}");
    for secret in ["s3cret", "db.internal", "app@"] {
        assert!(!debug.contains(secret), "{debug} shows {secret}");
    }
}

#[test]
fn invalid_table_names_are_refused_before_any_connection() {
    let pool = deadpool::Pool::builder(lease_diesel::sqlite_manager("unused.sqlite3"))
        .max_size(1)
        .build()
        .unwrap();
    let store = lease_tests::table_names::assert_invalid_table_names_refused(|table| {
        DieselStore::with_table(pool.clone(), table)
    });
    assert_eq!(store.table().to_string(), "main.Leases_2");
    assert!(
        store
            .statements()
            .list()
            .sql()
            .contains("\"main\".\"Leases_2\"")
    );
    assert_eq!(
        pool.status().size,
        0,
        "validating a name opened a connection"
    );
}

/// `sqlite_manager` opens every connection in write-ahead-log mode with the busy timeout, on the
/// bundled SQLite (which has `unixepoch('subsec')`, 3.42 and later).
#[tokio::test]
async fn sqlite_manager_sets_wal_and_the_busy_timeout_on_the_bundled_sqlite() {
    use diesel::dsl::sql;
    use diesel::sql_types::{BigInt, Text};
    use diesel_async::RunQueryDsl;

    let table = lease_tests::env::unique_table("lease_diesel");
    let pool = bb8::Pool::builder()
        .max_size(2)
        .build(lease_diesel::sqlite_manager(Sqlite::url(&table)))
        .await
        .unwrap();
    let mut connection = pool.get().await.unwrap();
    let mode: String = diesel::select(sql::<Text>(
        "(SELECT journal_mode FROM pragma_journal_mode)",
    ))
    .get_result(&mut *connection)
    .await
    .unwrap();
    assert_eq!(mode, "wal");
    let timeout: i64 = diesel::select(sql::<BigInt>("(SELECT timeout FROM pragma_busy_timeout)"))
        .get_result(&mut *connection)
        .await
        .unwrap();
    assert_eq!(
        u128::try_from(timeout).unwrap(),
        lease_diesel::SQLITE_BUSY_TIMEOUT.as_millis()
    );
    let version: String = diesel::select(sql::<Text>("sqlite_version()"))
        .get_result(&mut *connection)
        .await
        .unwrap();
    let minor: u32 = version.split('.').nth(1).unwrap().parse().unwrap();
    assert!(minor >= 42, "SQLite {version} has no unixepoch('subsec')");
    drop(connection);
    drop(pool);
    Sqlite::remove_files(&table);
}
