//! The lease table made by diesel's migrations from lease-sql's [`Migration`] files, not by
//! `setup`: `diesel_migrations` reads them from a directory in diesel's layout and runs them
//! through diesel-async's `AsyncMigrationHarness`, the store checks the table with `verify`, and
//! the conformance suite runs on it (deadpool), on SQLite (always), the local PostgreSQL and
//! MariaDB. The down migration drops the table again.
//!
//! diesel keeps its applied versions in one table per schema, so each store gets a place of
//! its own: a schema (PostgreSQL, chosen by the connection's `search_path`), a database
//! (MariaDB) or a file (SQLite), with the table under its default name.

mod support;

use std::future::Future;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use diesel_async::pooled_connection::deadpool;
use diesel_async::{
    AsyncConnection, AsyncMigrationHarness, AsyncMysqlConnection, AsyncPgConnection,
    SimpleAsyncConnection,
};
use diesel_migrations::{FileBasedMigrations, MigrationHarness};
use lease_core::{BoxError, Error};
use lease_diesel::{AsyncSqliteConnection, Dialect, DieselStore, Layout, Migration, TableName};
use lease_tests::{FreshStore, TestBackend, env};
use support::{Database, MariaDb, Postgres, Sqlite, TestPool};

/// A place of its own for one migrated store, and the URL that reaches it.
trait Scratch: Database {
    const DIALECT: Dialect;

    /// Makes the place `name` and answers the URL of a connection that works in it.
    fn make(name: &str) -> impl Future<Output = Result<String, BoxError>> + Send;

    /// Removes it, with everything in it.
    fn remove(name: &str) -> impl Future<Output = Result<(), BoxError>> + Send;
}

impl Scratch for Postgres {
    const DIALECT: Dialect = Dialect::Postgres;

    async fn make(name: &str) -> Result<String, BoxError> {
        let url = env::postgres_url();
        let mut connection = AsyncPgConnection::establish(&url).await?;
        connection
            .batch_execute(&format!("CREATE SCHEMA {name}"))
            .await?;
        let separator = if url.contains('?') { '&' } else { '?' };
        Ok(format!("{url}{separator}options=-csearch_path%3D{name}"))
    }

    async fn remove(name: &str) -> Result<(), BoxError> {
        let mut connection = AsyncPgConnection::establish(&env::postgres_url()).await?;
        connection
            .batch_execute(&format!("DROP SCHEMA {name} CASCADE"))
            .await?;
        Ok(())
    }
}

impl Scratch for MariaDb {
    const DIALECT: Dialect = Dialect::MySql;

    async fn make(name: &str) -> Result<String, BoxError> {
        let url = env::mysql_url();
        let mut connection = AsyncMysqlConnection::establish(&url).await?;
        connection
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await?;
        let (server, _database) = url.rsplit_once('/').ok_or("a URL with a database")?;
        Ok(format!("{server}/{name}"))
    }

    async fn remove(name: &str) -> Result<(), BoxError> {
        let mut connection = AsyncMysqlConnection::establish(&env::mysql_url()).await?;
        connection
            .batch_execute(&format!("DROP DATABASE {name}"))
            .await?;
        Ok(())
    }
}

impl Scratch for Sqlite {
    const DIALECT: Dialect = Dialect::Sqlite;

    async fn make(name: &str) -> Result<String, BoxError> {
        Ok(Self::url(name))
    }

    async fn remove(name: &str) -> Result<(), BoxError> {
        Self::remove_files(name);
        Ok(())
    }
}

/// Writes the lease table's migration in diesel's layout into a directory of its own.
fn migrations_dir(name: &str, dialect: Dialect) -> Result<PathBuf, BoxError> {
    let dir = std::env::temp_dir().join(format!("{name}_migrations"));
    for file in Migration::new(dialect, &TableName::default()).files(Layout::Diesel) {
        let path = dir.join(&file.path);
        std::fs::create_dir_all(path.parent().ok_or("a file in a directory")?)?;
        std::fs::write(path, file.contents)?;
    }
    Ok(dir)
}

