//! Adopting an existing table through diesel-async (deadpool), on SQLite (always), the local
//! PostgreSQL and MariaDB: the same cases as lease-sqlx's (`lease_tests::adoption`), MariaDB's
//! port of the story's table, a name or holder declared too short, an upgrade that gives up on a
//! table another transaction holds and SQLite times in seconds among them, and a MariaDB table
//! that cannot grow answering a transient failure (`lease_tests::classified`). And here: two
//! upgrades at once converge, and SQLite's printed upgrade runs as a diesel migration (inside
//! diesel's transaction).

mod support;

use diesel_async::pooled_connection::deadpool;
use diesel_async::{
    AsyncConnection, AsyncMigrationHarness, AsyncMysqlConnection, AsyncPgConnection,
};
use diesel_migrations::{FileBasedMigrations, MigrationHarness};
use lease_core::BoxError;
use lease_core::runtime::TokioRuntime;
use lease_diesel::{AsyncSqliteConnection, DieselStore};
use lease_tests::{adoption, classified, env};
use support::{Backend, Database, MariaDb, Postgres, Sqlite, TestPool};

/// Runs `case` on a store of a fresh table of `D` that nothing has set up, then drops it.
async fn on_fresh_table<D, P, F>(case: F)
where
    D: Database,
    P: TestPool<Connection = D::Connection>,
    F: AsyncFnOnce(&DieselStore<P>, &str) -> Result<(), BoxError>,
{
    if let Err(error) = D::available().await {
        return env::skip_or_fail(D::NAME, &error.to_string());
    }
    let table = env::unique_table("adoption");
    let pool = P::build(D::manager(D::url(&table)), 2).unwrap();
    let store = DieselStore::with_table(pool.clone(), &table).unwrap();
    let outcome = case(&store, &table).await;
    Backend::<D, P>::drop_table(&pool, &table).await.unwrap();
    if let Err(error) = outcome {
        panic!("{}: {error}", D::NAME);
    }
}

macro_rules! adoption_cases {
    ($($db:ident: $ty:ty, $conn:ty);*) => {$(
        mod $db {
            use super::*;

            #[tokio::test(flavor = "multi_thread")]
            async fn story_table_is_refused_then_upgraded() {
                on_fresh_table::<$ty, deadpool::Pool<$conn>, _>(adoption::story_table_is_refused_then_upgraded).await;
            }

            #[tokio::test(flavor = "multi_thread")]
            async fn failed_upgrade_leaves_no_transaction_open() {
                on_fresh_table::<$ty, deadpool::Pool<$conn>, _>(adoption::failed_upgrade_leaves_no_transaction_open).await;
            }

            #[tokio::test(flavor = "multi_thread")]
            async fn counter_fences_are_overtaken() {
                on_fresh_table::<$ty, deadpool::Pool<$conn>, _>(adoption::counter_fences_are_overtaken).await;
            }

            #[tokio::test(flavor = "multi_thread")]
            async fn partial_key_on_name_is_refused() {
                on_fresh_table::<$ty, deadpool::Pool<$conn>, _>(adoption::partial_key_on_name_is_refused).await;
            }

            #[tokio::test(flavor = "multi_thread")]
            async fn nullable_expiry_is_filled_then_free() {
                on_fresh_table::<$ty, deadpool::Pool<$conn>, _>(adoption::nullable_expiry_is_filled_then_free).await;
            }

            #[tokio::test(flavor = "multi_thread")]
            async fn short_name_and_holder_are_refused_then_widened() {
                on_fresh_table::<$ty, deadpool::Pool<$conn>, _>(adoption::short_name_and_holder_are_refused_then_widened).await;
            }

            #[tokio::test(flavor = "multi_thread")]
            async fn unrelated_table_is_refused() {
                on_fresh_table::<$ty, deadpool::Pool<$conn>, _>(adoption::unrelated_table_is_refused).await;
            }

            #[tokio::test(flavor = "multi_thread")]
            async fn missing_table_is_permanent() {
                on_fresh_table::<$ty, deadpool::Pool<$conn>, _>(async |store, _| {
                    classified::missing_table_is_permanent(store, TokioRuntime).await
                })
                .await;
            }

            #[tokio::test(flavor = "multi_thread")]
            async fn simultaneous_upgrades_converge() {
                on_fresh_table::<$ty, deadpool::Pool<$conn>, _>(adoption::simultaneous_upgrades_converge).await;
            }

            #[tokio::test(flavor = "multi_thread")]
            async fn missing_table_is_refused_by_verify() {
                on_fresh_table::<$ty, deadpool::Pool<$conn>, _>(async |store, _| {
                    adoption::missing_table_is_refused_by_verify(store).await
                })
                .await;
            }
        }
    )*};
}

