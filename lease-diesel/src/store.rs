//! [`DieselStore`]: a lease table reached through a diesel-async pool.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use lease_core::{Error, Fence, HolderId, LeaseInfo, LeaseName, LeaseStore, Operation, Ttl};
use lease_sql::{LeaseRow, RenewManyResult, Statements, TableName};

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
        self.runner(Operation::Setup, None)
            .batch(self.statements.setup())
            .await
    }

    fn runner<'a>(&'a self, operation: Operation, name: Option<&'a LeaseName>) -> Runner<'a, P> {
        Runner {
            pool: &self.pool,
            operation,
            name,
        }
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

#[async_trait::async_trait]
impl<P: DieselPool> LeaseStore for DieselStore<P> {
    async fn try_acquire(
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

    async fn renew(&self, name: &LeaseName, holder: &HolderId, ttl: Ttl) -> Result<bool, Error> {
        let run = self.runner(Operation::Renew, Some(name));
        Ok(run
            .affected(self.statements.renew(name, holder, ttl))
            .await?
            > 0)
    }

    async fn renew_many(
        &self,
        leases: &[(LeaseName, HolderId)],
        ttl: Ttl,
    ) -> Result<Vec<bool>, Error> {
        let run = self.runner(Operation::RenewMany, None);
        let pairs = lease_sql::distinct_pairs(leases);
        let batch_size = self.statements.dialect().renew_many_batch();
        let mut renewed: Vec<(String, String)> = Vec::with_capacity(pairs.len());
        for batch in pairs.chunks(batch_size) {
            let query = self.statements.renew_many(batch, ttl);
            match self.statements.renew_many_result() {
                RenewManyResult::Rows => {
                    let rows: Vec<(String, String)> = run.rows(query).await?;
                    renewed.extend(rows);
                }
                RenewManyResult::Count => {
                    if run.affected(query).await? == batch.len() {
                        renewed.extend(
                            batch
                                .iter()
                                .map(|&(name, holder)| (name.to_owned(), holder.to_owned())),
                        );
                    } else {
                        // Some lease of the batch is lost, and a count cannot say which: renew
                        // them one by one. Those the batch renewed renew again (harmless), the
                        // lost stay lost.
                        for (name, holder) in leases_of(batch)? {
                            if self.renew(&name, &holder, ttl).await? {
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

    async fn release(
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

    async fn inspect(&self, name: &LeaseName) -> Result<Option<LeaseInfo>, Error> {
        let run = self.runner(Operation::Inspect, Some(name));
        let rows: Vec<crate::connection::LeaseTuple> =
            run.rows(self.statements.inspect(name)).await?;
        rows.into_iter()
            .next()
            .map(|row| LeaseRow::from(row).into_info().map_err(|e| run.error(e)))
            .transpose()
    }

    async fn list(&self) -> Result<Vec<LeaseInfo>, Error> {
        let run = self.runner(Operation::List, None);
        let rows: Vec<crate::connection::LeaseTuple> = run.rows(self.statements.list()).await?;
        rows.into_iter()
            .map(|row| LeaseRow::from(row).into_info().map_err(|e| run.error(e)))
            .collect()
    }
}

/// The pairs of a batch as lease-core's types again. They came from validated names, so this
/// cannot fail in practice.
fn leases_of(batch: &[(&str, &str)]) -> Result<Vec<(LeaseName, HolderId)>, Error> {
    batch
        .iter()
        .map(|&(name, holder)| Ok((LeaseName::new(name)?, HolderId::from_stored(holder))))
        .collect()
}
