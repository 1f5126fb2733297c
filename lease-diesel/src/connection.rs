//! [`DieselConnection`]: the diesel-async connections a store runs lease statements on, and how
//! each reads what a statement returns.

use std::future::Future;

use diesel::QueryResult;
use lease_core::{BoxError, ReleaseEvents};
use lease_sql::Dialect;

use crate::statement::OwnedQuery;

/// A diesel-async connection with lease statements: `AsyncPgConnection`, `AsyncMysqlConnection`
/// (MariaDB) or [`AsyncSqliteConnection`](crate::AsyncSqliteConnection), each behind its
/// feature. Sealed: the SQL for each lives in `lease-sql`, and this crate only runs it.
pub trait DieselConnection:
    diesel_async::AsyncConnection + sealed::Sealed + Send + 'static
{
    /// Which statements it runs.
    #[doc(hidden)]
    const DIALECT: Dialect;

    /// The database's name, for `Debug`.
    #[doc(hidden)]
    const NAME: &'static str;

    /// Rows of `(fence, won)`: a try-acquire.
    #[doc(hidden)]
    fn int_pairs<'c>(
        &'c mut self,
        query: &'c OwnedQuery,
    ) -> impl Future<Output = QueryResult<Vec<(i64, i64)>>> + Send + 'c;

    /// Rows of one integer: PostgreSQL's renew-many positions.
    #[doc(hidden)]
    fn ints<'c>(
        &'c mut self,
        query: &'c OwnedQuery,
    ) -> impl Future<Output = QueryResult<Vec<(i64,)>>> + Send + 'c;

    /// Rows of `(name, holder)`: SQLite's renew-many.
    #[doc(hidden)]
    fn text_pairs<'c>(
        &'c mut self,
        query: &'c OwnedQuery,
    ) -> impl Future<Output = QueryResult<Vec<(String, String)>>> + Send + 'c;

    /// Rows of `(name, holder, fence, taken_at, expires_at, observed_at)`: an inspect or a list.
    #[doc(hidden)]
    fn lease_rows<'c>(
        &'c mut self,
        query: &'c OwnedQuery,
    ) -> impl Future<Output = QueryResult<Vec<LeaseTuple>>> + Send + 'c;

    /// A statement's count of matched rows (diesel-async's MariaDB connection sets
    /// `CLIENT_FOUND_ROWS`, so a row set to the value it had still counts).
    #[doc(hidden)]
    fn affected<'c>(
        &'c mut self,
        query: &'c OwnedQuery,
    ) -> impl Future<Output = QueryResult<usize>> + Send + 'c;

    /// DDL, which may hold several statements, without parameters.
    #[doc(hidden)]
    fn batch<'c>(
        &'c mut self,
        query: &'c OwnedQuery,
    ) -> impl Future<Output = QueryResult<()>> + Send + 'c;

    /// The names of leases released on `channel`, pushed by the database to this connection,
    /// which the stream then owns (it closes with the stream). `None` where the database
    /// pushes none: the default, and MariaDB's and SQLite's.
    #[doc(hidden)]
    fn release_events(
        self,
        channel: &str,
    ) -> impl Future<Output = Result<Option<ReleaseEvents>, BoxError>> + Send {
        let _ = (self, channel);
        std::future::ready(Ok(None))
    }

    /// Marks the connection broken, so that its pool (deadpool or bb8, which both ask
    /// diesel-async whether a connection is broken before they reuse it) closes it instead.
    #[doc(hidden)]
    fn discard(&mut self) {
        status(self).set_in_error();
    }

    /// Marks the connection broken while a statement is on its way, answering what it was
    /// marked before: a statement cut short there (its future dropped) leaves it broken, and
    /// its pool closes it rather than hand out a connection mid-protocol, whose next statement
    /// would read this one's answer. [`landed`](DieselConnection::landed) puts the mark back
    /// once the answer is read.
    #[doc(hidden)]
    fn in_flight(&mut self) -> diesel::connection::TransactionManagerStatus {
        std::mem::replace(
            status(self),
            diesel::connection::TransactionManagerStatus::InError,
        )
    }

    /// Puts back the mark [`in_flight`](DieselConnection::in_flight) answered, the statement's
    /// answer read.
    #[doc(hidden)]
    fn landed(&mut self, was: diesel::connection::TransactionManagerStatus) {
        *status(self) = was;
    }
}

