//! [`SqlxDatabase`]: the sqlx databases a [`SqlxStore`](crate::SqlxStore) works with.

use futures::future::BoxFuture;
use lease_core::{Error, ReleaseEvents};
use lease_sql::{Dialect, Param};
use sqlx::Database;
use sqlx::query::Query;

use crate::SqlxStore;

/// A sqlx database with lease statements: `Postgres`, `MySql` (MariaDB) or `Sqlite`, each
/// behind its feature. Sealed: the SQL for each lives in `lease-sql`.
pub trait SqlxDatabase: Database + sealed::Sealed {
    /// Which statements it runs.
    #[doc(hidden)]
    const DIALECT: Dialect;

    /// Binds one parameter.
    #[doc(hidden)]
    fn bind<'q>(
        query: Query<'q, Self, <Self as Database>::Arguments>,
        param: Param<'_>,
    ) -> Query<'q, Self, <Self as Database>::Arguments>;

    /// The affected-rows count of a statement's result.
    #[doc(hidden)]
    fn rows_affected(result: &Self::QueryResult) -> u64;

    /// The store's release events (see `LeaseStore::release_events`): none, unless the
    /// database can push them.
    #[doc(hidden)]
    fn release_events(
        store: &SqlxStore<Self>,
    ) -> BoxFuture<'_, Result<Option<ReleaseEvents>, Error>> {
        let _ = store;
        Box::pin(async { Ok(None) })
    }
}

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// Implements [`SqlxDatabase`]: text and integers bind the same way on every database; how an
/// array of text binds is given (only PostgreSQL's statements take one), and where the database
/// can push release events, the store's method that opens them.
macro_rules! sqlx_database {
    (
        $db:ty,
        $dialect:expr,
        |$query:ident, $items:ident| $bind_array:expr
        $(, release_events = $events:path)? $(,)?
    ) => {
        impl $crate::database::sealed::Sealed for $db {}

        impl $crate::SqlxDatabase for $db {
            const DIALECT: lease_sql::Dialect = $dialect;

            fn bind<'q>(
                $query: sqlx::query::Query<'q, Self, <Self as sqlx::Database>::Arguments>,
                param: lease_sql::Param<'_>,
            ) -> sqlx::query::Query<'q, Self, <Self as sqlx::Database>::Arguments> {
                match param {
                    lease_sql::Param::Text(text) => $query.bind(text),
                    lease_sql::Param::Int(int) => $query.bind(int),
                    lease_sql::Param::TextArray($items) => $bind_array,
                }
            }

            fn rows_affected(result: &Self::QueryResult) -> u64 {
                result.rows_affected()
            }

            $(
                fn release_events(
                    store: &$crate::SqlxStore<Self>,
                ) -> futures::future::BoxFuture<
                    '_,
                    Result<Option<lease_core::ReleaseEvents>, lease_core::Error>,
                > {
                    Box::pin($events(store))
                }
            )?
        }
    };
}
pub(crate) use sqlx_database;
