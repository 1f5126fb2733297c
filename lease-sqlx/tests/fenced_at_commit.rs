//! The suite's fenced cases with the check at the commit (`lease_sqlx::commit_fenced`), on every
//! database: what the conformance suites run with the check at the start, and the two cases
//! that tell the two apart.
#![cfg(all(feature = "postgres", feature = "mysql", feature = "sqlite"))]

mod common;

use common::Backend;
use common::fenced::{Check, Expect, expect};
use lease_sqlx::sqlx::{MySql, Postgres, Sqlite};
use lease_tests::cases;

/// One test per database for `case`, with fenced writes checked at their commit.
macro_rules! at_commit {
    ($case:ident) => {
        mod $case {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let backend = Backend::<Postgres>::plain().checking("postgres", Check::AtCommit);
                expect(backend, Expect::Pass, |ctx| async move {
                    cases::$case(&*ctx).await
                })
                .await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn mariadb() {
                let backend = Backend::<MySql>::plain().checking("mariadb", Check::AtCommit);
                expect(backend, Expect::Pass, |ctx| async move {
                    cases::$case(&*ctx).await
                })
                .await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let backend = Backend::<Sqlite>::plain().checking("sqlite", Check::AtCommit);
                expect(backend, Expect::Pass, |ctx| async move {
                    cases::$case(&*ctx).await
                })
                .await;
            }
        }
    };
}

at_commit!(fenced_write_commits_while_held);
at_commit!(expired_lease_fails_fenced_check);
at_commit!(freed_lease_fails_fenced_check);
at_commit!(stale_fenced_write_commits_nothing);
at_commit!(takeover_during_fenced_work_commits_nothing);
at_commit!(renewal_goes_on_during_fenced_work);
at_commit!(fenced_work_spans_a_renewal);

/// On PostgreSQL connections whose transactions are `SERIALIZABLE` by default, the check with the
/// commit cannot tell a lease held from one gone: it is refused before it runs, naming the
/// level, nothing commits, and the lease stays held (it is not marked lost).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_fenced_under_a_snapshot_is_refused_and_costs_no_lease() {
    use lease_sqlx::runtime::TokioRuntime;
    use lease_sqlx::{Error, LeaseClient, SnapshotIsolation, StoreErrorKind};
    use lease_tests::{TestBackend, env};

    let backend = Backend::<Postgres>::plain().serializable("postgres-serializable");
    if let Err(why) = backend.available().await {
        return env::skip_or_fail("postgres-serializable", &why.to_string());
    }
    let (fresh, pool, table) = backend.fresh(2).await.unwrap();
    let notices = format!("{table}_notices");
    lease_sqlx::sqlx::raw_sql(lease_sqlx::sqlx::AssertSqlSafe(format!(
        "CREATE TABLE {notices} (value BIGINT NOT NULL)"
    )))
    .execute(&pool)
    .await
    .unwrap();
    let store = fresh.store().clone();
    let client = LeaseClient::new(store.clone(), TokioRuntime);
    let guard = client.try_acquire("notify").await.unwrap().unwrap();

    let mut tx = pool.begin().await.unwrap();
    lease_sqlx::sqlx::raw_sql(lease_sqlx::sqlx::AssertSqlSafe(format!(
        "INSERT INTO {notices} (value) VALUES (1)"
    )))
    .execute(&mut *tx)
    .await
    .unwrap();
    let error = lease_sqlx::commit_fenced(&store, tx, &guard)
        .await
        .expect_err("a check with the commit under a snapshot went through");
    assert_eq!(error.store_error_kind(), Some(StoreErrorKind::Permanent));
    let Error::Store { source, .. } = &error else {
        panic!("not a store error: {error}");
    };
    let refusal = source
        .downcast_ref::<SnapshotIsolation>()
        .unwrap_or_else(|| panic!("not the snapshot's refusal: {error}"));
    assert_eq!(refusal.level(), "serializable");
    let chain = lease_sqlx::ErrorChain(&error).to_string();
    assert!(
        chain.contains("READ COMMITTED") && chain.contains("SERIALIZABLE"),
        "the message does not say what the check needs: {chain}"
    );
    assert!(guard.is_held(), "the refusal cost the lease");
    let (count,): (i64,) = lease_sqlx::sqlx::query_as(lease_sqlx::sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM {notices}"
    )))
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(count, 0, "the refused transaction committed its write");
    guard.release().await.unwrap();
    fresh.teardown().await.unwrap();
}

