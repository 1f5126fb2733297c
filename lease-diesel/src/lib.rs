#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// Without a database feature there is no connection to run the statements on; the machinery
// still compiles, unused.
#![cfg_attr(
    not(any(feature = "postgres", feature = "mysql", feature = "sqlite")),
    allow(dead_code, unused_imports, unused_macros)
)]

mod acquire;
mod connection;
mod error_kind;
mod executor;
mod fenced;
mod finish;
mod pool;
mod statement;

#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;

pub use connection::DieselConnection;
pub use executor::DieselExecutor;
pub use fenced::{fenced, fenced_with};
pub use pool::DieselPool;

/// Leases in a table through a diesel-async pool `P` (deadpool or bb8): lease-sql's
/// [`SqlStore`] on a [`DieselExecutor`]. Make one with
/// `DieselStore::new(pool)` or `DieselStore::with_table(pool, "jobs.leases")?`.
pub type DieselStore<P> = lease_sql::SqlStore<DieselExecutor<P>>;

#[cfg(feature = "sqlite")]
pub use lease_sql::SQLITE_BUSY_TIMEOUT;
#[cfg(all(feature = "mysql", any(feature = "deadpool", feature = "bb8")))]
pub use mysql::mysql_manager;
#[cfg(feature = "mysql")]
pub use mysql::mysql_ping;
#[cfg(feature = "postgres")]
pub use postgres::establish_postgres;
#[cfg(all(feature = "postgres", any(feature = "deadpool", feature = "bb8")))]
pub use postgres::postgres_manager;
#[cfg(all(feature = "sqlite", any(feature = "deadpool", feature = "bb8")))]
pub use sqlite::sqlite_manager;

/// A SQLite connection for diesel-async: diesel's `SqliteConnection`, whose blocking calls run
/// on tokio's blocking threads.
#[cfg(feature = "sqlite")]
pub type AsyncSqliteConnection =
    diesel_async::sync_connection_wrapper::SyncConnectionWrapper<diesel::SqliteConnection>;

/// The diesel this crate is built on.
pub use diesel;
/// The diesel-async this crate is built on, for its connection and pool types.
pub use diesel_async;

/// lease-core, which this crate's stores plug into: the client, the guards, leader election and
/// the runtimes, so that an application depends on this crate alone.
pub use lease_core;
/// What an application needs from lease-core and lease-sql: the client, the guards, schedules,
/// statistics, and the store, table and migration types.
pub use lease_sql::exports::*;
