//! [`DieselExecutor`]: how lease-sql's statements run on a diesel-async pool, one statement on a
//! connection taken for that statement alone and given back as soon as it has answered.

use std::fmt;
use std::future::Future;

use diesel::QueryResult;
use lease_core::{BoxError, ReleaseEvents, StoreErrorKind, async_trait};
use lease_sql::{Diagnoses, Dialect, Execute, ExecuteOn, LeaseRow, OnConnection, PoolState, Query};

use crate::acquire::why_none;
use crate::connection::LeaseTuple;
use crate::error_kind::error_kind;
use crate::finish::{Abandoned, Finish};
use crate::statement::OwnedQuery;
use crate::{DieselConnection, DieselPool};

/// A diesel-async pool (deadpool or bb8) as a lease store's [`Execute`]. Each statement is
/// prepared once per connection and runs on the caller's task; a caller that stops waiting
/// half-way leaves it to finish on a task of its own, so no connection goes back to the pool
/// mid-protocol (the crate's `finish` module says how, and when such a statement is given up).
///
/// A store is made from a pool directly: `DieselStore::new(pool)`.
#[derive(Clone)]
pub struct DieselExecutor<P> {
    pool: P,
    /// Why the pool gave no connection, one wait at a time (bb8).
    diagnoses: Diagnoses,
}

impl<P: DieselPool> DieselExecutor<P> {
    /// Statements on `pool`.
    pub fn new(pool: P) -> Self {
        Self {
            pool,
            diagnoses: Diagnoses::default(),
        }
    }

    /// Takes a connection and runs `query` on it, reading the answer as `R`.
    async fn run<R: Answer>(&self, query: OwnedQuery, failed: AfterError) -> Result<R, BoxError> {
        let pool = self.pool.clone();
        let diagnoses = self.diagnoses.clone();
        let abandoned = Abandoned::default();
        let caller = abandoned.clone();
        // A server may fall silent under a statement; SQLite, in process, does not.
        let limit = (<P::Connection as DieselConnection>::DIALECT != Dialect::Sqlite)
            .then_some(crate::finish::BACKGROUND_LIMIT);
        Finish::new(abandoned, limit, async move {
            let mut connection = match pool.connection().await {
                Ok(connection) => connection,
                Err(error) => {
                    let diagnosed = why_none(error, &diagnoses, &caller, pool.dedicated());
                    return Err(diagnosed.await);
                }
            };
            if caller.get() {
                return Err("the caller stopped waiting before the statement was sent".into());
            }
            // Marked broken until the answer is read: cut short in the background (see
            // `finish`), the statement leaves its connection to be closed, not reused.
            let was = connection.in_flight();
            let answer = R::run(&mut *connection, &query)
                .await
                .map_err(BoxError::from);
            connection.landed(was);
            if let Err(error) = &answer {
                if error_kind(&**error) == StoreErrorKind::ReadOnly {
                    // Its server accepts no writes (a standby, or a primary a switchover
                    // demoted): the pool discards it, and its next connection goes to whatever
                    // server the URL names now.
                    tracing::warn!(%error, "the server is read-only: closing its connection");
                    connection.discard();
                } else if failed == AfterError::Discard || crate::error_kind::session_over(&**error)
                {
                    // A script may have stopped inside a transaction of its own; a session the
                    // server ended (before the statement too: an idle connection it closed), or
                    // a socket that broke, never comes back: diesel-async's
                    // MariaDB connection does not reconnect and reports itself healthy, so a
                    // pool that recycles without a ping (`RecyclingMethod::Fast`) would hand it
                    // out again and again.
                    connection.discard();
                }
            }
            // The connection goes back to the pool here, before the answer is looked at.
            drop(connection);
            answer
        })
        .await
    }
}

/// What becomes of a pooled connection whose statement failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AfterError {
    /// Back to the pool, unless its server is read-only.
    Keep,
    /// Discarded: a script may have stopped inside a transaction of its own.
    Discard,
}

impl<P: DieselPool> From<P> for DieselExecutor<P> {
    fn from(pool: P) -> Self {
        Self::new(pool)
    }
}

