//! MariaDB through `AsyncMysqlConnection`.

crate::connection::diesel_connection!(
    diesel_async::AsyncMysqlConnection,
    dialect = lease_sql::Dialect::MySql,
    name = "mariadb",
);

/// A connection manager for the MariaDB database at `url`, for `bb8::Pool::builder` or
/// `deadpool::Pool::builder`, whose check-out ping ([`mysql_ping`]) can be cut short safely.
/// To set other parts of the manager's configuration as well, give `mysql_ping` to
/// `ManagerConfig::recycling_method` as `RecyclingMethod::CustomFunction` yourself.
#[cfg(any(feature = "deadpool", feature = "bb8"))]
pub fn mysql_manager(
    url: impl Into<String>,
) -> diesel_async::pooled_connection::AsyncDieselConnectionManager<diesel_async::AsyncMysqlConnection>
{
    use diesel_async::pooled_connection::{
        AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod,
    };

    let mut config = ManagerConfig::default();
    config.recycling_method = RecyclingMethod::CustomFunction(Box::new(mysql_ping));
    AsyncDieselConnectionManager::new_with_config(url, config)
}

/// The check-out ping of a MariaDB connection (`SELECT 1`) that leaves the connection marked
/// broken until its answer is read: a `RecyclingMethod::CustomFunction` for diesel-async's
/// pools.
///
/// bb8 runs the ping inside its `connection_timeout`, with the connection already taken from
/// its idle list; when the timeout cuts the ping short, bb8 puts the connection back, and
/// diesel-async's MariaDB connection, which reports itself healthy, is handed out again with the
/// ping's answer unread: the next ping reads it, and the next statement the ping's own, a row
/// of `1` where it expected a lease (a failure, or a release that reads as not released). Marked
/// broken until the answer is read, a ping cut short makes the pool close the connection.
///
/// # Errors
/// The ping's: the connection is then closed by the pool.
///
/// # Cancel safety
/// Cancel safe, which is its point: dropped half-way, the connection stays marked broken.
pub fn mysql_ping(
    connection: &mut diesel_async::AsyncMysqlConnection,
) -> futures::future::BoxFuture<'_, diesel::QueryResult<()>> {
    use diesel_async::{AsyncConnection, SimpleAsyncConnection, TransactionManager};

    use crate::DieselConnection;

    type Manager = <diesel_async::AsyncMysqlConnection as AsyncConnection>::TransactionManager;
    Box::pin(async move {
        if Manager::is_broken_transaction_manager(connection) {
            return Err(diesel::result::Error::BrokenTransactionManager);
        }
        // What it was put back after the answer: a test transaction
        // (`begin_test_transaction`) stays counted.
        let found = connection.in_flight();
        connection.batch_execute("SELECT 1").await?;
        connection.landed(found);
        Ok(())
    })
}
