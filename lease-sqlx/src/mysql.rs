//! MariaDB: [`MySqlLeaseStore`].

use futures::future::BoxFuture;
use lease_core::{BoxError, ReleaseEvents, StoreErrorKind};
use lease_sql::{Dialect, Param, SqlStore};
use sqlx::error::DatabaseError;
use sqlx::mysql::{MySqlArguments, MySqlDatabaseError, MySqlQueryResult};
use sqlx::query::Query;
use sqlx::{MySql, MySqlPool};

use crate::SqlxDatabase;
use crate::SqlxExecutor;
use crate::database::sealed::Sealed;

impl Sealed for MySql {}

impl SqlxDatabase for MySql {
    const DIALECT: Dialect = Dialect::MySql;
    const NAME: &'static str = "mariadb";

    fn bind<'q>(
        query: Query<'q, Self, MySqlArguments>,
        param: Param<'q>,
    ) -> Query<'q, Self, MySqlArguments> {
        match param {
            Param::Text(text) => query.bind(text),
            Param::Int(int) => query.bind(int),
        }
    }

    fn rows_affected(result: &MySqlQueryResult) -> u64 {
        result.rows_affected()
    }

    fn database_error_kind(error: &dyn DatabaseError) -> StoreErrorKind {
        error
            .try_downcast_ref::<MySqlDatabaseError>()
            .map_or(StoreErrorKind::Permanent, |error| {
                lease_sql::mysql_error_kind_with_message(error.number(), error.message())
            })
    }

    fn database_error_ends_session(error: &dyn DatabaseError) -> Option<bool> {
        error
            .try_downcast_ref::<MySqlDatabaseError>()
            .map(|error| lease_sql::mysql_ends_session(error.number()))
    }

    /// MariaDB cannot push notifications: waiters poll.
    fn release_events<'a>(
        _: &'a MySqlPool,
        _: &'a str,
    ) -> BoxFuture<'a, Result<Option<ReleaseEvents>, BoxError>> {
        Box::pin(async { Ok(None) })
    }
}

/// Leases in a MariaDB (10.5 or later) table, through a [`MySqlPool`].
///
/// MySQL does not work: try-acquire needs `INSERT ... RETURNING`, which only MariaDB has.
pub type MySqlLeaseStore = SqlStore<SqlxExecutor<MySql>>;
