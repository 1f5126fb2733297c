//! Running one of lease-sql's queries on the pool: one statement on a connection borrowed for
//! that statement alone.

use lease_core::{Error, LeaseName, Operation};
use sqlx::{AssertSqlSafe, Database, Executor, FromRow, IntoArguments, Pool};

use crate::SqlxDatabase;

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

/// One pool and its mode: the half of a store that talks to the database.
pub(crate) struct Runner<'a, DB: Database> {
    pub(crate) pool: &'a Pool<DB>,
    pub(crate) mode: Mode,
    pub(crate) operation: Operation,
    pub(crate) name: Option<&'a LeaseName>,
}

impl<DB> Runner<'_, DB>
where
    DB: SqlxDatabase,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
{
    pub(crate) fn error(&self, source: impl Into<lease_core::BoxError>) -> Error {
        Error::store(self.operation, self.name, source)
    }

    /// The rows the statement returns, each read as `O`.
    pub(crate) async fn rows<O>(&self, query: lease_sql::Query<'_>) -> Result<Vec<O>, Error>
    where
        O: for<'r> FromRow<'r, DB::Row> + Send + Unpin,
    {
        let rows = match self.mode {
            Mode::Prepared => self.prepared(query).fetch_all(self.pool).await,
            Mode::Inline => {
                let sql = query.inline_postgres().map_err(|e| self.error(e))?;
                sqlx::raw_sql(AssertSqlSafe(sql)).fetch_all(self.pool).await
            }
        }
        .map_err(|e| self.error(e))?;
        rows.iter()
            .map(|row| O::from_row(row).map_err(|e| self.error(e)))
            .collect()
    }

    /// How many rows the statement matched.
    pub(crate) async fn affected(&self, query: lease_sql::Query<'_>) -> Result<u64, Error> {
        let result = match self.mode {
            Mode::Prepared => self.prepared(query).execute(self.pool).await,
            Mode::Inline => {
                let sql = query.inline_postgres().map_err(|e| self.error(e))?;
                sqlx::raw_sql(AssertSqlSafe(sql)).execute(self.pool).await
            }
        }
        .map_err(|e| self.error(e))?;
        Ok(DB::rows_affected(&result))
    }

    fn prepared<'q>(
        &self,
        query: lease_sql::Query<'_>,
    ) -> sqlx::query::Query<'q, DB, <DB as Database>::Arguments> {
        let (sql, params) = query.into_parts();
        params
            .into_iter()
            .fold(sqlx::query(AssertSqlSafe(sql.into_owned())), DB::bind)
    }
}
