//! MariaDB: [`MySqlLeaseStore`].

use lease_sql::Dialect;
use sqlx::MySql;

use crate::SqlxStore;
use crate::database::sqlx_database;
use crate::run::sqlx_execute;

// MariaDB's statements take no array; lease-sql never hands it one.
sqlx_database!(MySql, Dialect::MySql, |query, items| query
    .bind(items.join(",")));
sqlx_execute!(MySql);

/// Leases in a MariaDB (10.5 or later) table, through a [`MySqlPool`](sqlx::MySqlPool).
///
/// MySQL does not work: try-acquire needs `INSERT ... RETURNING`, which only MariaDB has.
pub type MySqlLeaseStore = SqlxStore<MySql>;
