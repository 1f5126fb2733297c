//! [`SqlxExecutor`]: how lease-sql's statements run on a sqlx pool, one statement on a connection
//! borrowed for that statement alone.

use std::fmt;

use futures::{StreamExt, TryFutureExt};

use lease_core::{BoxError, ReleaseEvents, StoreErrorKind, async_trait};
use lease_sql::{
    BatchFailed, Connect, ConnectWith, CountedOnConnection, Diagnoses, Dialect, Execute, ExecuteOn,
    LeaseRow, OnConnection, PoolState, Query,
};
use sqlx::pool::PoolConnection;
use sqlx::{AssertSqlSafe, Database, Executor, FromRow, IntoArguments, Pool};

use crate::SqlxDatabase;
use crate::closing_connection::ClosingConnection;
use crate::database::ConnectOptionsOf;
use crate::error_kind::error_kind;
use crate::no_connection::NoConnection;

/// A sqlx pool as a lease store's [`Execute`]: it prepares each statement once per connection
/// (sqlx's statement cache), or, on PostgreSQL behind PgBouncer, sends it with its parameters
/// inline (see [`PgProtocol`](crate::PgProtocol)).
///
/// A store is made from a pool directly (`PgLeaseStore::new(pool)`); make the executor yourself
/// only to choose the protocol.
pub struct SqlxExecutor<DB: Database> {
    pool: Pool<DB>,
    mode: Mode,
    /// Why the pool gave no connection, one wait at a time.
    diagnoses: Diagnoses,
}

/// How statements reach the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Prepared once per connection and cached (sqlx's default).
    Prepared,
    /// PostgreSQL only: parameters written in as literals and sent through the simple query
    /// protocol, one message per statement (see `PgProtocol::SimpleInline`).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    Inline,
}

impl<DB: SqlxDatabase> SqlxExecutor<DB> {
    /// Statements on `pool`, prepared once per connection.
    pub fn new(pool: Pool<DB>) -> Self {
        Self {
            pool,
            mode: Mode::Prepared,
            diagnoses: Diagnoses::default(),
        }
    }

    /// The pool statements run on.
    pub fn pool(&self) -> &Pool<DB> {
        &self.pool
    }

    /// A connection from the pool, or why there is none (`acquire::acquire`).
    pub(crate) async fn connection(&self) -> Result<PoolConnection<DB>, NoConnection> {
        crate::acquire::acquire(&self.pool, &self.diagnoses).await
    }

    #[cfg(feature = "postgres")]
    pub(crate) fn with_mode(self, mode: Mode) -> Self {
        Self { mode, ..self }
    }

    #[cfg(feature = "postgres")]
    pub(crate) fn mode(&self) -> Mode {
        self.mode
    }
}

impl<DB: SqlxDatabase> From<Pool<DB>> for SqlxExecutor<DB> {
    fn from(pool: Pool<DB>) -> Self {
        Self::new(pool)
    }
}

impl<DB: Database> Clone for SqlxExecutor<DB> {
    fn clone(&self) -> Self {
        Self {
            pool: self.pool.clone(),
            mode: self.mode,
            diagnoses: self.diagnoses.clone(),
        }
    }
}

/// The database and the protocol, never the pool's connect options (they hold the URL and the
/// password).
impl<DB: SqlxDatabase> fmt::Debug for SqlxExecutor<DB> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqlxExecutor")
            .field("database", &<DB as SqlxDatabase>::NAME)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl<DB> SqlxExecutor<DB>
