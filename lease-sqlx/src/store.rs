//! [`SqlxStore`]: a lease table reached through a sqlx pool.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use lease_core::{Error, Fence, HolderId, LeaseInfo, LeaseName, Operation, Ttl};
use lease_sql::{LeaseRow, RenewManyResult, Statements, TableName};
use sqlx::{Database, Executor, IntoArguments, Pool};

use crate::SqlxDatabase;
use crate::run::{Mode, Runner};

/// Leases in a table, reached through a sqlx pool of PostgreSQL, MariaDB or SQLite
/// connections.
///
/// Every operation is one statement on a connection borrowed from the pool for that statement
/// alone, so holding a lease holds no connection. Every time comes from the database's clock.
///
/// Make one per pool and table with [`new`](SqlxStore::new) or
/// [`with_table`](SqlxStore::with_table), create the table with `setup()` (or the shipped SQL
/// files), and share it: it is cheap to clone.
pub struct SqlxStore<DB: Database> {
    pub(crate) pool: Pool<DB>,
    pub(crate) statements: Arc<Statements>,
    pub(crate) mode: Mode,
}

impl<DB: SqlxDatabase> SqlxStore<DB> {
    /// A store on `pool` using the table `leases`.
    pub fn new(pool: Pool<DB>) -> Self {
        Self::on_table(pool, &TableName::default())
    }

    /// A store on `pool` using `table` (`name` or `schema.name`).
    ///
    /// # Errors
    /// [`Error::InvalidIdentifier`] when `table` is not a plain identifier (see [`TableName`]).
    pub fn with_table(pool: Pool<DB>, table: &str) -> Result<Self, Error> {
        Ok(Self::on_table(pool, &TableName::new(table)?))
    }

    fn on_table(pool: Pool<DB>, table: &TableName) -> Self {
        Self {
            pool,
            statements: Arc::new(Statements::new(DB::DIALECT, table)),
            mode: Mode::Prepared,
        }
    }

    /// The pool the store borrows its connections from.
    pub fn pool(&self) -> &Pool<DB> {
        &self.pool
    }

    /// The lease table.
    pub fn table(&self) -> &TableName {
        self.statements.table()
    }

    /// Every statement the store runs, for reading or logging.
    pub fn statements(&self) -> &Statements {
        &self.statements
    }
}

impl<DB: Database> Clone for SqlxStore<DB> {
    fn clone(&self) -> Self {
        Self {
            pool: self.pool.clone(),
            statements: Arc::clone(&self.statements),
            mode: self.mode,
        }
    }
}

/// Shows the table and the pool's size, never its connect options (they hold the URL and the
/// password).
impl<DB: SqlxDatabase> fmt::Debug for SqlxStore<DB> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqlxStore")
            .field("database", &DB::NAME)
            .field("table", self.statements.table())
            .field("mode", &self.mode)
            .field("pool_size", &self.pool.size())
            .field("pool_idle", &self.pool.num_idle())
            .finish_non_exhaustive()
    }
}