/// The database and the pool's kind, never the URL the pool connects with (it may hold a
/// password).
impl<P: DieselPool> fmt::Debug for DieselExecutor<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DieselExecutor")
            .field("database", &<P::Connection as DieselConnection>::NAME)
            .field("pool", &P::KIND)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl<P: DieselPool> Execute for DieselExecutor<P> {
    type Pool = P;

    fn dialect(&self) -> Dialect {
        <P::Connection as DieselConnection>::DIALECT
    }

    fn pool(&self) -> &P {
        &self.pool
    }

    fn pool_state(&self) -> PoolState {
        self.pool.state()
    }

    fn classify(&self, error: &(dyn std::error::Error + Send + Sync + 'static)) -> StoreErrorKind {
        error_kind(error)
    }

    fn database_message<'e>(
        &self,
        error: &'e (dyn std::error::Error + Send + Sync + 'static),
    ) -> Option<&'e str> {
        crate::error_kind::database_message(error)
    }

    fn answer_lost(&self, error: &(dyn std::error::Error + Send + Sync + 'static)) -> bool {
        crate::error_kind::answer_lost(error)
    }

    async fn int_pairs(&self, query: Query<'_>) -> Result<Vec<(i64, i64)>, BoxError> {
        self.run(query.into(), AfterError::Keep).await
    }

    async fn ints(&self, query: Query<'_>) -> Result<Vec<i64>, BoxError> {
        let rows: Vec<(i64,)> = self.run(query.into(), AfterError::Keep).await?;
        Ok(rows.into_iter().map(|(int,)| int).collect())
    }

    async fn text_pairs(&self, query: Query<'_>) -> Result<Vec<(String, String)>, BoxError> {
        self.run(query.into(), AfterError::Keep).await
    }

    async fn lease_rows(&self, query: Query<'_>) -> Result<Vec<LeaseRow>, BoxError> {
        let rows: Vec<LeaseTuple> = self.run(query.into(), AfterError::Keep).await?;
        Ok(rows.into_iter().map(LeaseRow::from).collect())
    }

    async fn affected(&self, query: Query<'_>) -> Result<u64, BoxError> {
        let Affected(count) = self.run(query.into(), AfterError::Keep).await?;
        // A count of rows always fits.
        Ok(count as u64)
    }

    /// A script that failed part-way may have left the connection inside a transaction it
    /// began (SQLite's rebuild of a table, `SAVEPOINT` to `RELEASE`, holding the
    /// database's write lock), which diesel's transaction manager does not see: the pool
    /// discards the connection, whatever the error.
    async fn batch(&self, sql: &str) -> Result<(), BoxError> {
        let Done = self
            .run(OwnedQuery::without_params(sql), AfterError::Discard)
            .await?;
        Ok(())
    }

    /// On PostgreSQL, `LISTEN` on a connection of its own, made with the pool's manager but
    /// outside the pool ([`DieselPool`]'s `dedicated`), so no connection of the pool is pinned;
    /// the stream ends when that connection fails, and lease-core polls until its next wait
    /// subscribes again. `None` on MariaDB and SQLite, whose connections push nothing
    /// ([`DieselConnection`]'s `release_events`); the store asks only where lease-sql names a
    /// release channel, which is on PostgreSQL alone.
    async fn release_events(&self, channel: &str) -> Result<Option<ReleaseEvents>, BoxError> {
        let connection = self.pool.dedicated().await?;
        connection.release_events(channel).await
    }
}

/// Statements on the caller's own connection, inside its `transaction`, for the fenced check.
/// They run on the caller's task, as the rest of the caller's transaction does.
impl<'c, P: DieselPool> ExecuteOn<&'c mut P::Connection> for DieselExecutor<P> {
    fn affected_on<'a>(
        &'a self,
        conn: &'c mut P::Connection,
        stmt: Query<'a>,
    ) -> OnConnection<'a, u64>
    where
        'c: 'a,
    {
        let query = OwnedQuery::from(stmt);
        Box::pin(async move {
            let count = conn.affected(&query).await?;
            // A count of rows always fits.
            Ok(count as u64)
        })
    }

    fn batch_on<'a>(&'a self, conn: &'c mut P::Connection, sql: String) -> OnConnection<'a, ()>
    where
        'c: 'a,
    {
        let query = OwnedQuery::from(Query::new(sql, Vec::new()));
        Box::pin(async move {
            conn.batch(&query).await?;
            Ok(())
        })
    }
}

/// What a statement answers with, and which of the connection's methods reads it.
trait Answer: Sized + Send + 'static {
    fn run<'c, C: DieselConnection>(
        connection: &'c mut C,
        query: &'c OwnedQuery,
    ) -> impl Future<Output = QueryResult<Self>> + Send + 'c;
}

impl Answer for Vec<(i64, i64)> {
    fn run<'c, C: DieselConnection>(
        connection: &'c mut C,
        query: &'c OwnedQuery,
    ) -> impl Future<Output = QueryResult<Self>> + Send + 'c {
        connection.int_pairs(query)
    }
}

impl Answer for Vec<(i64,)> {
    fn run<'c, C: DieselConnection>(
        connection: &'c mut C,
        query: &'c OwnedQuery,
    ) -> impl Future<Output = QueryResult<Self>> + Send + 'c {
        connection.ints(query)
    }
}

impl Answer for Vec<(String, String)> {
    fn run<'c, C: DieselConnection>(
        connection: &'c mut C,
        query: &'c OwnedQuery,
    ) -> impl Future<Output = QueryResult<Self>> + Send + 'c {
        connection.text_pairs(query)
    }
}

impl Answer for Vec<LeaseTuple> {
    fn run<'c, C: DieselConnection>(
        connection: &'c mut C,
        query: &'c OwnedQuery,
    ) -> impl Future<Output = QueryResult<Self>> + Send + 'c {
        connection.lease_rows(query)
    }
}

/// A count of matched rows.
struct Affected(usize);

impl Answer for Affected {
    fn run<'c, C: DieselConnection>(
        connection: &'c mut C,
        query: &'c OwnedQuery,
    ) -> impl Future<Output = QueryResult<Self>> + Send + 'c {
        let count = connection.affected(query);
        async move { count.await.map(Affected) }
    }
}

/// DDL done: it answers with nothing.
struct Done;

impl Answer for Done {
    fn run<'c, C: DieselConnection>(
        connection: &'c mut C,
        query: &'c OwnedQuery,
    ) -> impl Future<Output = QueryResult<Self>> + Send + 'c {
        let done = connection.batch(query);
        async move { done.await.map(|()| Done) }
    }
}