/// Runs diesel's pending migrations from `dir` at `url`, or reverts the last one.
async fn migrate<C>(url: &str, dir: &Path, revert: bool) -> Result<(), BoxError>
where
    C: AsyncConnection + 'static,
    AsyncMigrationHarness<C>: MigrationHarness<C::Backend>,
{
    let connection = C::establish(url).await?;
    let migrations = FileBasedMigrations::from_path(dir)?;
    let mut harness = AsyncMigrationHarness::new(connection);
    if revert {
        harness.revert_last_migration(migrations)?;
    } else {
        let applied = harness.run_pending_migrations(migrations)?;
        if applied.len() != 1 {
            return Err(format!("{} migrations applied, not 1", applied.len()).into());
        }
    }
    Ok(())
}

/// A store on a table that diesel's migrations made.
struct Migrated<D, P>(PhantomData<fn() -> (D, P)>);

#[async_trait::async_trait]
impl<D, P> TestBackend for Migrated<D, P>
where
    D: Scratch,
    P: TestPool<Connection = D::Connection>,
    DieselStore<P>: lease_core::LeaseStore,
    AsyncMigrationHarness<D::Connection>:
        MigrationHarness<<D::Connection as diesel_async::AsyncConnectionCore>::Backend>,
{
    type Store = DieselStore<P>;

    fn name(&self) -> &str {
        D::NAME
    }

    /// The server, and the right to make a place of its own there.
    async fn available(&self) -> Result<(), BoxError> {
        D::available().await?;
        let probe = env::unique_table("migrated_probe");
        D::make(&probe)
            .await
            .map_err(|e| format!("cannot make a schema or database of its own: {e}"))?;
        D::remove(&probe).await
    }

    async fn store(&self) -> Result<FreshStore<Self::Store>, BoxError> {
        let name = env::unique_table("migrated");
        let url = D::make(&name).await?;
        let dir = migrations_dir(&name, D::DIALECT)?;
        migrate::<D::Connection>(&url, &dir, false).await?;
        let pool = P::build(D::manager(url), 4)?;
        let store = DieselStore::new(pool);
        store.verify().await?;
        Ok(FreshStore::new(store).with_teardown(move || async move {
            D::remove(&name).await?;
            std::fs::remove_dir_all(dir)?;
            Ok(())
        }))
    }
}

fn migrated<D, P>() -> Migrated<D, P> {
    Migrated(PhantomData)
}

lease_tests::conformance_suite!(mod postgres, runtime = tokio, backend = migrated::<Postgres, deadpool::Pool<AsyncPgConnection>>());
lease_tests::conformance_suite!(mod mariadb, runtime = tokio, backend = migrated::<MariaDb, deadpool::Pool<AsyncMysqlConnection>>());
lease_tests::conformance_suite!(mod sqlite, runtime = tokio, backend = migrated::<Sqlite, deadpool::Pool<AsyncSqliteConnection>>());

/// Up makes a table that verifies, down drops it: `verify` then names the missing table.
async fn up_then_down<D, P>()
where
    D: Scratch,
    P: TestPool<Connection = D::Connection>,
    AsyncMigrationHarness<D::Connection>:
        MigrationHarness<<D::Connection as diesel_async::AsyncConnectionCore>::Backend>,
{
    if let Err(error) = D::available().await {
        return env::skip_or_fail(D::NAME, &error.to_string());
    }
    let name = env::unique_table("migrated");
    let url = match D::make(&name).await {
        Ok(url) => url,
        Err(error) => {
            return env::skip_or_fail(
                D::NAME,
                &format!("cannot make a schema or database of its own: {error}"),
            );
        }
    };
    let dir = migrations_dir(&name, D::DIALECT).unwrap();
    migrate::<D::Connection>(&url, &dir, false).await.unwrap();
    let pool = P::build(D::manager(url.clone()), 2).unwrap();
    let store = DieselStore::new(pool);
    store.verify().await.unwrap();
    migrate::<D::Connection>(&url, &dir, true).await.unwrap();
    match store.verify().await {
        Err(Error::SchemaMismatch { mismatch, .. }) if mismatch == "the table does not exist" => {}
        other => panic!(
            "{}: after the down migration, verify answered {other:?}",
            D::NAME
        ),
    }
    drop(store);
    D::remove(&name).await.unwrap();
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_up_then_down() {
    up_then_down::<Postgres, deadpool::Pool<AsyncPgConnection>>().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_up_then_down() {
    up_then_down::<MariaDb, deadpool::Pool<AsyncMysqlConnection>>().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sqlite_up_then_down() {
    up_then_down::<Sqlite, deadpool::Pool<AsyncSqliteConnection>>().await;
}
