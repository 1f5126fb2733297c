//! [`DieselStore`]: a lease table reached through a diesel-async pool.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use lease_core::{
    BoxError, Error, Fence, HolderId, LeaseInfo, LeaseName, LeaseStore, Operation, Ttl,
};
use lease_sql::{Execute, LeaseRow, Query, SqlLeases, Statements, TableName};

use crate::DieselPool;
use crate::run::Runner;

/// Leases in a table, reached through a diesel-async pool (deadpool or bb8) of PostgreSQL,
/// MariaDB or SQLite connections.
///
/// Every operation is one statement on a connection taken from the pool for that statement
/// alone, so holding a lease holds no connection. Every time comes from the database's clock.
///
/// Make one per pool and table with [`new`](DieselStore::new) or
/// [`with_table`](DieselStore::with_table), create the table with
/// [`setup`](DieselStore::setup) (or the SQL files `lease-sql` ships), and share it: it is cheap
/// to clone.
pub struct DieselStore<P> {
    pool: P,
    statements: Arc<Statements>,
}

impl<P: DieselPool> DieselStore<P> {
    /// A store on `pool` using the table `leases`.
    pub fn new(pool: P) -> Self {
        Self::on_table(pool, &TableName::default())
    }

    /// A store on `pool` using `table` (`name` or `schema.name`).
    ///
    /// # Errors
    /// [`Error::InvalidIdentifier`] when `table` is not a plain identifier (see [`TableName`]).
    pub fn with_table(pool: P, table: &str) -> Result<Self, Error> {
        Ok(Self::on_table(pool, &TableName::new(table)?))
    }

    fn on_table(pool: P, table: &TableName) -> Self {
        let dialect = <P::Connection as crate::DieselConnection>::DIALECT;
        Self {
            pool,
            statements: Arc::new(Statements::new(dialect, table)),
        }
    }

    /// The pool the store takes its connections from.
    pub fn pool(&self) -> &P {
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

    /// Creates the lease table if it does not exist (`CREATE TABLE IF NOT EXISTS`). Safe to
    /// call from every instance at start, at the same time. The schema of a `schema.table` name
    /// must exist already.
    ///
    /// # Errors
    /// [`Error::Store`] for [`Operation::Setup`] when the pool or the database fails.
    pub async fn setup(&self) -> Result<(), Error> {
        // lease-sql's setup script: on PostgreSQL the DDL under a transaction-level advisory
        // lock (two `CREATE TABLE IF NOT EXISTS` at once can fail on the catalog), the same lock
        // as lease-sqlx's. `batch_execute` sends it as one simple-protocol message, which is one
        // implicit transaction.
        self.runner()
            .batch(self.statements.setup())
            .await
            .map_err(|e| Error::store(Operation::Setup, None, e))
    }

    fn runner(&self) -> Runner<'_, P> {
        Runner { pool: &self.pool }
    }
}

impl<P: Clone> Clone for DieselStore<P> {
    fn clone(&self) -> Self {
        Self {
            pool: self.pool.clone(),
            statements: Arc::clone(&self.statements),
        }
    }
}

/// Shows the database, the pool's kind and state and the table, never the URL the pool
/// connects with (it may hold a password).
impl<P: DieselPool> fmt::Debug for DieselStore<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.pool.state();
        f.debug_struct("DieselStore")
            .field(
                "database",
                &<P::Connection as crate::DieselConnection>::NAME,
            )
            .field("pool", &P::KIND)
            .field("table", self.statements.table())
            .field("pool_size", &state.size)
            .field("pool_idle", &state.idle)
            .finish_non_exhaustive()
    }
}

/// How this crate runs a statement; the operations on top of it are lease-sql's.
#[async_trait::async_trait]
impl<P: DieselPool> Execute for DieselStore<P> {
    async fn int_pairs(&self, query: Query<'_>) -> Result<Vec<(i64, i64)>, BoxError> {
        self.runner().rows(query).await
    }

    async fn text_pairs(&self, query: Query<'_>) -> Result<Vec<(String, String)>, BoxError> {
        self.runner().rows(query).await
    }

    async fn lease_rows(&self, query: Query<'_>) -> Result<Vec<LeaseRow>, BoxError> {
        let rows: Vec<crate::connection::LeaseTuple> = self.runner().rows(query).await?;
        Ok(rows.into_iter().map(LeaseRow::from).collect())
    }

    async fn affected(&self, query: Query<'_>) -> Result<u64, BoxError> {
        // A count of rows always fits.
        Ok(self.runner().affected(query).await? as u64)
    }
}

#[async_trait::async_trait]
impl<P: DieselPool> LeaseStore for DieselStore<P> {
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
}
