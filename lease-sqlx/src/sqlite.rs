//! SQLite: [`SqliteLeaseStore`] and the connect options it needs.

use futures::future::BoxFuture;
use lease_core::{BoxError, ReleaseEvents, StoreErrorKind};
use lease_sql::{Dialect, Param, SQLITE_BUSY_TIMEOUT, SqlStore};
use sqlx::error::DatabaseError;
use sqlx::query::Query;
use sqlx::sqlite::{
    SqliteArguments, SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteQueryResult,
};
use sqlx::{Sqlite, SqlitePool};

use crate::SqlxDatabase;
use crate::SqlxExecutor;
use crate::database::sealed::Sealed;

impl Sealed for Sqlite {}

impl SqlxDatabase for Sqlite {
    const DIALECT: Dialect = Dialect::Sqlite;
    const NAME: &'static str = "sqlite";

    fn bind<'q>(
        query: Query<'q, Self, SqliteArguments>,
        param: Param<'q>,
    ) -> Query<'q, Self, SqliteArguments> {
        match param {
            Param::Text(text) => query.bind(text),
            Param::Int(int) => query.bind(int),
        }
    }

    fn rows_affected(result: &SqliteQueryResult) -> u64 {
        result.rows_affected()
    }

    /// sqlx reports SQLite's extended result code, as text.
    fn database_error_kind(error: &dyn DatabaseError) -> StoreErrorKind {
        error
            .code()
            .and_then(|code| code.parse().ok())
            .map_or(StoreErrorKind::Permanent, lease_sql::sqlite_error_kind)
    }

    /// An I/O error may come after a commit reached the log: its outcome is unknown.
    fn database_error_ends_session(error: &dyn DatabaseError) -> Option<bool> {
        error
            .code()
            .and_then(|code| code.parse().ok())
            .map(lease_sql::sqlite_ends_session)
    }

    /// With [`sqlite_connect_options`] and a pool of sqlx's default size, whether the options
    /// come from a URL ([`connect`](SqlStore::connect)) or the application
    /// ([`connect_with`](SqlStore::connect_with)).
    fn connect_pool_with(
        options: SqliteConnectOptions,
    ) -> BoxFuture<'static, Result<SqlitePool, BoxError>> {
        Box::pin(async move {
            Ok(SqlitePoolOptions::new()
                .connect_with(sqlite_connect_options(options))
                .await?)
        })
    }

    /// SQLite cannot push notifications: waiters poll.
    fn release_events<'a>(
        _: &'a SqlitePool,
        _: &'a str,
    ) -> BoxFuture<'a, Result<Option<ReleaseEvents>, BoxError>> {
        Box::pin(async { Ok(None) })
    }
}

/// Leases in a SQLite table, through a [`SqlitePool`].
///
/// The bundled SQLite is used (it has `unixepoch('subsec')`, which needs 3.42; Debian 12's
/// system SQLite is 3.40). [`connect`](SqlStore::connect) and
/// [`connect_with_table`](SqlStore::connect_with_table) open a pool at a URL with
/// [`sqlite_connect_options`]; [`connect_with`](SqlStore::connect_with) opens one from your
/// `SqliteConnectOptions` with those settings put in (WAL and a 5 s busy timeout, in place of
/// yours), on any table:
///
/// ```no_run
/// # async fn example() -> Result<(), lease_sqlx::lease_core::Error> {
/// use lease_sqlx::SqliteLeaseStore;
/// use lease_sqlx::sqlx::sqlite::SqliteConnectOptions;
///
/// let options = SqliteConnectOptions::new()
///     .filename("leases.db")
///     .create_if_missing(true);
/// let store = SqliteLeaseStore::connect_with(options, "jobs_leases").await?;
/// store.setup().await?;
/// # Ok(())
/// # }
/// ```
pub type SqliteLeaseStore = SqlStore<SqlxExecutor<Sqlite>>;

/// `options` as a lease store needs them (lease-sql's SQLite settings): write-ahead logging, so
/// readers never wait for the writer, and a busy timeout of [`SQLITE_BUSY_TIMEOUT`], so
/// contenders wait their turn to write instead of failing. These replace what `options` set for
/// either (sqlx cannot tell what was set): a journal mode of your own becomes WAL, which stays
/// with the database file for every program that opens it, and a busy timeout of your own
/// becomes 5 s. Where the file must keep another journal mode, make the pool yourself and give
/// it to [`SqlStore::new`](lease_sql::SqlStore::new).
pub fn sqlite_connect_options(options: SqliteConnectOptions) -> SqliteConnectOptions {
    options
        .journal_mode(SqliteJournalMode::Wal)
        .busy_timeout(SQLITE_BUSY_TIMEOUT)
}
