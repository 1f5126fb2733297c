//! [`SqlxDatabase`]: the sqlx databases a [`SqlxStore`](crate::SqlxStore) works with.

use lease_sql::{Dialect, Param};
use sqlx::Database;
use sqlx::query::Query;

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
}

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// Implements [`SqlxDatabase`]: text and integers bind the same way on every database; how an
/// array of text binds is given (only PostgreSQL's statements take one).
macro_rules! sqlx_database {
    ($db:ty, $dialect:expr, |$query:ident, $items:ident| $bind_array:expr) => {
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
        }
    };
}
pub(crate) use sqlx_database;
