//! MariaDB: [`MySqlLeaseStore`] and its setup.

use lease_core::Error;
use lease_sql::Dialect;
use sqlx::MySql;

use crate::SqlxStore;
use crate::database::sqlx_database;
use crate::store::lease_store;

// MariaDB's statements take no array; lease-sql never hands it one.
sqlx_database!(MySql, Dialect::MySql, |query, items| query
    .bind(items.join(",")));
lease_store!(MySql);

/// Leases in a MariaDB (10.5 or later) table, through a [`MySqlPool`](sqlx::MySqlPool).
///
/// MySQL does not work: try-acquire needs `INSERT ... RETURNING`, which only MariaDB has.
pub type MySqlLeaseStore = SqlxStore<MySql>;

impl SqlxStore<MySql> {
    /// Creates the lease table if it does not exist. Safe to call from every instance at start.
    ///
    /// It needs the `CREATE` privilege on the database; the store itself needs only
    /// `SELECT, INSERT, UPDATE` on the table.
    ///
    /// # Errors
    /// [`Error::Store`] with [`Operation::Setup`](lease_core::Operation::Setup).
    pub async fn setup(&self) -> Result<(), Error> {
        self.run_setup(self.statements.create_table().to_owned())
            .await
    }
}
