//! Running one of lease-sql's queries on the pool: one statement on a connection taken for that
//! statement alone and given back as soon as it has answered.

use std::future::Future;

use diesel::QueryResult;
use lease_core::{BoxError, Error, LeaseName, Operation};

use crate::connection::LeaseTuple;
use crate::{DieselConnection, DieselPool};

/// One pool, and what to name in an error: the half of a store that talks to the database.
pub(crate) struct Runner<'a, P> {
    pub(crate) pool: &'a P,
    pub(crate) operation: Operation,
    pub(crate) name: Option<&'a LeaseName>,
}

impl<P: DieselPool> Runner<'_, P> {
    pub(crate) fn error(&self, source: impl Into<BoxError>) -> Error {
        Error::store(self.operation, self.name, source)
    }

    /// The rows the statement returns, read as `R`.
    pub(crate) async fn rows<R: Answer>(&self, query: lease_sql::Query<'_>) -> Result<R, Error> {
        let mut connection = self.pool.connection().await.map_err(|e| self.error(e))?;
        let answer = R::run(&mut *connection, query).await;
        // The connection goes back to the pool here, before the answer is looked at.
        drop(connection);
        answer.map_err(|e| self.error(e))
    }

    /// How many rows the statement matched.
    pub(crate) async fn affected(&self, query: lease_sql::Query<'_>) -> Result<usize, Error> {
        self.rows::<Affected>(query)
            .await
            .map(|Affected(count)| count)
    }

    /// Runs DDL.
    pub(crate) async fn batch(&self, sql: &str) -> Result<(), Error> {
        let mut connection = self.pool.connection().await.map_err(|e| self.error(e))?;
        let done = connection.batch(sql).await;
        drop(connection);
        done.map_err(|e| self.error(e))
    }
}

/// What a statement answers with, and which of the connection's methods reads it.
pub(crate) trait Answer: Sized + Send {
    fn run<'c, C: DieselConnection>(
        connection: &'c mut C,
        query: lease_sql::Query<'c>,
    ) -> impl Future<Output = QueryResult<Self>> + Send + 'c;
}

impl Answer for Vec<(i64, i64)> {
    fn run<'c, C: DieselConnection>(
        connection: &'c mut C,
        query: lease_sql::Query<'c>,
    ) -> impl Future<Output = QueryResult<Self>> + Send + 'c {
        connection.acquire_rows(query)
    }
}

impl Answer for Vec<(String, String)> {
    fn run<'c, C: DieselConnection>(
        connection: &'c mut C,
        query: lease_sql::Query<'c>,
    ) -> impl Future<Output = QueryResult<Self>> + Send + 'c {
        connection.pair_rows(query)
    }
}

impl Answer for Vec<LeaseTuple> {
    fn run<'c, C: DieselConnection>(
        connection: &'c mut C,
        query: lease_sql::Query<'c>,
    ) -> impl Future<Output = QueryResult<Self>> + Send + 'c {
        connection.lease_rows(query)
    }
}

/// A count of matched rows.
pub(crate) struct Affected(usize);

impl Answer for Affected {
    fn run<'c, C: DieselConnection>(
        connection: &'c mut C,
        query: lease_sql::Query<'c>,
    ) -> impl Future<Output = QueryResult<Self>> + Send + 'c {
        let count = connection.affected(query);
        async move { count.await.map(Affected) }
    }
}
