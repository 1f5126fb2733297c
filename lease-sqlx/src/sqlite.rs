//! SQLite: [`SqliteLeaseStore`] and a pool made the way it needs.

use std::str::FromStr;
use std::time::Duration;

use lease_core::{Error, Operation};
use lease_sql::Dialect;
use sqlx::Sqlite;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};

use crate::SqlxStore;
use crate::database::sqlx_database;
use crate::run::sqlx_execute;

// SQLite's statements take no array; lease-sql never hands it one.
sqlx_database!(Sqlite, Dialect::Sqlite, |query, items| query
    .bind(items.join(",")));
sqlx_execute!(Sqlite);

/// Leases in a SQLite table, through a [`SqlitePool`](sqlx::SqlitePool).
///
/// The bundled SQLite is used (it has `unixepoch('subsec')`, which needs 3.42; Debian 12's
/// system SQLite is 3.40).
pub type SqliteLeaseStore = SqlxStore<Sqlite>;

/// The busy timeout [`sqlite_connect_options`] sets: how long a statement waits for another
/// connection's write to finish before it fails.
pub const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// `options` as a lease store needs them: write-ahead logging, so readers never wait for the
/// writer, and a busy timeout, so contenders wait their turn to write instead of failing.
pub fn sqlite_connect_options(options: SqliteConnectOptions) -> SqliteConnectOptions {
    options
        .journal_mode(SqliteJournalMode::Wal)
        .busy_timeout(SQLITE_BUSY_TIMEOUT)
}

impl SqlxStore<Sqlite> {
    /// Opens the database at `url` (such as `sqlite://leases.db?mode=rwc`) with
    /// [`sqlite_connect_options`] and a pool of sqlx's default size, on the table `leases`.
    ///
    /// # Errors
    /// [`Error::Store`] with [`Operation::Setup`] when the URL is invalid or the database cannot
    /// be opened.
    pub async fn connect(url: &str) -> Result<Self, Error> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|e| Error::store(Operation::Setup, None, e))?;
        Self::connect_with(SqlitePoolOptions::new(), options).await
    }

    /// Opens the database with `pool` settings and `options`, adjusted by
    /// [`sqlite_connect_options`], on the table `leases`.
    ///
    /// # Errors
    /// [`Error::Store`] with [`Operation::Setup`] when the database cannot be opened.
    pub async fn connect_with(
        pool: SqlitePoolOptions,
        options: SqliteConnectOptions,
    ) -> Result<Self, Error> {
        let pool = pool
            .connect_with(sqlite_connect_options(options))
            .await
            .map_err(|e| Error::store(Operation::Setup, None, e))?;
        Ok(Self::new(pool))
    }
}