/// `commit_fenced` given a nested transaction (a savepoint, from `tx.begin()`) refuses it
/// before anything is sent: its `COMMIT` would have committed the transaction around it too.
/// The outer transaction's write stays uncommitted (read from another connection while it is
/// still open, and after it is rolled back), and the lease stays held. An outermost one whose
/// savepoint was just dropped is committed.
async fn a_nested_transaction_is_refused<DB>(backend: Backend<DB>, name: &str)
where
    DB: common::TestDb,
    lease_sqlx::SqlxExecutor<DB>:
        lease_sqlx::Execute + for<'c> lease_sqlx::ExecuteOn<&'c mut DB::Connection>,
    for<'c> &'c mut DB::Connection: lease_sqlx::sqlx::Executor<'c, Database = DB>,
    for<'c> &'c lease_sqlx::sqlx::Pool<DB>: lease_sqlx::sqlx::Executor<'c, Database = DB>,
    DB::Arguments: lease_sqlx::sqlx::IntoArguments<DB>,
    (i64,): for<'r> lease_sqlx::sqlx::FromRow<'r, DB::Row>,
{
    use lease_sqlx::runtime::TokioRuntime;
    use lease_sqlx::sqlx::{AssertSqlSafe, Connection, raw_sql};
    use lease_sqlx::{Error, LeaseClient, NestedTransaction, StoreErrorKind};
    use lease_tests::{TestBackend, env};

    if let Err(why) = backend.available().await {
        return env::skip_or_fail(name, &why.to_string());
    }
    let (fresh, pool, table) = backend.fresh(3).await.unwrap();
    let notices = format!("{table}_notices");
    raw_sql(AssertSqlSafe(format!(
        "CREATE TABLE {notices} (value BIGINT NOT NULL)"
    )))
    .execute(&pool)
    .await
    .unwrap();
    let count = |pool: lease_sqlx::sqlx::Pool<DB>| {
        let sql = format!("SELECT count(*) FROM {notices}");
        async move {
            let (count,): (i64,) = lease_sqlx::sqlx::query_as(AssertSqlSafe(sql))
                .fetch_one(&pool)
                .await
                .unwrap();
            count
        }
    };
    let store = fresh.store().clone();
    let client = LeaseClient::new(store.clone(), TokioRuntime);
    let guard = client.try_acquire("notify").await.unwrap().unwrap();

    let mut conn = pool.acquire().await.unwrap();
    let mut outer = conn.begin().await.unwrap();
    raw_sql(AssertSqlSafe(format!(
        "INSERT INTO {notices} (value) VALUES (1)"
    )))
    .execute(&mut *outer)
    .await
    .unwrap();
    let nested = outer.begin().await.unwrap();
    let error = lease_sqlx::commit_fenced(&store, nested, &guard)
        .await
        .expect_err("a nested transaction was committed");
    assert_eq!(error.store_error_kind(), Some(StoreErrorKind::Permanent));
    let Error::Store { source, .. } = &error else {
        panic!("not a store error: {error}");
    };
    let refusal = source
        .downcast_ref::<NestedTransaction>()
        .unwrap_or_else(|| panic!("not the nested transaction's refusal: {error}"));
    assert_eq!(refusal.depth(), 2);
    assert!(guard.is_held(), "the refusal cost the lease");
    if name != "sqlite" {
        // SQLite's one writer holds its lock until the outer transaction ends.
        assert_eq!(
            count(pool.clone()).await,
            0,
            "the outer transaction committed"
        );
    }
    outer.rollback().await.unwrap();
    drop(conn);
    assert_eq!(
        count(pool.clone()).await,
        0,
        "the outer transaction's write committed"
    );

    // The outermost transaction right after a nested one was dropped (a savepoint rolled back,
    // the way a failed step of the work ends) is committed, not refused as nested: on SQLite,
    // sqlx lowers the depth it counts only once its worker thread has run the savepoint's
    // rollback, and a count read before then said 2. A hundred times.
    let rounds = 100;
    for round in 0..rounds {
        let mut conn = pool.acquire().await.unwrap();
        let mut outer = conn.begin().await.unwrap();
        raw_sql(AssertSqlSafe(format!(
            "INSERT INTO {notices} (value) VALUES ({round})"
        )))
        .execute(&mut *outer)
        .await
        .unwrap();
        drop(outer.begin().await.unwrap());
        if let Err(error) = lease_sqlx::commit_fenced(&store, outer, &guard).await {
            panic!(
                "round {round}: the outermost transaction was refused: {}",
                lease_sqlx::ErrorChain(&error)
            );
        }
    }
    assert_eq!(
        count(pool.clone()).await,
        rounds,
        "every round's write committed"
    );
    guard.release().await.unwrap();
    fresh.teardown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_transaction_is_refused_on_postgres() {
    a_nested_transaction_is_refused(Backend::<Postgres>::plain(), "postgres").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_transaction_is_refused_on_mariadb() {
    a_nested_transaction_is_refused(Backend::<MySql>::plain(), "mariadb").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_transaction_is_refused_on_sqlite() {
    a_nested_transaction_is_refused(Backend::<Sqlite>::plain(), "sqlite").await;
}
