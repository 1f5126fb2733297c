//! Fenced transactions at the isolation levels that differ from the defaults.
//!
//! MariaDB with `innodb_snapshot_isolation` on (the default from MariaDB 11.6.2; available, off,
//! from 10.6.18, 10.11.8 and 11.4.2): a transaction at `REPEATABLE READ` (MariaDB's default)
//! that read before the holder's renewal committed cannot lock the lease's row at its end. The
//! check with the commit then fails with error 1020 and the transaction is rolled back: a
//! conflict, the lease still held and nothing committed. Trying again helps only work shorter
//! than the renewal period; checked at the `BEGIN`, before the transaction reads, the same work
//! commits (what docs/choices.md tells users of such servers).
//!
//! PostgreSQL at `READ UNCOMMITTED`, which it runs as `READ COMMITTED`: the check with the
//! commit reads the latest row there too, so the snapshot guard lets it run.
//!
//! MariaDB at `REPEATABLE READ` keeps the lock of every row a statement read: a refused
//! `commit_fenced` must not leave it on the new holder's row.

use std::time::Duration;

use lease_core::runtime::TokioRuntime;
use lease_core::{LeaseClient, LeaseStore, StoreErrorKind, Ttl};
use lease_sqlx::sqlx::{self, AssertSqlSafe};
use lease_sqlx::{CheckAt, MySqlLeaseStore};
use lease_tests::env;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::test]
async fn mariadb_a_check_that_loses_to_a_renewal_under_snapshot_isolation_is_a_conflict() {
    let pool = match sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(4)
        .after_connect(|connection, _| {
            Box::pin(async move {
                sqlx::raw_sql("SET SESSION innodb_snapshot_isolation = ON")
                    .execute(connection)
                    .await
                    .map(drop)
            })
        })
        .connect(&env::mysql_url())
        .await
    {
        Ok(pool) => pool,
        Err(e) => {
            return env::skip_or_fail("mariadb with innodb_snapshot_isolation", &e.to_string());
        }
    };
    let table = env::unique_table("lease_sqlx_snapshot_isolation");
    let notices = format!("{table}_notices");
    let store = MySqlLeaseStore::with_table(pool.clone(), &table).unwrap();
    store.setup().await.unwrap();
    sqlx::raw_sql(AssertSqlSafe(format!(
        "CREATE TABLE {notices} (customer VARCHAR(20) NOT NULL) ENGINE = InnoDB"
    )))
    .execute(&pool)
    .await
    .unwrap();
    let client = LeaseClient::new(store.clone(), TokioRuntime);
    let guard = client.try_acquire("notices").await.unwrap().unwrap();
    let ttl = Ttl::new(Duration::from_secs(120)).unwrap();
    let count = format!("SELECT COUNT(*) FROM {notices}");
    let insert = format!("INSERT INTO {notices} (customer) VALUES ('c-42')");

    // Checked with the commit: the work reads (its read view opens), the holder's renewal
    // commits on another connection, and the check then meets a row changed since.
    let refused = lease_sqlx::fenced(&store, &guard, async |tx| {
        let _: i64 = sqlx::query_scalar(AssertSqlSafe(count.clone()))
            .fetch_one(&mut *tx)
            .await?;
        assert!(store.renew(guard.name(), guard.holder(), ttl).await?);
        sqlx::raw_sql(AssertSqlSafe(insert.clone()))
            .execute(&mut *tx)
            .await?;
        Ok::<_, BoxError>(())
    })
    .await
    .expect_err("the check met a row changed since the transaction's read view");
    let error = refused
        .downcast_ref::<lease_core::Error>()
        .unwrap_or_else(|| panic!("a lease error: {refused}"));
    assert_eq!(
        error.store_error_kind(),
        Some(StoreErrorKind::Conflict),
        "{error:?}"
    );
    assert!(error.is_transient(), "a conflict is worth trying again");
    assert!(
        guard.is_held(),
        "a conflict does not mean the lease is gone"
    );
    let committed: i64 = sqlx::query_scalar(AssertSqlSafe(count.clone()))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(committed, 0, "nothing was committed");

    // Checked at the `BEGIN`: the row is locked before the work reads, so the renewal waits
    // for the transaction and the work commits.
    let renewal = lease_sqlx::fenced_with(&store, &guard, CheckAt::Begin, async |tx| {
        let _: i64 = sqlx::query_scalar(AssertSqlSafe(count.clone()))
            .fetch_one(&mut *tx)
            .await?;
        let renewal = tokio::spawn({
            let (store, name, holder) =
                (store.clone(), guard.name().clone(), guard.holder().clone());
            async move { store.renew(&name, &holder, ttl).await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        sqlx::raw_sql(AssertSqlSafe(insert.clone()))
            .execute(&mut *tx)
            .await?;
        Ok::<_, BoxError>(renewal)
    })
    .await
    .unwrap();
    assert!(renewal.await.unwrap().unwrap(), "renewed after the commit");
    let committed: i64 = sqlx::query_scalar(AssertSqlSafe(count.clone()))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(committed, 1, "checked at the begin, the work committed");

    guard.release().await.unwrap();
    sqlx::raw_sql(AssertSqlSafe(format!("DROP TABLE {notices}, {table}")))
        .execute(&pool)
        .await
        .unwrap();
}

#[tokio::test]
async fn postgres_read_uncommitted_is_read_committed_to_the_check_with_the_commit() {
    let pool = match sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .after_connect(|connection, _| {
            Box::pin(async move {
                sqlx::raw_sql(
                    "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ UNCOMMITTED",
                )
                .execute(connection)
                .await
                .map(drop)
            })
        })
        .connect(&env::postgres_url())
        .await
    {
        Ok(pool) => pool,
        Err(e) => return env::skip_or_fail("postgres", &e.to_string()),
    };
    let table = env::unique_table("lease_sqlx_read_uncommitted");
    let store = lease_sqlx::PgLeaseStore::with_table(pool.clone(), &table).unwrap();
    store.setup().await.unwrap();
    let client = LeaseClient::new(store.clone(), TokioRuntime);
    let guard = client.try_acquire("notices").await.unwrap().unwrap();
    let tx = pool.begin().await.unwrap();
    let fence = lease_sqlx::commit_fenced(&store, tx, &guard).await;
    assert_eq!(
        fence.unwrap(),
        guard.fence(),
        "the check with the commit ran"
    );
    let level: String = sqlx::query_scalar("SHOW transaction_isolation")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(level, "read uncommitted", "the connections' level");
    guard.release().await.unwrap();
    sqlx::raw_sql(AssertSqlSafe(format!("DROP TABLE {table}")))
        .execute(&pool)
        .await
        .unwrap();
}

/// MariaDB at `REPEATABLE READ` keeps a lock on every row a statement read, matched or not: a
/// check of a lease taken over since locks the new holder's row. `commit_fenced` rolls the
/// transaction back at once when the check refuses, so the new holder's renewal does not wait
/// for the stale holder's connection to be used again (here a connection of its own, which
/// sends nothing more).
#[tokio::test]
async fn mariadb_a_refused_commit_fenced_leaves_no_lock_on_the_new_holders_row() {
    let url = env::mysql_url();
    let pool = match sqlx::MySqlPool::connect(&url).await {
        Ok(pool) => pool,
        Err(e) => return env::skip_or_fail("mariadb", &e.to_string()),
    };
    let table = env::unique_table("lease_sqlx_refused_lock");
    let store = MySqlLeaseStore::with_table(pool.clone(), &table).unwrap();
    store.setup().await.unwrap();
    let stale = LeaseClient::new(store.clone(), TokioRuntime);
    let guard = stale.try_acquire("notices").await.unwrap().unwrap();
    let handle = guard.handle();
    guard.release().await.unwrap();
    let next = LeaseClient::new(store.clone(), TokioRuntime);
    let taken = next.try_acquire("notices").await.unwrap().unwrap();

    let mut own = <sqlx::MySqlConnection as sqlx::Connection>::connect(&url)
        .await
        .unwrap();
    let tx = sqlx::Connection::begin(&mut own).await.unwrap();
    let refused = lease_sqlx::commit_fenced(&store, tx, &handle).await;
    assert!(
        matches!(refused, Err(lease_core::Error::NotHeld { .. })),
        "{refused:?}"
    );
    let ttl = Ttl::new(Duration::from_secs(120)).unwrap();
    let renewed = tokio::time::timeout(
        Duration::from_secs(5),
        store.renew(taken.name(), taken.holder(), ttl),
    )
    .await
    .expect("the new holder's renewal waited for the stale holder's lock");
    assert!(renewed.unwrap(), "the new holder renews");
    drop(own);
    taken.release().await.unwrap();
    sqlx::raw_sql(AssertSqlSafe(format!("DROP TABLE {table}")))
        .execute(&pool)
        .await
        .unwrap();
}
