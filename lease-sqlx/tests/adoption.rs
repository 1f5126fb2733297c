//! Adopting an existing table through sqlx, on SQLite (always), the local PostgreSQL and
//! MariaDB: the story's table with a live lease is refused by `setup` and `verify` with the SQL
//! that upgrades it, and `upgrade` keeps its live lease; a table of another kind is refused
//! without SQL; `verify` without a table names the DDL (`lease_tests::adoption`).
#![cfg(all(feature = "postgres", feature = "mysql", feature = "sqlite"))]

mod common;

use common::TestDb;
use lease_core::BoxError;
use lease_sqlx::sqlx::{MySql, Postgres, Sqlite};
use lease_sqlx::{SqlxExecutor, SqlxStore};
use lease_tests::{adoption, env};

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
            async fn unrelated_table_is_refused() {
                on_fresh_table::<$ty, _>(adoption::unrelated_table_is_refused).await;
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
