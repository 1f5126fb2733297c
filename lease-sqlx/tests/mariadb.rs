//! MariaDB: the conformance suite and this crate's cases on tokio and async-std.
#![cfg(feature = "mysql")]

mod common;

use common::Backend;
use lease_sqlx::sqlx::MySql;

fn mariadb() -> Backend<MySql> {
    Backend::plain()
}

lease_tests::conformance_suite!(mod conformance_tokio, runtime = tokio, backend = mariadb());
lease_tests::conformance_suite!(mod conformance_async_std, runtime = async_std, backend = mariadb());

focused_suite!(mod focused_tokio, runtime = tokio, backend = mariadb());
focused_suite!(mod focused_async_std, runtime = async_std, backend = mariadb());

/// A server whose `sql_mode` holds `SIMULTANEOUS_ASSIGNMENT` (part of `sql_mode=ORACLE`)
/// evaluates every assignment of an `UPDATE` on the row as it was, as the SQL standard does,
/// where MariaDB's default evaluates them left to right: each of the store's statements means
/// the same under both. A takeover sets the new expiry (the next contender is refused), and a
/// release frees the row (it is neither inspected nor taken by anyone but the next contender).
#[tokio::test]
async fn statements_mean_the_same_under_simultaneous_assignment() {
    use lease_core::{HolderId, LeaseName, LeaseStore, Ttl};
    use lease_sqlx::MySqlLeaseStore;
    use lease_sqlx::sqlx::{self, Executor, mysql::MySqlPoolOptions};
    use lease_tests::env;

    let pool = match MySqlPoolOptions::new()
        .max_connections(2)
        .after_connect(|connection, _| {
            Box::pin(async move {
                connection
                    .execute(
                        "SET SESSION sql_mode = CONCAT(@@sql_mode, ',SIMULTANEOUS_ASSIGNMENT')",
                    )
                    .await
                    .map(drop)
            })
        })
        .connect(&env::mysql_url())
        .await
    {
        Ok(pool) => pool,
        Err(error) => return env::skip_or_fail("mariadb", &error.to_string()),
    };
    let mode: String = sqlx::query_scalar("SELECT @@sql_mode")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(mode.contains("SIMULTANEOUS_ASSIGNMENT"), "{mode}");
    let table = env::unique_table("lease_sqlx_simultaneous");
    let store = MySqlLeaseStore::with_table(pool.clone(), &table).unwrap();
    store.setup().await.unwrap();
    let name = LeaseName::new("sweep").unwrap();
    let ttl = Ttl::from_secs(60).unwrap();
    let (a, b, c) = (
        HolderId::generate(),
        HolderId::generate(),
        HolderId::generate(),
    );

    let first = store
        .try_acquire(&name, &a, ttl)
        .await
        .unwrap()
        .expect("free");
    assert!(
        store
            .release(&name, &a, std::time::Duration::ZERO)
            .await
            .unwrap()
    );
    assert_eq!(
        store.inspect(&name).await.unwrap(),
        None,
        "a released lease is still named"
    );
    let second = store
        .try_acquire(&name, &b, ttl)
        .await
        .unwrap()
        .expect("released");
    assert!(second > first);
    let info = store.inspect(&name).await.unwrap().expect("taken");
    assert!(
        info.holder == b && !info.is_expired(),
        "the takeover left the expiry as it was: {info:?}"
    );
    assert_eq!(
        store.try_acquire(&name, &c, ttl).await.unwrap(),
        None,
        "a second holder took the lease its takeover left expired"
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP TABLE {table}")))
        .execute(&pool)
        .await
        .unwrap();
}
