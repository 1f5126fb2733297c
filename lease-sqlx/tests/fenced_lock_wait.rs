//! A fenced check that waits for the lease row's lock reads the expiry once it has the lock:
//! when the lease expired by the database's clock while the check waited (another transaction
//! held the row: a fenced transaction checked at its `BEGIN`, an operator's console), the check
//! fails and nothing commits. It had compared the expiry with the time its statement arrived,
//! and committed after the expiry. (A takeover still queued behind it, so no other holder's
//! writes interleaved; the promise that the check holds only while the lease has not expired
//! did not.) SQLite takes its write lock before it reads the time, and is not concerned.
#![cfg(all(feature = "postgres", feature = "mysql", feature = "sqlite"))]

mod common;

use std::time::Duration;

use common::{Backend, TestDb};
use lease_core::runtime::TokioRuntime;
use lease_core::{Error, LeaseClient, Ttl};
use lease_sqlx::sqlx::{self, AssertSqlSafe, MySql, Postgres};
use lease_sqlx::{Execute, SqlxExecutor};
use lease_tests::{TestBackend, env};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The lease's TTL; the row stays locked past it.
const TTL: Duration = Duration::from_secs(2);

async fn a_check_that_waits_past_the_expiry_commits_nothing<DB: TestDb>()
where
    SqlxExecutor<DB>: Execute,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    <DB as sqlx::Database>::Arguments: sqlx::IntoArguments<DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
    i64: for<'r> sqlx::Decode<'r, DB> + sqlx::Type<DB>,
{
    let backend = Backend::<DB>::plain();
    if let Err(why) = backend.available().await {
        return env::skip_or_fail(DB::LABEL, &why.to_string());
    }
    let (fresh, pool, table) = backend.fresh(4).await.unwrap();
    let notices = format!("{table}_notices");
    DB::execute(
        &pool,
        format!("CREATE TABLE {notices} (value BIGINT NOT NULL)"),
    )
    .await
    .unwrap();
    let store = fresh.store().clone();
    // Renewed only after the row is locked: the renewal waits behind the lock as the check does.
    let client = LeaseClient::builder(store.clone(), TokioRuntime)
        .ttl(Ttl::new(TTL).unwrap())
        .renew_every(Duration::from_millis(1_800))
        .safety_margin(Duration::from_millis(100))
        .build()
        .unwrap();
    let guard = client.try_acquire("notices").await.unwrap().unwrap();

    // Another transaction holds the lease's row past the lease's expiry.
    let mut locker = pool.begin().await.unwrap();
    sqlx::raw_sql(AssertSqlSafe(format!(
        "SELECT name FROM {table} WHERE name = 'notices' FOR UPDATE"
    )))
    .execute(&mut *locker)
    .await
    .unwrap();
    let insert = format!("INSERT INTO {notices} (value) VALUES (1)");
    let fenced = tokio::spawn({
        let (store, lease) = (store.clone(), guard.handle());
        async move {
            lease_sqlx::fenced(&store, &lease, async |tx| {
                sqlx::raw_sql(AssertSqlSafe(insert))
                    .execute(&mut *tx)
                    .await?;
                Ok::<_, BoxError>(())
            })
            .await
        }
    });
    tokio::time::sleep(TTL + Duration::from_millis(500)).await;
    assert!(
        !fenced.is_finished(),
        "the check did not wait for the row's lock"
    );
    locker.rollback().await.unwrap();

    let answer = fenced.await.unwrap();
    let error = answer.expect_err("a check that got the lock after the expiry committed");
    assert!(
        matches!(error.downcast_ref::<Error>(), Some(Error::NotHeld { .. })),
        "{error}"
    );
    let committed: i64 =
        sqlx::query_scalar(AssertSqlSafe(format!("SELECT COUNT(*) FROM {notices}")))
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(committed, 0, "the work committed after the lease expired");
    assert!(!guard.is_held());
    drop(guard);
    fresh.teardown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_check_that_waits_past_the_expiry_commits_nothing() {
    a_check_that_waits_past_the_expiry_commits_nothing::<Postgres>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_a_check_that_waits_past_the_expiry_commits_nothing() {
    a_check_that_waits_past_the_expiry_commits_nothing::<MySql>().await;
}
