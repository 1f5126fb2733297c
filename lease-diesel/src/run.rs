//! Running one of lease-sql's queries on the pool: one statement on a connection taken for that
//! statement alone and given back as soon as it has answered.
//!
//! The statement runs on a tokio task of its own, which takes the connection from the pool and
//! owns it until the statement has answered. A caller may stop waiting at any moment (lease-core
//! puts a timeout around renewals), and a pool or a driver dropped half-way can leave a
//! connection mid-protocol: bb8 puts back a connection whose check-out ping was cut, and
//! diesel-async's MariaDB connection then reads half a reply as the next statement's. On its
//! own task nothing is cut: the pool hands the connection over whole, the statement finishes and
//! the connection goes back in order. A caller that stopped waiting before the connection came
//! has its statement not sent at all; one that stopped later has it run, as a statement already
//! sent would anyway.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use diesel::QueryResult;
use lease_core::BoxError;

use crate::connection::LeaseTuple;
use crate::query::OwnedQuery;
use crate::{DieselConnection, DieselPool};

/// One pool: the half of a store that talks to the database.
pub(crate) struct Runner<'a, P> {
    pub(crate) pool: &'a P,
}

impl<P: DieselPool> Runner<'_, P> {
    /// The rows the statement returns, read as `R`.
    pub(crate) async fn rows<R: Answer>(&self, query: lease_sql::Query<'_>) -> Result<R, BoxError> {
        self.on_own_task(OwnedQuery::from(query)).await
    }

    /// How many rows the statement matched.
    pub(crate) async fn affected(&self, query: lease_sql::Query<'_>) -> Result<usize, BoxError> {
        self.rows::<Affected>(query)
            .await
            .map(|Affected(count)| count)
    }

    /// Runs DDL, which may hold several statements, without parameters.
    pub(crate) async fn batch(&self, sql: &str) -> Result<(), BoxError> {
        self.on_own_task::<Done>(OwnedQuery::without_params(sql))
            .await
            .map(|Done| ())
    }

    /// Takes a connection and runs `query` on it, both on a task of their own (see above).
    async fn on_own_task<R: Answer>(&self, query: OwnedQuery) -> Result<R, BoxError> {
        let pool = self.pool.clone();
        let (waiting, still_waiting) = Waiting::new();
        let task = tokio::spawn(async move {
            let mut connection = pool.connection().await.map_err(Failure::Pool)?;
            if !still_waiting.load(Ordering::Acquire) {
                return Err(Failure::Abandoned);
            }
            let answer = R::run(&mut *connection, query).await;
            // The connection goes back to the pool here, before the answer is looked at.
            drop(connection);
            answer.map_err(Failure::Statement)
        });
        let outcome = task.await;
        drop(waiting);
        match outcome {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(Failure::Pool(error))) => Err(error),
            Ok(Err(Failure::Statement(error))) => Err(error.into()),
            Ok(Err(Failure::Abandoned)) => Err("the caller stopped waiting".into()),
            Err(panicked) => Err(panicked.into()),
        }
    }
}

/// Why a statement's task gave no answer.
enum Failure {
    Pool(BoxError),
    Statement(diesel::result::Error),
    /// Only seen by nobody: the caller dropped its future before the connection came.
    Abandoned,
}

/// Set while the caller still waits for its statement; cleared when its future is dropped,
/// whether it finished or was cancelled.
struct Waiting(Arc<AtomicBool>);

impl Waiting {
    /// The caller's half, and the flag the task reads.
    fn new() -> (Self, Arc<AtomicBool>) {
        let flag = Arc::new(AtomicBool::new(true));
        (Self(Arc::clone(&flag)), flag)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// What a statement answers with, and which of the connection's methods reads it.
pub(crate) trait Answer: Sized + Send + 'static {
    fn run<C: DieselConnection>(
        connection: &mut C,
        query: OwnedQuery,
    ) -> impl Future<Output = QueryResult<Self>> + Send + '_;
}

impl Answer for Vec<(i64, i64)> {
    fn run<C: DieselConnection>(
        connection: &mut C,
        query: OwnedQuery,
    ) -> impl Future<Output = QueryResult<Self>> + Send + '_ {
        connection.acquire_rows(query)
    }
}

impl Answer for Vec<(String, String)> {
    fn run<C: DieselConnection>(
        connection: &mut C,
        query: OwnedQuery,
    ) -> impl Future<Output = QueryResult<Self>> + Send + '_ {
        connection.pair_rows(query)
    }
}

impl Answer for Vec<LeaseTuple> {
    fn run<C: DieselConnection>(
        connection: &mut C,
        query: OwnedQuery,
    ) -> impl Future<Output = QueryResult<Self>> + Send + '_ {
        connection.lease_rows(query)
    }
}

/// DDL done: it answers with nothing.
pub(crate) struct Done;

impl Answer for Done {
    fn run<C: DieselConnection>(
        connection: &mut C,
        query: OwnedQuery,
    ) -> impl Future<Output = QueryResult<Self>> + Send + '_ {
        let done = connection.batch(query.into_sql());
        async move { done.await.map(|()| Done) }
    }
}

/// A count of matched rows.
pub(crate) struct Affected(usize);

impl Answer for Affected {
    fn run<C: DieselConnection>(
        connection: &mut C,
        query: OwnedQuery,
    ) -> impl Future<Output = QueryResult<Self>> + Send + '_ {
        let count = connection.affected(query);
        async move { count.await.map(Affected) }
    }
}
