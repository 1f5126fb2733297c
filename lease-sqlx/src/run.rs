//! Running one of lease-sql's queries on the pool: one statement on a connection borrowed for
//! that statement alone.

use lease_core::{BoxError, Error, Operation};
use sqlx::{AssertSqlSafe, Database, Executor, FromRow, IntoArguments};

use crate::{SqlxDatabase, SqlxStore};

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

impl<DB> SqlxStore<DB>
where
    DB: SqlxDatabase,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
{
    /// The rows the statement returns, each read as `O`.
    pub(crate) async fn rows<O>(&self, query: lease_sql::Query<'_>) -> Result<Vec<O>, BoxError>
    where
        O: for<'r> FromRow<'r, DB::Row> + Send + Unpin,
    {
        let rows = match self.mode {
            Mode::Prepared => prepared(query).fetch_all(&self.pool).await?,
            Mode::Inline => {
                let sql = query.inline_postgres()?;
                sqlx::raw_sql(AssertSqlSafe(sql))
                    .fetch_all(&self.pool)
                    .await?
            }
        };
        rows.iter()
            .map(|row| O::from_row(row).map_err(BoxError::from))
            .collect()
    }

    /// How many rows the statement matched.
    pub(crate) async fn affected(&self, query: lease_sql::Query<'_>) -> Result<u64, BoxError> {
        let result = match self.mode {
            Mode::Prepared => prepared(query).execute(&self.pool).await?,
            Mode::Inline => {
                let sql = query.inline_postgres()?;
                sqlx::raw_sql(AssertSqlSafe(sql))
                    .execute(&self.pool)
                    .await?
            }
        };
        Ok(DB::rows_affected(&result))
    }

    /// Creates the lease table if it does not exist: safe to call from every instance at
    /// start, also at the same moment (PostgreSQL takes a transaction-level advisory lock
    /// around it). Sent through the simple protocol, so it works behind PgBouncer too.
    ///
    /// It needs the `CREATE` privilege on the schema (PostgreSQL) or database (MariaDB); the
    /// store itself needs only `SELECT, INSERT, UPDATE` on the table. Those who run their own
    /// migrations can skip it and use the DDL shipped in `lease-sql/sql/`.
    ///
    /// # Errors
    /// [`Error::Store`] with [`Operation::Setup`].
    pub async fn setup(&self) -> Result<(), Error> {
        sqlx::raw_sql(sqlx::AssertSqlSafe(self.statements.setup().to_owned()))
            .execute(&self.pool)
            .await
            .map(drop)
            .map_err(|e| Error::store(Operation::Setup, None, e))
    }
}

fn prepared<'q, DB: SqlxDatabase>(
    query: lease_sql::Query<'_>,
) -> sqlx::query::Query<'q, DB, <DB as Database>::Arguments> {
    let (sql, params) = query.into_parts();
    params
        .into_iter()
        .fold(sqlx::query(AssertSqlSafe(sql.into_owned())), DB::bind)
}

/// Implements [`Execute`](lease_sql::Execute) for `SqlxStore<$db>`. One impl per database
/// rather than one generic impl, so that the compiler checks that each future is `Send` for a
/// concrete database; the `LeaseStore` impl on top of it is generic.
macro_rules! sqlx_execute {
    ($db:ty) => {
        #[lease_core::async_trait]
        impl lease_sql::Execute for $crate::SqlxStore<$db> {
            async fn int_pairs(
                &self,
                query: lease_sql::Query<'_>,
            ) -> Result<Vec<(i64, i64)>, lease_core::BoxError> {
                self.rows(query).await
            }

            async fn text_pairs(
                &self,
                query: lease_sql::Query<'_>,
            ) -> Result<Vec<(String, String)>, lease_core::BoxError> {
                self.rows(query).await
            }

            async fn lease_rows(
                &self,
                query: lease_sql::Query<'_>,
            ) -> Result<Vec<lease_sql::LeaseRow>, lease_core::BoxError> {
                let rows: Vec<(String, String, i64, i64, i64, i64)> = self.rows(query).await?;
                Ok(rows.into_iter().map(lease_sql::LeaseRow::from).collect())
            }

            async fn affected(
                &self,
                query: lease_sql::Query<'_>,
            ) -> Result<u64, lease_core::BoxError> {
                self.affected(query).await
            }
        }
    };
}
pub(crate) use sqlx_execute;
