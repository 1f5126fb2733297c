//! [`StoreFactory`]: a store for a URL and a table, per driver, so every scenario is written
//! once and runs on every driver. [`Sqlx`] makes lease-sqlx's stores.

use std::any::Any;
use std::marker::PhantomData;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use lease_core::{BoxError, Error, LeaseStore};
use lease_sqlx::sqlx::mysql::MySqlPoolOptions;
use lease_sqlx::sqlx::postgres::PgPoolOptions;
use lease_sqlx::sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use lease_sqlx::sqlx::{self, AssertSqlSafe, MySql, Pool, Postgres, Sqlite};
use lease_sqlx::{SqlxDatabase, SqlxStore};
use lease_tests::PoolState;

use crate::db::Db;

/// How long a scenario's pool waits for a connection before the call fails: short, so a fault
/// shows as an error in good time rather than as a hang.
pub const POOL_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

/// Makes stores of one driver for one database.
#[async_trait]
pub trait StoreFactory: Send + Sync + 'static {
    /// The store it makes.
    type Store: LeaseStore + Clone;

    /// The database.
    fn db(&self) -> Db;

    /// `database/driver`, for messages and counts.
    fn label(&self) -> String;

    /// A store on `table` over a new pool of at most `connections` to `url`. Nothing is
    /// created; see [`setup`](StoreFactory::setup).
    async fn connect(
        &self,
        url: &str,
        table: &str,
        connections: u32,
    ) -> Result<Self::Store, BoxError>;

    /// A store on `table` over `store`'s pool: no connection is made, and a bad table name is
    /// refused before anything could reach the database.
    ///
    /// # Errors
    /// [`Error::InvalidIdentifier`] when `table` is not a plain identifier.
    fn on_table(&self, store: &Self::Store, table: &str) -> Result<Self::Store, Error>;

    /// A store on `table` over a pool that connects on first use, so a store for a server that
    /// is not there can be made (its calls then fail).
    fn connect_lazy(&self, url: &str, table: &str) -> Result<Self::Store, BoxError>;

    /// The store's own schema setup (`CREATE TABLE IF NOT EXISTS`).
    async fn setup(&self, store: &Self::Store) -> Result<(), Error>;

    /// Runs `sql` through the store's pool.
    async fn execute(&self, store: &Self::Store, sql: &str) -> Result<(), BoxError>;

    /// The store's pool now.
    fn pool_stats(&self, store: &Self::Store) -> PoolState;

    /// Takes `connections` connections out of the store's pool and keeps them until the
    /// returned value is dropped: the application's own work exhausting the pool.
    async fn hold_connections(
        &self,
        store: &Self::Store,
        connections: u32,
    ) -> Result<Box<dyn Any + Send>, BoxError>;

    /// Closes the store's pool.
    async fn close(&self, store: &Self::Store);
}

/// lease-sqlx's stores for the database `DB` (`Postgres`, `MySql` for MariaDB, `Sqlite`).
#[derive(Debug)]
pub struct Sqlx<DB>(PhantomData<fn() -> DB>);

impl<DB> Sqlx<DB> {
    /// The factory.
    pub fn new() -> Self {
        Self(PhantomData)
    }
}

impl<DB> Default for Sqlx<DB> {
    fn default() -> Self {
        Self::new()
    }
}

/// How sqlx connects to each database.
pub trait SqlxConnect: SqlxDatabase + Sized {
    /// The database.
    const DB: Db;
    /// A pool of at most `connections` to `url`, failing fast.
    fn pool(
        url: &str,
        connections: u32,
    ) -> impl Future<Output = Result<Pool<Self>, BoxError>> + Send;
    /// A pool to `url` that connects on first use.
    fn lazy_pool(url: &str) -> Result<Pool<Self>, BoxError>;
}

impl SqlxConnect for Postgres {
    const DB: Db = Db::Postgres;
    async fn pool(url: &str, connections: u32) -> Result<Pool<Self>, BoxError> {
        Ok(PgPoolOptions::new()
            .max_connections(connections)
            .acquire_timeout(POOL_ACQUIRE_TIMEOUT)
            .connect(url)
            .await?)
    }
    fn lazy_pool(url: &str) -> Result<Pool<Self>, BoxError> {
        Ok(PgPoolOptions::new()
            .acquire_timeout(POOL_ACQUIRE_TIMEOUT)
            .connect_lazy(url)?)
    }
}

