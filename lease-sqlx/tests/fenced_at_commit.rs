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
