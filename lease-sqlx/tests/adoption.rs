//! Adopting an existing table through sqlx, on SQLite (always), the local PostgreSQL and
//! MariaDB: the story's table with a live lease is refused by `setup` and `verify` with the SQL
//! that upgrades it, and `upgrade` keeps its live lease; rows with an older version's counter
//! fences need no migration and are overtaken by the next fences; a table of another kind is
//! refused without SQL; `verify` without a table names the DDL; MariaDB's port of the story's
//! table (`TEXT` holder, `TIMESTAMP` times) is upgraded in UTC; a name or holder declared too
//! short is widened; an upgrade gives up on a table another transaction holds rather than wait
//! for it; SQLite times in seconds are made milliseconds (`lease_tests::adoption`).
#![cfg(all(feature = "postgres", feature = "mysql", feature = "sqlite"))]

mod common;

use common::TestDb;
use lease_core::BoxError;
use lease_core::runtime::TokioRuntime;
use lease_sqlx::sqlx::{MySql, Postgres, Sqlite};
use lease_sqlx::{SqlxExecutor, SqlxStore};
use lease_tests::{adoption, classified, env};

/// Runs `case` on a store of a fresh table of `DB`, then drops the table.
async fn on_fresh_table<DB, F>(case: F)
where
    DB: TestDb,
    SqlxExecutor<DB>: lease_sqlx::Execute,
    F: AsyncFnOnce(&SqlxStore<DB>, &str) -> Result<(), BoxError>,
{
    let (pool, file) = match DB::connect(2).await {
        Ok(connected) => connected,
        Err(error) => return env::skip_or_fail(DB::LABEL, &error.to_string()),
    };
    let table = env::unique_table("adoption");
    let store = SqlxStore::<DB>::with_table(pool.clone(), &table).unwrap();
    let outcome = case(&store, &table).await;
    DB::execute(&pool, format!("DROP TABLE IF EXISTS {table}"))
        .await
        .unwrap();
    pool.close().await;
    common::remove_files(file.as_deref()).unwrap();
    if let Err(error) = outcome {
        panic!("{}: {error}", DB::LABEL);
    }
}

macro_rules! adoption_cases {
    ($($db:ident: $ty:ty),*) => {$(
        mod $db {
            use super::*;

            #[tokio::test]
            async fn story_table_is_refused_then_upgraded() {
                on_fresh_table::<$ty, _>(adoption::story_table_is_refused_then_upgraded).await;
            }

            #[tokio::test]
            async fn failed_upgrade_leaves_no_transaction_open() {
                on_fresh_table::<$ty, _>(adoption::failed_upgrade_leaves_no_transaction_open).await;
            }

            #[tokio::test]
            async fn counter_fences_are_overtaken() {
                on_fresh_table::<$ty, _>(adoption::counter_fences_are_overtaken).await;
            }

            #[tokio::test]
            async fn partial_key_on_name_is_refused() {
                on_fresh_table::<$ty, _>(adoption::partial_key_on_name_is_refused).await;
            }

            #[tokio::test]
            async fn nullable_expiry_is_filled_then_free() {
                on_fresh_table::<$ty, _>(adoption::nullable_expiry_is_filled_then_free).await;
            }

            #[tokio::test]
            async fn short_name_and_holder_are_refused_then_widened() {
                on_fresh_table::<$ty, _>(adoption::short_name_and_holder_are_refused_then_widened).await;
            }

            #[tokio::test]
            async fn unrelated_table_is_refused() {
                on_fresh_table::<$ty, _>(adoption::unrelated_table_is_refused).await;
            }

            #[tokio::test]
            async fn missing_table_is_permanent() {
                on_fresh_table::<$ty, _>(async |store, _| {
                    classified::missing_table_is_permanent(store, TokioRuntime).await
                })
                .await;
            }

            #[tokio::test]
            async fn missing_table_is_refused_by_verify() {
                on_fresh_table::<$ty, _>(async |store, _| {
                    adoption::missing_table_is_refused_by_verify(store).await
                })
                .await;
            }
        }
    )*};
}

adoption_cases!(postgres: Postgres, mariadb: MySql, sqlite: Sqlite);

#[tokio::test]
async fn mariadb_port_is_refused_then_upgraded_in_utc() {
    on_fresh_table::<MySql, _>(adoption::mariadb_port_is_refused_then_upgraded_in_utc).await;
}

#[tokio::test]
async fn postgres_upgrade_gives_up_on_a_locked_table() {
    on_fresh_table::<Postgres, _>(async |store, table| {
        adoption::upgrade_gives_up_on_a_locked_table(store, table, TokioRuntime).await
    })
    .await;
}

#[tokio::test]
async fn mariadb_upgrade_gives_up_on_a_locked_table() {
    on_fresh_table::<MySql, _>(async |store, table| {
        adoption::upgrade_gives_up_on_a_locked_table(store, table, TokioRuntime).await
    })
    .await;
}