adoption_cases!(
    postgres: Postgres, AsyncPgConnection;
    mariadb: MariaDb, AsyncMysqlConnection;
    sqlite: Sqlite, AsyncSqliteConnection
);

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_full_table_is_transient() {
    on_fresh_table::<MariaDb, deadpool::Pool<AsyncMysqlConnection>, _>(
        classified::mariadb_full_table_is_transient,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_port_is_refused_then_upgraded_in_utc() {
    on_fresh_table::<MariaDb, deadpool::Pool<AsyncMysqlConnection>, _>(
        adoption::mariadb_port_is_refused_then_upgraded_in_utc,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_upgrade_gives_up_on_a_locked_table() {
    on_fresh_table::<Postgres, deadpool::Pool<AsyncPgConnection>, _>(async |store, table| {
        adoption::upgrade_gives_up_on_a_locked_table(store, table, TokioRuntime).await
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_upgrade_gives_up_on_a_locked_table() {
    on_fresh_table::<MariaDb, deadpool::Pool<AsyncMysqlConnection>, _>(async |store, table| {
        adoption::upgrade_gives_up_on_a_locked_table(store, table, TokioRuntime).await
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_upgrade_gives_up_on_a_written_row() {
    on_fresh_table::<MariaDb, deadpool::Pool<AsyncMysqlConnection>, _>(async |store, table| {
        adoption::mariadb_upgrade_gives_up_on_a_written_row(store, table, TokioRuntime).await
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sqlite_times_in_seconds_are_refused_then_converted() {
    on_fresh_table::<Sqlite, deadpool::Pool<AsyncSqliteConnection>, _>(
        adoption::sqlite_times_in_seconds_are_refused_then_converted,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sqlite_times_finer_than_milliseconds_are_refused() {
    on_fresh_table::<Sqlite, deadpool::Pool<AsyncSqliteConnection>, _>(
        adoption::sqlite_times_finer_than_milliseconds_are_refused,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sqlite_real_times_are_read() {
    on_fresh_table::<Sqlite, deadpool::Pool<AsyncSqliteConnection>, _>(
        adoption::sqlite_real_times_are_read,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sqlite_collated_name_is_refused_then_rebuilt() {
    on_fresh_table::<Sqlite, deadpool::Pool<AsyncSqliteConnection>, _>(
        adoption::sqlite_collated_name_is_refused_then_rebuilt,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_times_set_on_update_are_refused_then_kept() {
    on_fresh_table::<MariaDb, deadpool::Pool<AsyncMysqlConnection>, _>(
        adoption::mariadb_times_set_on_update_are_refused_then_kept,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_unsigned_fence_is_refused_then_upgraded() {
    on_fresh_table::<MariaDb, deadpool::Pool<AsyncMysqlConnection>, _>(
        adoption::mariadb_unsigned_fence_is_refused_then_upgraded,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_wide_holder_keeps_its_width() {
    on_fresh_table::<MariaDb, deadpool::Pool<AsyncMysqlConnection>, _>(
        adoption::mariadb_wide_holder_keeps_its_width,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_nondeterministic_name_is_refused_then_altered() {
    on_fresh_table::<Postgres, deadpool::Pool<AsyncPgConnection>, _>(
        adoption::postgres_nondeterministic_name_is_refused_then_altered,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_coarse_times_are_refused_then_upgraded() {
    on_fresh_table::<Postgres, deadpool::Pool<AsyncPgConnection>, _>(
        adoption::postgres_coarse_times_are_refused_then_upgraded,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_infinite_times_are_read() {
    on_fresh_table::<Postgres, deadpool::Pool<AsyncPgConnection>, _>(
        adoption::postgres_infinite_times_are_read,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_unsafe_storage_is_refused() {
    on_fresh_table::<Postgres, deadpool::Pool<AsyncPgConnection>, _>(
        adoption::unsafe_storage_is_refused,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_unsafe_storage_is_refused() {
    on_fresh_table::<MariaDb, deadpool::Pool<AsyncMysqlConnection>, _>(
        adoption::unsafe_storage_is_refused,
    )
    .await;
}

/// SQLite: the SQL `verify` prints for the story's table (a rebuild), put in a migration of its
/// own and applied by diesel's migration harness, which runs each migration in a transaction:
/// it runs, and the table fits with the story's live lease still held. Without the fix, the
/// upgrade began a transaction of its own (`BEGIN IMMEDIATE`), which fails inside diesel's.
#[tokio::test(flavor = "multi_thread")]
async fn sqlite_printed_upgrade_runs_as_a_diesel_migration() {
    on_fresh_table::<Sqlite, deadpool::Pool<AsyncSqliteConnection>, _>(async |store, table| {
        let sql = adoption::story_upgrade(store, table).await?;
        let dir = std::env::temp_dir().join(format!("{table}_upgrade_migrations"));
        let migration = dir.join("2027-01-01-000000_upgrade_leases");
        std::fs::create_dir_all(&migration)?;
        std::fs::write(migration.join("up.sql"), &sql)?;
        std::fs::write(migration.join("down.sql"), "SELECT 1;")?;
        let ran = async {
            let connection = AsyncSqliteConnection::establish(&Sqlite::url(table)).await?;
            let mut harness = AsyncMigrationHarness::new(connection);
            harness.run_pending_migrations(FileBasedMigrations::from_path(&dir)?)?;
            Ok::<(), BoxError>(())
        }
        .await;
        std::fs::remove_dir_all(&dir)?;
        ran.map_err(|e| format!("the printed upgrade as a migration: {e}\n{sql}"))?;
        store.verify().await?;
        adoption::story_lease_still_held(store).await
    })
    .await;
}
