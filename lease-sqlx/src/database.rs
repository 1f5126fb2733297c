//! [`SqlxDatabase`]: the sqlx databases a lease store works with, and what differs between them.

use futures::future::BoxFuture;
use lease_core::{BoxError, ReleaseEvents, StoreErrorKind};
use lease_sql::{Dialect, Param};
use sqlx::error::DatabaseError;
use sqlx::query::Query;
use sqlx::{Connection, Database, Pool};

/// The connect options of `DB`'s connections (`SqliteConnectOptions`, `PgConnectOptions`,
/// `MySqlConnectOptions`).
pub type ConnectOptionsOf<DB> = <<DB as Database>::Connection as Connection>::Options;

/// A sqlx database with lease statements: `Postgres`, `MySql` (MariaDB) or `Sqlite`, each
/// behind its feature. Sealed: the SQL for each lives in `lease-sql`; each database's impl is in
/// its own module (`postgres.rs`, `mysql.rs`, `sqlite.rs`).
pub trait SqlxDatabase: Database + sqlx::database::HasStatementCache + sealed::Sealed {
    /// Which statements it runs.
    #[doc(hidden)]
    const DIALECT: Dialect;

    /// The database's name, for `Debug`.
    #[doc(hidden)]
    const NAME: &'static str;

    /// Binds one parameter: text or a 64-bit integer, the only kinds lease-sql's statements
    /// take.
    #[doc(hidden)]
    fn bind<'q>(
        query: Query<'q, Self, <Self as Database>::Arguments>,
        param: Param<'q>,
    ) -> Query<'q, Self, <Self as Database>::Arguments>;

    /// The affected-rows count of a statement's result.
    #[doc(hidden)]
    fn rows_affected(result: &Self::QueryResult) -> u64;

    /// What an error the database answered means, by its code: lease-sql's table for the
    /// database's SQLSTATEs, error numbers or result codes.
    #[doc(hidden)]
    fn database_error_kind(error: &dyn DatabaseError) -> StoreErrorKind;

    /// Whether an error the database answered says, by its code, that the session ended with
    /// the statement in flight: lease-sql's table for the database's SQLSTATEs or error
    /// numbers; `None` where the error has no such code (SQLite, which has no session).
    #[doc(hidden)]
    fn database_error_ends_session(error: &dyn DatabaseError) -> Option<bool> {
        let _ = error;
        None
    }

    /// Opens a pool at `url` with the settings a lease store needs: the URL's options, through
    /// [`connect_pool_with`](Self::connect_pool_with).
    #[doc(hidden)]
    fn connect_pool(url: &str) -> BoxFuture<'_, Result<Pool<Self>, BoxError>> {
        Box::pin(async move {
            let options: ConnectOptionsOf<Self> = url.parse()?;
            Self::connect_pool_with(options).await
        })
    }

    /// Opens a pool of sqlx's default size on `options`, with the settings a lease store needs
    /// added (none but SQLite's), after one connection made on its own answered, so that a
    /// server that refuses is named at once (see `acquire::connect`).
    #[doc(hidden)]
    fn connect_pool_with(
        options: ConnectOptionsOf<Self>,
    ) -> BoxFuture<'static, Result<Pool<Self>, BoxError>> {
        Box::pin(async move { Ok(crate::acquire::connect::<Self>(options).await?) })
    }

    /// Names of leases released on `channel`, pushed by the database; `None` where it cannot
    /// push them.
    #[doc(hidden)]
    fn release_events<'a>(
        pool: &'a Pool<Self>,
        channel: &'a str,
    ) -> BoxFuture<'a, Result<Option<ReleaseEvents>, BoxError>>;
}

pub(crate) mod sealed {
    pub trait Sealed {}
}