/// The operations, written once for every database; each database's module implements
/// [`LeaseStore`](lease_core::LeaseStore) by calling them (see `lease_store!`).
impl<DB> SqlxStore<DB>
where
    DB: SqlxDatabase,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    (i64, i64): for<'r> sqlx::FromRow<'r, DB::Row>,
    (String, String): for<'r> sqlx::FromRow<'r, DB::Row>,
    (String, String, i64, i64, i64, i64): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    fn runner<'a>(&'a self, operation: Operation, name: Option<&'a LeaseName>) -> Runner<'a, DB> {
        Runner {
            pool: &self.pool,
            mode: self.mode,
            operation,
            name,
        }
    }

    pub(crate) async fn try_acquire_now(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<Option<Fence>, Error> {
        let run = self.runner(Operation::Acquire, Some(name));
        let rows: Vec<(i64, i64)> = run
            .rows(self.statements.try_acquire(name, holder, ttl))
            .await?;
        lease_sql::acquired(rows.into_iter().next()).map_err(|e| run.error(e))
    }

    pub(crate) async fn renew_now(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<bool, Error> {
        let run = self.runner(Operation::Renew, Some(name));
        Ok(run
            .affected(self.statements.renew(name, holder, ttl))
            .await?
            > 0)
    }

    pub(crate) async fn renew_many_now(
        &self,
        leases: &[(LeaseName, HolderId)],
        ttl: Ttl,
    ) -> Result<Vec<bool>, Error> {
        let run = self.runner(Operation::RenewMany, None);
        let pairs = lease_sql::distinct_pairs(leases);
        let mut renewed: Vec<(String, String)> = Vec::with_capacity(pairs.len());
        for batch in pairs.chunks(DB::DIALECT.renew_many_batch()) {
            let query = self.statements.renew_many(batch, ttl);
            match self.statements.renew_many_result() {
                RenewManyResult::Rows => {
                    let rows: Vec<(String, String)> = run.rows(query).await?;
                    renewed.extend(rows);
                }
                RenewManyResult::Count => {
                    if run.affected(query).await? == batch.len() as u64 {
                        renewed.extend(
                            batch
                                .iter()
                                .map(|&(name, holder)| (name.to_owned(), holder.to_owned())),
                        );
                    } else {
                        // Some lease of the batch is lost: ask again one by one to learn
                        // which. Those the batch renewed renew again, the lost stay lost.
                        for &(name, holder) in batch {
                            let (name, holder) =
                                (LeaseName::new(name)?, HolderId::from_stored(holder));
                            if self.renew_now(&name, &holder, ttl).await? {
                                renewed
                                    .push((name.as_str().to_owned(), holder.as_str().to_owned()));
                            }
                        }
                    }
                }
            }
        }
        Ok(lease_sql::renewed_in_order(leases, renewed))
    }

    pub(crate) async fn release_now(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        min_hold: Duration,
    ) -> Result<bool, Error> {
        let run = self.runner(Operation::Release, Some(name));
        Ok(run
            .affected(self.statements.release(name, holder, min_hold))
            .await?
            > 0)
    }

    pub(crate) async fn inspect_now(&self, name: &LeaseName) -> Result<Option<LeaseInfo>, Error> {
        let run = self.runner(Operation::Inspect, Some(name));
        let rows: Vec<(String, String, i64, i64, i64, i64)> =
            run.rows(self.statements.inspect(name)).await?;
        rows.into_iter()
            .next()
            .map(|row| LeaseRow::from(row).into_info().map_err(|e| run.error(e)))
            .transpose()
    }

    pub(crate) async fn list_now(&self) -> Result<Vec<LeaseInfo>, Error> {
        let run = self.runner(Operation::List, None);
        let rows: Vec<(String, String, i64, i64, i64, i64)> =
            run.rows(self.statements.list()).await?;
        rows.into_iter()
            .map(|row| LeaseRow::from(row).into_info().map_err(|e| run.error(e)))
            .collect()
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

/// Implements [`LeaseStore`](lease_core::LeaseStore) for `SqlxStore<$db>` with the operations
/// above. One impl per database rather than one generic impl, so that the compiler checks that
/// each future is `Send` for a concrete database.
macro_rules! lease_store {
    ($db:ty) => {
        #[lease_core::async_trait]
        impl lease_core::LeaseStore for $crate::SqlxStore<$db> {
            async fn try_acquire(
                &self,
                name: &lease_core::LeaseName,
                holder: &lease_core::HolderId,
                ttl: lease_core::Ttl,
            ) -> Result<Option<lease_core::Fence>, lease_core::Error> {
                self.try_acquire_now(name, holder, ttl).await
            }

            async fn renew(
                &self,
                name: &lease_core::LeaseName,
                holder: &lease_core::HolderId,
                ttl: lease_core::Ttl,
            ) -> Result<bool, lease_core::Error> {
                self.renew_now(name, holder, ttl).await
            }

            async fn renew_many(
                &self,
                leases: &[(lease_core::LeaseName, lease_core::HolderId)],
                ttl: lease_core::Ttl,
            ) -> Result<Vec<bool>, lease_core::Error> {
                self.renew_many_now(leases, ttl).await
            }

            async fn release(
                &self,
                name: &lease_core::LeaseName,
                holder: &lease_core::HolderId,
                min_hold: std::time::Duration,
            ) -> Result<bool, lease_core::Error> {
                self.release_now(name, holder, min_hold).await
            }

            async fn inspect(
                &self,
                name: &lease_core::LeaseName,
            ) -> Result<Option<lease_core::LeaseInfo>, lease_core::Error> {
                self.inspect_now(name).await
            }

            async fn list(&self) -> Result<Vec<lease_core::LeaseInfo>, lease_core::Error> {
                self.list_now().await
            }
        }
    };
}
pub(crate) use lease_store;