impl SqlxConnect for MySql {
    const DB: Db = Db::MariaDb;
    async fn pool(url: &str, connections: u32) -> Result<Pool<Self>, BoxError> {
        Ok(MySqlPoolOptions::new()
            .max_connections(connections)
            .acquire_timeout(POOL_ACQUIRE_TIMEOUT)
            .connect(url)
            .await?)
    }
    fn lazy_pool(url: &str) -> Result<Pool<Self>, BoxError> {
        Ok(MySqlPoolOptions::new()
            .acquire_timeout(POOL_ACQUIRE_TIMEOUT)
            .connect_lazy(url)?)
    }
}

impl SqlxConnect for Sqlite {
    const DB: Db = Db::Sqlite;
    async fn pool(url: &str, connections: u32) -> Result<Pool<Self>, BoxError> {
        let options = SqliteConnectOptions::from_str(url)?;
        Ok(SqlitePoolOptions::new()
            .max_connections(connections)
            .acquire_timeout(POOL_ACQUIRE_TIMEOUT)
            .connect_with(lease_sqlx::sqlite_connect_options(options))
            .await?)
    }
    fn lazy_pool(url: &str) -> Result<Pool<Self>, BoxError> {
        let options = SqliteConnectOptions::from_str(url)?;
        Ok(SqlitePoolOptions::new()
            .acquire_timeout(POOL_ACQUIRE_TIMEOUT)
            .connect_lazy_with(lease_sqlx::sqlite_connect_options(options)))
    }
}

/// Written once per database rather than generically, like lease-sqlx's own `LeaseStore`
/// impls, so each future is checked `Send` for a concrete database.
macro_rules! sqlx_factory {
    ($db:ty) => {
        #[async_trait]
        impl StoreFactory for Sqlx<$db> {
            type Store = SqlxStore<$db>;

            fn db(&self) -> Db {
                <$db as SqlxConnect>::DB
            }

            fn label(&self) -> String {
                format!("{}/sqlx", self.db())
            }

            async fn connect(
                &self,
                url: &str,
                table: &str,
                connections: u32,
            ) -> Result<Self::Store, BoxError> {
                let pool = <$db as SqlxConnect>::pool(url, connections).await?;
                Ok(SqlxStore::with_table(pool, table)?)
            }

            fn on_table(&self, store: &Self::Store, table: &str) -> Result<Self::Store, Error> {
                SqlxStore::with_table(store.pool().clone(), table)
            }

            fn connect_lazy(&self, url: &str, table: &str) -> Result<Self::Store, BoxError> {
                Ok(SqlxStore::with_table(
                    <$db as SqlxConnect>::lazy_pool(url)?,
                    table,
                )?)
            }

            async fn setup(&self, store: &Self::Store) -> Result<(), Error> {
                store.setup().await
            }

            async fn execute(&self, store: &Self::Store, sql: &str) -> Result<(), BoxError> {
                sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
                    .execute(store.pool())
                    .await?;
                Ok(())
            }

            fn pool_stats(&self, store: &Self::Store) -> PoolState {
                store.pool_state()
            }

            async fn hold_connections(
                &self,
                store: &Self::Store,
                connections: u32,
            ) -> Result<Box<dyn Any + Send>, BoxError> {
                let mut held = Vec::new();
                for _ in 0..connections {
                    held.push(store.pool().acquire().await?);
                }
                Ok(Box::new(held))
            }

            async fn close(&self, store: &Self::Store) {
                store.pool().close().await;
            }
        }
    };
}

sqlx_factory!(Postgres);
sqlx_factory!(MySql);
sqlx_factory!(Sqlite);

/// Runs `body` with the sqlx factory of `db`: one scenario, written generically, on each
/// database.
#[macro_export]
macro_rules! with_sqlx {
    ($db:expr, |$factory:ident| $body:expr) => {
        match $db {
            $crate::db::Db::Postgres => {
                let $factory = $crate::factory::Sqlx::<lease_sqlx::sqlx::Postgres>::new();
                $body
            }
            $crate::db::Db::MariaDb => {
                let $factory = $crate::factory::Sqlx::<lease_sqlx::sqlx::MySql>::new();
                $body
            }
            $crate::db::Db::Sqlite => {
                let $factory = $crate::factory::Sqlx::<lease_sqlx::sqlx::Sqlite>::new();
                $body
            }
        }
    };
}
