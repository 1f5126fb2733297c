//! [`SqlxStore`]: a lease table reached through a sqlx pool.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    Error, Fence, HolderId, LeaseInfo, LeaseName, LeaseStore, ReleaseEvents, Ttl, async_trait,
};
use lease_sql::{Execute, SqlLeases, Statements, TableName};
use sqlx::{Database, Pool};

use crate::SqlxDatabase;
use crate::run::Mode;

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

/// The operations, written once in lease-sql over [`Execute`], which each database implements
/// (see `sqlx_execute!`).
#[async_trait]
impl<DB: SqlxDatabase> LeaseStore for SqlxStore<DB>
where
    Self: Execute,
{
    async fn try_acquire(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<Option<Fence>, Error> {
        SqlLeases::new(&self.statements, self)
            .try_acquire(name, holder, ttl)
            .await
    }

    async fn renew(&self, name: &LeaseName, holder: &HolderId, ttl: Ttl) -> Result<bool, Error> {
        SqlLeases::new(&self.statements, self)
            .renew(name, holder, ttl)
            .await
    }

    async fn renew_many(
        &self,
        leases: &[(LeaseName, HolderId)],
        ttl: Ttl,
    ) -> Result<Vec<bool>, Error> {
        SqlLeases::new(&self.statements, self)
            .renew_many(leases, ttl)
            .await
    }

    async fn release(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        min_hold: Duration,
    ) -> Result<bool, Error> {
        SqlLeases::new(&self.statements, self)
            .release(name, holder, min_hold)
            .await
    }

    async fn inspect(&self, name: &LeaseName) -> Result<Option<LeaseInfo>, Error> {
        SqlLeases::new(&self.statements, self).inspect(name).await
    }

    async fn list(&self) -> Result<Vec<LeaseInfo>, Error> {
        SqlLeases::new(&self.statements, self).list().await
    }

    async fn release_events(&self) -> Result<Option<ReleaseEvents>, Error> {
        DB::release_events(self).await
    }
}
