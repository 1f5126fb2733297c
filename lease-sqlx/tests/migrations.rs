//! The lease table made by `sqlx migrate` from lease-sql's [`Migration`] files, not by `setup`:
//! sqlx's own `Migrator` applies them from a directory in its layout, the store checks the
//! table with `verify`, and the conformance suite runs on it, on SQLite (always), the local
//! PostgreSQL and MariaDB: its store cases (the fenced and pool cases, which need tables of
//! their own beside the store's, report not applicable here and run on tables `setup` made in
//! the other suites). The down migration drops the table again.
#![cfg(all(feature = "postgres", feature = "mysql", feature = "sqlite"))]

mod common;

use std::path::{Path, PathBuf};

use common::TestDb;
use lease_core::{BoxError, Error};
use lease_sqlx::sqlx::migrate::{Migrate, Migrator};
use lease_sqlx::sqlx::{MySql, Pool, Postgres, Sqlite};
use lease_sqlx::{Layout, Migration, SqlxExecutor, SqlxStore, TableName};
use lease_tests::{FreshStore, TestBackend, env};

/// Writes `migration`'s files in `layout` under `dir`.
fn write_files(dir: &Path, migration: &Migration, layout: Layout) -> Result<(), BoxError> {
    for file in migration.files(layout) {
        let path = dir.join(&file.path);
        std::fs::create_dir_all(path.parent().ok_or("a file in a directory")?)?;
        std::fs::write(path, file.contents)?;
    }
    Ok(())
}

/// A migrations directory with the lease table's migration, and sqlx's `Migrator` on it, its
/// bookkeeping table of its own (tests run side by side on one database).
async fn migrator<DB: TestDb>(table: &str) -> Result<(Migrator, PathBuf), BoxError>
where
    SqlxExecutor<DB>: lease_sqlx::Execute,
{
    let dir = std::env::temp_dir().join(format!("{table}_migrations"));
    std::fs::create_dir_all(&dir)?;
    let migration = Migration::new(
        <DB as lease_sqlx::SqlxDatabase>::DIALECT,
        &TableName::new(table)?,
    );
    write_files(&dir, &migration, Layout::Sqlx)?;
    let mut migrator = Migrator::new(dir.as_path()).await?;
    migrator.dangerous_set_table_name(format!("_sqlx_migrations_{table}"));
    Ok((migrator, dir))
}

/// A store on a table that sqlx's migrator made.
struct Migrated<DB>(std::marker::PhantomData<fn() -> DB>);

#[lease_core::async_trait]
impl<DB: TestDb> TestBackend for Migrated<DB>
where
    SqlxExecutor<DB>: lease_sqlx::Execute,
    DB::Connection: Migrate,
{
    type Store = SqlxStore<DB>;

    fn name(&self) -> &str {
        DB::LABEL
    }

    async fn available(&self) -> Result<(), BoxError> {
        let (pool, file) = DB::connect(1).await?;
        pool.close().await;
        common::remove_files(file.as_deref())
    }

    async fn store(&self) -> Result<FreshStore<Self::Store>, BoxError> {
        let (pool, file) = DB::connect(4).await?;
        let table = env::unique_table("migrated");
        let (migrator, dir) = migrator::<DB>(&table).await?;
        migrator.run(&pool).await?;
        let store = SqlxStore::<DB>::with_table(pool.clone(), &table)?;
        store.verify().await?;
        Ok(FreshStore::new(store).with_teardown(move || async move {
            // Every step runs; the first error is reported.
            let dropped = drop_all(&pool, &table).await;
            pool.close().await;
            let removed = std::fs::remove_dir_all(dir).map_err(BoxError::from);
            let files = common::remove_files(file.as_deref());
            dropped.and(removed).and(files)
        }))
    }
}

async fn drop_all<DB: TestDb>(pool: &Pool<DB>, table: &str) -> Result<(), BoxError> {
    DB::execute(pool, format!("DROP TABLE IF EXISTS {table}")).await?;
    DB::execute(
        pool,
        format!("DROP TABLE IF EXISTS _sqlx_migrations_{table}"),
    )
    .await
}

fn migrated<DB>() -> Migrated<DB> {
    Migrated(std::marker::PhantomData)
}

lease_tests::conformance_suite!(mod postgres, runtime = tokio, backend = migrated::<Postgres>());
lease_tests::conformance_suite!(mod mariadb, runtime = tokio, backend = migrated::<MySql>());
lease_tests::conformance_suite!(mod sqlite, runtime = tokio, backend = migrated::<Sqlite>());

/// Up makes a table that verifies, down drops it: `verify` then names the missing table.
async fn up_then_down<DB: TestDb>()
where
    SqlxExecutor<DB>: lease_sqlx::Execute,
    DB::Connection: Migrate,
{
    let (pool, file) = match DB::connect(2).await {
        Ok(connected) => connected,
        Err(error) => return env::skip_or_fail(DB::LABEL, &error.to_string()),
    };
    let table = env::unique_table("migrated");
    let (migrator, dir) = migrator::<DB>(&table).await.unwrap();
    let store = SqlxStore::<DB>::with_table(pool.clone(), &table).unwrap();
    migrator.run(&pool).await.unwrap();
    store.verify().await.unwrap();
    // Applied once: running again changes nothing.
    migrator.run(&pool).await.unwrap();
    migrator.undo(&pool, 0).await.unwrap();
    match store.verify().await {
        Err(Error::SchemaMismatch { mismatch, .. }) if mismatch == "the table does not exist" => {}
        other => panic!(
            "{}: after the down migration, verify answered {other:?}",
            DB::LABEL
        ),
    }
    drop_all(&pool, &table).await.unwrap();
    pool.close().await;
    std::fs::remove_dir_all(dir).unwrap();
    common::remove_files(file.as_deref()).unwrap();
}

#[tokio::test]
async fn postgres_up_then_down() {
    up_then_down::<Postgres>().await;
}

#[tokio::test]
async fn mariadb_up_then_down() {
    up_then_down::<MySql>().await;
}

#[tokio::test]
async fn sqlite_up_then_down() {
    up_then_down::<Sqlite>().await;
}
