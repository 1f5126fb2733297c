// The README's examples use every database; with only some features on, the crate docs say
// which to turn on instead, so the doctests compile whatever the features.
#![cfg_attr(
    all(feature = "postgres", feature = "mysql", feature = "sqlite"),
    doc = include_str!("../README.md")
)]
#![cfg_attr(
    not(all(feature = "postgres", feature = "mysql", feature = "sqlite")),
    doc = "Leases in a PostgreSQL, MariaDB or SQLite table through sqlx. Build the docs with \
           `--features postgres,mysql,sqlite` (or `--all-features`) for the whole guide."
)]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// Without a database feature the crate has no store, and its shared parts stand unused.
#![cfg_attr(
    not(any(feature = "postgres", feature = "mysql", feature = "sqlite")),
    allow(unused)
)]

mod acquire;
mod closing_connection;
mod database;
mod describe;
mod error_kind;
mod executor;
mod fenced;

#[cfg(feature = "mysql")]
mod mysql;
mod nested_transaction;
mod no_connection;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;

pub use database::SqlxDatabase;
pub use executor::SqlxExecutor;
pub use fenced::{commit_fenced, fenced, fenced_with};
pub use nested_transaction::NestedTransaction;
pub use no_connection::NoConnection;

/// Leases in a table through a sqlx pool of `DB`: lease-sql's [`SqlStore`]
/// on a [`SqlxExecutor`].
pub type SqlxStore<DB> = lease_sql::SqlStore<SqlxExecutor<DB>>;

#[cfg(feature = "postgres")]
pub use postgres::{PgLeaseStore, PgProtocol};

#[cfg(feature = "mysql")]
pub use mysql::MySqlLeaseStore;

#[cfg(feature = "sqlite")]
pub use sqlite::{SqliteLeaseStore, sqlite_connect_options};

#[cfg(feature = "sqlite")]
pub use lease_sql::SQLITE_BUSY_TIMEOUT;

/// lease-core, which this crate's stores plug into: the client, the guards, leader election and
/// the runtimes, so that an application depends on this crate alone.
pub use lease_core;
/// What an application needs from lease-core and lease-sql: the client, the guards, schedules,
/// statistics, and the store, table and migration types.
pub use lease_sql::exports::*;
/// The sqlx this crate is built on, for its pool and option types.
pub use sqlx;