where
    DB: SqlxDatabase,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
{
    /// `query` as one text for the simple protocol where this executor sends it so
    /// ([`PgProtocol::SimpleInline`](crate::PgProtocol::SimpleInline)), `None` where it binds
    /// its parameters.
    fn inline(&self, query: &Query<'_>) -> Result<Option<String>, BoxError> {
        match self.mode {
            Mode::Prepared => Ok(None),
            Mode::Inline => Ok(Some(query.inline_postgres()?)),
        }
    }

    /// The rows the statement returns, each read as `O`.
    async fn rows<O>(&self, query: Query<'_>) -> Result<Vec<O>, BoxError>
    where
        O: for<'r> FromRow<'r, DB::Row> + Send + Unpin,
    {
        // Written before a connection is taken: one that cannot be (a NUL in a text) takes
        // none, and closes none.
        let inline = self.inline(&query)?;
        let mut connection = ClosingConnection::new(self.connection().await?);
        let rows = match inline {
            None => prepared(query).fetch_all(connection.connection()).await,
            Some(sql) => {
                sqlx::raw_sql(AssertSqlSafe(sql))
                    .fetch_all(connection.connection())
                    .await
            }
        };
        // Answered: the connection may go back to the pool (unless the answer says otherwise).
        connection.ended();
        let rows = rows.map_err(|error| close_if_read_only::<DB>(&mut connection, error))?;
        rows.iter()
            .map(|row| O::from_row(row).map_err(BoxError::from))
            .collect()
    }
}

/// Marks `connection` to be closed instead of given back to the pool when `error` says its
/// server accepts no writes (a standby, or a primary a switchover demoted): the pool's next
/// connection then goes to whatever server the URL names now. Answers the error, boxed.
fn close_if_read_only<DB: SqlxDatabase>(
    connection: &mut ClosingConnection<DB>,
    error: sqlx::Error,
) -> BoxError {
    let error = BoxError::from(error);
    if error_kind::<DB>(&*error) == StoreErrorKind::ReadOnly {
        tracing::warn!(%error, "the server is read-only: closing its connection");
        connection.close_on_drop();
    }
    error
}

/// `query` bound, kept in the connection's statement cache only when its text is fixed
/// ([`Query::is_fixed`]): a renew-many written for one batch size would push the store's other
/// statements out of sqlx's cache.
fn prepared<'q, DB: SqlxDatabase>(
    query: Query<'q>,
) -> sqlx::query::Query<'q, DB, <DB as Database>::Arguments> {
    let fixed = query.is_fixed();
    let (sql, params) = query.into_parts();
    params
        .into_iter()
        .fold(sqlx::query(AssertSqlSafe(sql.into_owned())), DB::bind)
        .persistent(fixed)
}

