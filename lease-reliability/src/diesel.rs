//! [`Diesel`]: lease-diesel's stores on deadpool pools, as a [`StoreFactory`], so the
//! scenarios that are cheap to repeat run through the second driver too.

use std::any::Any;
use std::marker::PhantomData;

use async_trait::async_trait;
use lease_core::{BoxError, Error};
use lease_diesel::diesel_async::pooled_connection::{AsyncDieselConnectionManager, deadpool};
use lease_diesel::diesel_async::{AsyncMysqlConnection, AsyncPgConnection, SimpleAsyncConnection};
use lease_diesel::{AsyncSqliteConnection, DieselStore, sqlite_manager};
use lease_tests::PoolState;

use crate::db::Db;
use crate::factory::StoreFactory;

/// lease-diesel's stores over a deadpool pool of connection `C` (`AsyncPgConnection`,
/// `AsyncMysqlConnection`, `AsyncSqliteConnection`).
///
/// The pools have no wait or create timeout (deadpool needs its own runtime feature for
/// those); the lease client's store timeout bounds every call instead.
#[derive(Debug)]
pub struct Diesel<C>(PhantomData<fn() -> C>);

impl<C> Diesel<C> {
    /// The factory.
    pub fn new() -> Self {
        Self(PhantomData)
    }
}

impl<C> Default for Diesel<C> {
    fn default() -> Self {
        Self::new()
    }
}

/// How diesel-async connects to each database.
pub trait DieselConnect: Sized {
    /// The database.
    const DB: Db;
    /// The pool's connection manager for `url` (a scenario's URL; for SQLite `sqlite://path`).
    fn manager(url: &str) -> AsyncDieselConnectionManager<Self>;
}

impl DieselConnect for AsyncPgConnection {
    const DB: Db = Db::Postgres;
    fn manager(url: &str) -> AsyncDieselConnectionManager<Self> {
        AsyncDieselConnectionManager::new(url)
    }
}

impl DieselConnect for AsyncMysqlConnection {
    const DB: Db = Db::MariaDb;
    fn manager(url: &str) -> AsyncDieselConnectionManager<Self> {
        // mysql_async, under diesel-async, asks a server on this machine for its Unix socket
        // and moves the connection there (`prefer_socket`, on by default): a fault proxy on TCP
        // would then carry nothing. Stay on TCP, where the scenarios inject their faults.
        if url.contains("prefer_socket") {
            return AsyncDieselConnectionManager::new(url);
        }
        let separator = if url.contains('?') { '&' } else { '?' };
        AsyncDieselConnectionManager::new(format!("{url}{separator}prefer_socket=false"))
    }
}

impl DieselConnect for AsyncSqliteConnection {
    const DB: Db = Db::Sqlite;
    fn manager(url: &str) -> AsyncDieselConnectionManager<Self> {
        // diesel opens a path, not sqlx's `sqlite://path?mode=rwc`.
        let path = url.strip_prefix("sqlite://").unwrap_or(url);
        sqlite_manager(path.split('?').next().unwrap_or(path))
    }
}

macro_rules! diesel_factory {
    ($conn:ty) => {
        #[async_trait]
        impl StoreFactory for Diesel<$conn> {
            type Store = DieselStore<deadpool::Pool<$conn>>;

            fn db(&self) -> Db {
                <$conn as DieselConnect>::DB
            }

            fn label(&self) -> String {
                format!("{}/diesel", self.db())
            }

            async fn connect(
                &self,
                url: &str,
                table: &str,
                connections: u32,
            ) -> Result<Self::Store, BoxError> {
                let store = self.connect_lazy_sized(url, table, connections)?;
                // Like sqlx's `connect`: one connection now, so an unreachable server is an
                // error here rather than at the first call.
                drop(store.pool().get().await?);
                Ok(store)
            }

            fn on_table(&self, store: &Self::Store, table: &str) -> Result<Self::Store, Error> {
                DieselStore::with_table(store.pool().clone(), table)
            }

            fn connect_lazy(&self, url: &str, table: &str) -> Result<Self::Store, BoxError> {
                self.connect_lazy_sized(url, table, 2)
            }

            async fn setup(&self, store: &Self::Store) -> Result<(), Error> {
                store.setup().await
            }

            async fn execute(&self, store: &Self::Store, sql: &str) -> Result<(), BoxError> {
                let mut connection = store.pool().get().await?;
                connection.batch_execute(sql).await?;
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
                    held.push(store.pool().get().await?);
                }
                Ok(Box::new(held))
            }

            async fn close(&self, store: &Self::Store) {
                store.pool().close();
            }
        }

        impl Diesel<$conn> {
            fn connect_lazy_sized(
                &self,
                url: &str,
                table: &str,
                connections: u32,
            ) -> Result<DieselStore<deadpool::Pool<$conn>>, BoxError> {
                let pool = deadpool::Pool::builder(<$conn as DieselConnect>::manager(url))
                    .max_size(usize::try_from(connections)?)
                    .build()?;
                Ok(DieselStore::with_table(pool, table)?)
            }
        }
    };
}

diesel_factory!(AsyncPgConnection);
diesel_factory!(AsyncMysqlConnection);
diesel_factory!(AsyncSqliteConnection);

/// Runs `body` with the diesel factory of `db`, as [`with_sqlx!`](crate::with_sqlx) does for
/// sqlx.
#[macro_export]
macro_rules! with_diesel {
    ($db:expr, |$factory:ident| $body:expr) => {
        match $db {
            $crate::db::Db::Postgres => {
                let $factory =
                    $crate::diesel::Diesel::<lease_diesel::diesel_async::AsyncPgConnection>::new();
                $body
            }
            $crate::db::Db::MariaDb => {
                let $factory = $crate::diesel::Diesel::<
                    lease_diesel::diesel_async::AsyncMysqlConnection,
                >::new();
                $body
            }
            $crate::db::Db::Sqlite => {
                let $factory = $crate::diesel::Diesel::<lease_diesel::AsyncSqliteConnection>::new();
                $body
            }
        }
    };
}

/// Runs `body` with the factory of `driver` (`sqlx` or `diesel`) for `db`.
#[macro_export]
macro_rules! with_driver {
    ($driver:expr, $db:expr, |$factory:ident| $body:expr) => {
        match $driver {
            $crate::Driver::Sqlx => $crate::with_sqlx!($db, |$factory| $body),
            $crate::Driver::Diesel => $crate::with_diesel!($db, |$factory| $body),
        }
    };
}