#[tokio::test]
async fn mariadb_upgrade_gives_up_on_a_written_row() {
    on_fresh_table::<MySql, _>(async |store, table| {
        adoption::mariadb_upgrade_gives_up_on_a_written_row(store, table, TokioRuntime).await
    })
    .await;
}

#[tokio::test]
async fn sqlite_times_in_seconds_are_refused_then_converted() {
    on_fresh_table::<Sqlite, _>(adoption::sqlite_times_in_seconds_are_refused_then_converted).await;
}

#[tokio::test]
async fn mariadb_unsigned_fence_is_refused_then_upgraded() {
    on_fresh_table::<MySql, _>(adoption::mariadb_unsigned_fence_is_refused_then_upgraded).await;
}

/// `verify` needs no right but the store's own: an account with only `SELECT, INSERT, UPDATE`
/// on the table checks it, where `setup` is refused for want of the right to create.
async fn verify_with_the_stores_rights_only<DB: TestDb>(
    account_url: impl Fn(&str) -> String,
    create_account: impl Fn(&str, &str) -> Vec<String>,
    drop_account: impl Fn(&str, &str) -> Vec<String>,
) where
    SqlxExecutor<DB>: lease_sqlx::Execute,
{
    let (pool, _) = match DB::connect(2).await {
        Ok(connected) => connected,
        Err(error) => return env::skip_or_fail(DB::LABEL, &error.to_string()),
    };
    let table = env::unique_table("adoption");
    let account = env::unique_table("lease_app");
    let owner = SqlxStore::<DB>::with_table(pool.clone(), &table).unwrap();
    owner.setup().await.unwrap();
    for sql in create_account(&account, &table) {
        if let Err(error) = DB::execute(&pool, sql).await {
            for sql in drop_account(&account, &table) {
                let _ = DB::execute(&pool, sql).await;
            }
            DB::execute(&pool, format!("DROP TABLE {table}"))
                .await
                .unwrap();
            return env::skip_or_fail(
                DB::LABEL,
                &format!("the test account cannot make an account of its own: {error}"),
            );
        }
    }
    let outcome = async {
        let app_pool = lease_sqlx::sqlx::pool::PoolOptions::<DB>::new()
            .max_connections(1)
            .connect(&account_url(&account))
            .await?;
        let app = SqlxStore::<DB>::with_table(app_pool.clone(), &table)?;
        let verified = app.verify().await;
        let set_up = app.setup().await;
        app_pool.close().await;
        verified?;
        match set_up {
            Err(lease_core::Error::Store { .. }) => Ok::<(), BoxError>(()),
            other => Err(format!("setup without the right to create answered {other:?}").into()),
        }
    }
    .await;
    for sql in drop_account(&account, &table) {
        DB::execute(&pool, sql).await.unwrap();
    }
    DB::execute(&pool, format!("DROP TABLE {table}"))
        .await
        .unwrap();
    if let Err(error) = outcome {
        panic!("{}: {error}", DB::LABEL);
    }
}

/// `url` with `account` and its password as the user.
fn as_account(url: &str, account: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    format!("{scheme}://{account}:{PASSWORD}@{host}")
}

const PASSWORD: &str = "lease-app-password";

#[tokio::test]
async fn postgres_verify_needs_only_the_stores_rights() {
    let base = env::postgres_url();
    verify_with_the_stores_rights_only::<Postgres>(
        |account| as_account(&base, account),
        |account, table| {
            vec![
                format!("CREATE ROLE {account} LOGIN PASSWORD '{PASSWORD}'"),
                format!("GRANT SELECT, INSERT, UPDATE ON {table} TO {account}"),
            ]
        },
        // The grant is taken back by the table's owner: `DROP OWNED BY` would need membership
        // in the role, which an account with only CREATEROLE (scripts/test's fallback) lacks
        // before PostgreSQL 16.
        |account, table| {
            vec![
                format!("REVOKE ALL ON {table} FROM {account}"),
                format!("DROP ROLE IF EXISTS {account}"),
            ]
        },
    )
    .await;
}

#[tokio::test]
async fn mariadb_verify_needs_only_the_stores_rights() {
    let base = env::mysql_url();
    verify_with_the_stores_rights_only::<MySql>(
        |account| as_account(&base, account),
        |account, table| {
            vec![
                format!("CREATE USER '{account}'@'%' IDENTIFIED BY '{PASSWORD}'"),
                format!("CREATE USER '{account}'@'localhost' IDENTIFIED BY '{PASSWORD}'"),
                format!("GRANT SELECT, INSERT, UPDATE ON {table} TO '{account}'@'%'"),
                format!("GRANT SELECT, INSERT, UPDATE ON {table} TO '{account}'@'localhost'"),
            ]
        },
        |account, _table| {
            vec![
                format!("DROP USER IF EXISTS '{account}'@'%'"),
                format!("DROP USER IF EXISTS '{account}'@'localhost'"),
            ]
        },
    )
    .await;
}