#[async_trait]
impl<DB> Execute for SqlxExecutor<DB>
where
    DB: SqlxDatabase,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    (i64, i64): for<'r> FromRow<'r, DB::Row>,
    (i64,): for<'r> FromRow<'r, DB::Row>,
    (String, String): for<'r> FromRow<'r, DB::Row>,
    (String, String, i64, i64, i64, i64): for<'r> FromRow<'r, DB::Row>,
{
    type Pool = Pool<DB>;

    fn dialect(&self) -> Dialect {
        DB::DIALECT
    }

    fn pool(&self) -> &Pool<DB> {
        &self.pool
    }

    /// Not with `PgProtocol::SimpleInline`, the mode for PgBouncer's transaction pooling.
    fn prepares(&self) -> bool {
        self.mode == Mode::Prepared
    }

    fn classify(&self, error: &(dyn std::error::Error + Send + Sync + 'static)) -> StoreErrorKind {
        error_kind::<DB>(error)
    }

    fn classify_connect(error: &(dyn std::error::Error + Send + Sync + 'static)) -> StoreErrorKind {
        error_kind::<DB>(error)
    }

    fn describe(&self, error: &(dyn std::error::Error + Send + Sync + 'static)) -> Option<String> {
        crate::describe::describe(error)
    }

    fn code_ends_session(
        &self,
        error: &(dyn std::error::Error + Send + Sync + 'static),
    ) -> Option<bool> {
        crate::error_kind::code_ends_session::<DB>(error)
    }

    fn database_message<'e>(
        &self,
        error: &'e (dyn std::error::Error + Send + Sync + 'static),
    ) -> Option<&'e str> {
        crate::describe::database_message(error)
    }

    fn pool_state(&self) -> PoolState {
        PoolState {
            size: self.pool.size(),
            idle: u32::try_from(self.pool.num_idle()).unwrap_or(u32::MAX),
        }
    }

    async fn int_pairs(&self, query: Query<'_>) -> Result<Vec<(i64, i64)>, BoxError> {
        self.rows(query).await
    }

    async fn ints(&self, query: Query<'_>) -> Result<Vec<i64>, BoxError> {
        let rows: Vec<(i64,)> = self.rows(query).await?;
        Ok(rows.into_iter().map(|(int,)| int).collect())
    }

    async fn text_pairs(&self, query: Query<'_>) -> Result<Vec<(String, String)>, BoxError> {
        self.rows(query).await
    }

    async fn lease_rows(&self, query: Query<'_>) -> Result<Vec<LeaseRow>, BoxError> {
        let rows: Vec<(String, String, i64, i64, i64, i64)> = self.rows(query).await?;
        Ok(rows.into_iter().map(LeaseRow::from).collect())
    }

    async fn affected(&self, query: Query<'_>) -> Result<u64, BoxError> {
        let inline = self.inline(&query)?;
        let mut connection = ClosingConnection::new(self.connection().await?);
        let result = match inline {
            None => prepared(query).execute(connection.connection()).await,
            Some(sql) => {
                sqlx::raw_sql(AssertSqlSafe(sql))
                    .execute(connection.connection())
                    .await
            }
        };
        connection.ended();
        let result = result.map_err(|error| close_if_read_only::<DB>(&mut connection, error))?;
        Ok(DB::rows_affected(&result))
    }

    /// A script that failed or was dropped part-way may have left the connection inside a
    /// transaction it began (SQLite's rebuild of a table, `SAVEPOINT` to `RELEASE`, holding
    /// the database's write lock), which sqlx does not see and its pool would hand on: the
    /// connection is closed instead, whatever the error.
    async fn batch(&self, sql: &str) -> Result<(), BoxError> {
        let mut connection = ClosingConnection::new(self.connection().await?);
        sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
            .execute(connection.connection())
            .await?;
        connection.ended();
        Ok(())
    }

    async fn release_events(&self, channel: &str) -> Result<Option<ReleaseEvents>, BoxError> {
        DB::release_events(&self.pool, channel).await
    }
}

#[async_trait]
impl<DB> Connect for SqlxExecutor<DB>
where
    Self: Execute,
    DB: SqlxDatabase,
{
    async fn connect(url: &str) -> Result<Self, BoxError> {
        Ok(Self::new(DB::connect_pool(url).await?))
    }
}

/// A pool from sqlx's connect options of `DB`, with the settings a lease store needs.
#[async_trait]
impl<DB> ConnectWith<ConnectOptionsOf<DB>> for SqlxExecutor<DB>
where
    Self: Execute,
    DB: SqlxDatabase,
{
    async fn connect_with(options: ConnectOptionsOf<DB>) -> Result<Self, BoxError> {
        Ok(Self::new(DB::connect_pool_with(options).await?))
    }
}

/// A connection of `DB`'s, as the caller's transaction gives it (`&mut *tx`).
type Conn<DB> = <DB as Database>::Connection;

/// Statements on the caller's own connection or transaction (`&mut *tx`), for the fenced check.
impl<'c, DB> ExecuteOn<&'c mut Conn<DB>> for SqlxExecutor<DB>
where
    Self: Execute,
    DB: SqlxDatabase,
    &'c mut Conn<DB>: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
{
    fn affected_on<'a>(&'a self, conn: &'c mut Conn<DB>, stmt: Query<'a>) -> OnConnection<'a, u64>
    where
        'c: 'a,
    {
        // The driver's own future is `Send`; built here, it is all the answer waits on.
        let statement = match self.mode {
            Mode::Prepared => conn.execute(prepared(stmt)),
            Mode::Inline => match stmt.inline_postgres() {
                Ok(sql) => conn.execute(sqlx::raw_sql(AssertSqlSafe(sql))),
                Err(error) => return Box::pin(std::future::ready(Err(error.into()))),
            },
        };
        Box::pin(async move { Ok(DB::rows_affected(&statement.await?)) })
    }

    fn batch_on<'a>(&'a self, conn: &'c mut Conn<DB>, sql: String) -> OnConnection<'a, ()>
    where
        'c: 'a,
    {
        // The driver's own future is `Send`, as for `affected_on`.
        Box::pin(
            conn.execute(sqlx::raw_sql(AssertSqlSafe(sql)))
                .map_ok(drop)
                .err_into(),
        )
    }

    fn batch_counted_on<'a>(
        &'a self,
        conn: &'c mut Conn<DB>,
        sql: String,
    ) -> CountedOnConnection<'a>
    where
        'c: 'a,
    {
        // The stream `batch_on`'s `execute` collects: one answer per statement, as each
        // completes, then the error of the one that failed.
        let mut answers = conn.execute_many(sqlx::raw_sql(AssertSqlSafe(sql)));
        Box::pin(async move {
            let mut completed = 0;
            while let Some(answer) = answers.next().await {
                if let Err(error) = answer {
                    return Err(BatchFailed {
                        error: error.into(),
                        completed: Some(completed),
                    });
                }
                completed += 1;
            }
            Ok(())
        })
    }
}

#[cfg(all(test, feature = "mysql"))]
mod tests {
    use super::*;
    use lease_core::{LeaseName, Ttl};
    use lease_sql::{Statements, TableName};

    #[test]
    fn only_texts_fixed_for_every_call_stay_in_the_statement_cache() {
        let statements = Statements::new(Dialect::MySql, &TableName::default());
        let ttl = Ttl::from_secs(60).unwrap();
        let full: Vec<(String, String)> = (0..Dialect::MySql.renew_many_batch())
            .map(|i| (format!("lease-{i}"), format!("holder-{i}")))
            .collect();
        let full: Vec<(&str, &str)> = full.iter().map(|(n, h)| (n.as_str(), h.as_str())).collect();
        let kept = |query| sqlx::Execute::persistent(&prepared::<sqlx::MySql>(query));
        assert!(kept(statements.renew_many(&full, ttl)), "a full batch");
        assert!(
            !kept(statements.renew_many(&full[..3], ttl)),
            "a batch of three, written for its size"
        );
        let name = LeaseName::new("sweep").unwrap();
        assert!(kept(statements.inspect(&name)), "the statements' own texts");
    }
}