/// The transaction manager's status of `connection`: whether diesel-async, and the pools that
/// ask it, take the connection for broken.
fn status<C: diesel_async::AsyncConnection>(
    connection: &mut C,
) -> &mut diesel::connection::TransactionManagerStatus {
    <C::TransactionManager as diesel_async::TransactionManager<C>>::transaction_manager_status_mut(
        connection,
    )
}

/// An inspect or list row as diesel reads it.
#[doc(hidden)]
pub type LeaseTuple = (String, String, i64, i64, i64, i64);

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// Implements [`DieselConnection`] for one connection type: the same code for each of the three,
/// diesel-async's `RunQueryDsl` on a [`Statement`](crate::statement::Statement) of the row's
/// SQL types, and `SimpleAsyncConnection` for DDL. Where the database pushes releases,
/// `release_events` names the function that listens on a connection (PostgreSQL's). Also
/// implements `DieselPool` for its deadpool and bb8 pools.
macro_rules! diesel_connection {
    (
        $conn:ty,
        dialect = $dialect:expr,
        name = $name:literal
        $(, release_events = $listen:path)?
        $(,)?
    ) => {
        impl $crate::connection::sealed::Sealed for $conn {}

        impl $crate::DieselConnection for $conn {
            const DIALECT: lease_sql::Dialect = $dialect;
            const NAME: &'static str = $name;

            fn int_pairs<'c>(
                &'c mut self,
                query: &'c $crate::statement::OwnedQuery,
            ) -> impl std::future::Future<Output = diesel::QueryResult<Vec<(i64, i64)>>> + Send + 'c
            {
                let statement =
                    $crate::statement::Statement::<$crate::statement::AcquireRow>::new(query);
                diesel_async::RunQueryDsl::load(statement, self)
            }

            fn ints<'c>(
                &'c mut self,
                query: &'c $crate::statement::OwnedQuery,
            ) -> impl std::future::Future<Output = diesel::QueryResult<Vec<(i64,)>>> + Send + 'c {
                let statement =
                    $crate::statement::Statement::<$crate::statement::PositionRow>::new(query);
                diesel_async::RunQueryDsl::load(statement, self)
            }

            fn text_pairs<'c>(
                &'c mut self,
                query: &'c $crate::statement::OwnedQuery,
            ) -> impl std::future::Future<Output = diesel::QueryResult<Vec<(String, String)>>>
            + Send
            + 'c {
                let statement =
                    $crate::statement::Statement::<$crate::statement::PairRow>::new(query);
                diesel_async::RunQueryDsl::load(statement, self)
            }

            fn lease_rows<'c>(
                &'c mut self,
                query: &'c $crate::statement::OwnedQuery,
            ) -> impl std::future::Future<
                Output = diesel::QueryResult<Vec<$crate::connection::LeaseTuple>>,
            > + Send
            + 'c {
                let statement =
                    $crate::statement::Statement::<$crate::statement::LeaseRow>::new(query);
                diesel_async::RunQueryDsl::load(statement, self)
            }

            fn affected<'c>(
                &'c mut self,
                query: &'c $crate::statement::OwnedQuery,
            ) -> impl std::future::Future<Output = diesel::QueryResult<usize>> + Send + 'c {
                let statement = $crate::statement::Execute::new(query);
                diesel_async::RunQueryDsl::execute(statement, self)
            }

            fn batch<'c>(
                &'c mut self,
                query: &'c $crate::statement::OwnedQuery,
            ) -> impl std::future::Future<Output = diesel::QueryResult<()>> + Send + 'c {
                diesel_async::SimpleAsyncConnection::batch_execute(self, query.sql())
            }

            $(
                fn release_events(
                    self,
                    channel: &str,
                ) -> impl std::future::Future<
                    Output = Result<Option<lease_core::ReleaseEvents>, lease_core::BoxError>,
                > + Send {
                    $listen(self, channel)
                }
            )?
        }

        $crate::pool::diesel_pools!($conn);
    };
}
pub(crate) use diesel_connection;
