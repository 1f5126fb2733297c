//! [`DieselConnection`]: the diesel-async connections a store runs lease statements on, and how
//! each binds parameters and reads results.

use std::future::Future;

use diesel::QueryResult;
use lease_sql::Dialect;

/// A diesel-async connection with lease statements: `AsyncPgConnection`, `AsyncMysqlConnection`
/// (MariaDB) or [`AsyncSqliteConnection`](crate::AsyncSqliteConnection), each behind its
/// feature. Sealed: the SQL for each lives in `lease-sql`, and this crate only runs it.
pub trait DieselConnection: sealed::Sealed + Send + 'static {
    /// Which statements it runs.
    #[doc(hidden)]
    const DIALECT: Dialect;

    /// The database's name, for `Debug`.
    #[doc(hidden)]
    const NAME: &'static str;

    /// Runs a try-acquire: rows of `(fence, won)`.
    #[doc(hidden)]
    fn acquire_rows<'c>(
        &'c mut self,
        query: crate::query::OwnedQuery,
    ) -> impl Future<Output = QueryResult<Vec<(i64, i64)>>> + Send + 'c;

    /// Runs a renew-many that returns rows: `(name, holder)` of each renewed lease.
    #[doc(hidden)]
    fn pair_rows<'c>(
        &'c mut self,
        query: crate::query::OwnedQuery,
    ) -> impl Future<Output = QueryResult<Vec<(String, String)>>> + Send + 'c;

    /// Runs an inspect or a list: rows of `(name, holder, fence, taken_at, expires_at,
    /// observed_at)`.
    #[doc(hidden)]
    fn lease_rows<'c>(
        &'c mut self,
        query: crate::query::OwnedQuery,
    ) -> impl Future<Output = QueryResult<Vec<LeaseTuple>>> + Send + 'c;

    /// Runs a statement for its count of matched rows (diesel-async's MariaDB connection sets
    /// `CLIENT_FOUND_ROWS`, so a row set to the value it had still counts).
    #[doc(hidden)]
    fn affected<'c>(
        &'c mut self,
        query: crate::query::OwnedQuery,
    ) -> impl Future<Output = QueryResult<usize>> + Send + 'c;

    /// Runs DDL, which may hold several statements, without parameters.
    #[doc(hidden)]
    fn batch(&mut self, sql: String) -> impl Future<Output = QueryResult<()>> + Send + '_;
}

/// An inspect or list row as diesel reads it.
#[doc(hidden)]
pub type LeaseTuple = (String, String, i64, i64, i64, i64);

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// Implements [`DieselConnection`] for one connection type. Text and integers bind the same way
/// on every database; how an array of text binds is given (only PostgreSQL's statements take
/// one). Everything else is diesel-async's `RunQueryDsl` on a [`Statement`](crate::query::Statement).
macro_rules! diesel_connection {
    (
        $conn:ty,
        backend = $backend:ty,
        dialect = $dialect:expr,
        name = $name:literal,
        bind_array = |$query:ident, $items:ident| $bind_array:expr $(,)?
    ) => {
        impl $crate::connection::sealed::Sealed for $conn {}

        /// Binds one parameter in the database's type.
        fn bind_param<'q>(
                $query: diesel::query_builder::BoxedSqlQuery<
                    'q,
                    $backend,
                    diesel::query_builder::SqlQuery,
                >,
                param: $crate::query::Bind,
            ) -> diesel::query_builder::BoxedSqlQuery<'q, $backend, diesel::query_builder::SqlQuery>
            {
                match param {
                    $crate::query::Bind::Text(text) => $query.bind::<diesel::sql_types::Text, _>(text),
                    $crate::query::Bind::Int(int) => $query.bind::<diesel::sql_types::BigInt, _>(int),
                    $crate::query::Bind::TextArray($items) => $bind_array,
                }
        }

        impl $crate::DieselConnection for $conn {
            const DIALECT: lease_sql::Dialect = $dialect;
            const NAME: &'static str = $name;

            fn acquire_rows<'c>(
                &'c mut self,
                query: $crate::query::OwnedQuery,
            ) -> impl std::future::Future<Output = diesel::QueryResult<Vec<(i64, i64)>>> + Send + 'c
            {
                let statement = $crate::query::Statement::<$backend, $crate::query::AcquireRow>::new(
                    query,
                    bind_param,
                );
                diesel_async::RunQueryDsl::load(statement, self)
            }

            fn pair_rows<'c>(
                &'c mut self,
                query: $crate::query::OwnedQuery,
            ) -> impl std::future::Future<Output = diesel::QueryResult<Vec<(String, String)>>>
            + Send
            + 'c {
                let statement = $crate::query::Statement::<$backend, $crate::query::PairRow>::new(
                    query,
                    bind_param,
                );
                diesel_async::RunQueryDsl::load(statement, self)
            }

            fn lease_rows<'c>(
                &'c mut self,
                query: $crate::query::OwnedQuery,
            ) -> impl std::future::Future<
                Output = diesel::QueryResult<Vec<$crate::connection::LeaseTuple>>,
            > + Send
            + 'c {
                let statement = $crate::query::Statement::<$backend, $crate::query::LeaseRow>::new(
                    query,
                    bind_param,
                );
                diesel_async::RunQueryDsl::load(statement, self)
            }

            fn affected<'c>(
                &'c mut self,
                query: $crate::query::OwnedQuery,
            ) -> impl std::future::Future<Output = diesel::QueryResult<usize>> + Send + 'c {
                let statement = $crate::query::Execute::<$backend>::new(query, bind_param);
                diesel_async::RunQueryDsl::execute(statement, self)
            }

            fn batch(
                &mut self,
                sql: String,
            ) -> impl std::future::Future<Output = diesel::QueryResult<()>> + Send + '_ {
                async move { diesel_async::SimpleAsyncConnection::batch_execute(self, &sql).await }
            }
        }

        $crate::pool::diesel_pools!($conn);
    };
}
pub(crate) use diesel_connection;
