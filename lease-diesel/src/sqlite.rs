//! SQLite through diesel's `SqliteConnection`, run on tokio's blocking threads by diesel-async's
//! `SyncConnectionWrapper`.

use crate::AsyncSqliteConnection;

crate::connection::diesel_connection!(
    AsyncSqliteConnection,
    dialect = lease_sql::Dialect::Sqlite,
    name = "sqlite",
);

/// A connection manager for the SQLite database at `url` (a file path or a `file:` URI), for
/// `deadpool::Pool::builder` or `bb8::Pool::builder`, that sets every new connection up for a
/// pool shared by concurrent tasks: lease-sql's [`sqlite_pragmas`](lease_sql::sqlite_pragmas), a
/// busy timeout of [`SQLITE_BUSY_TIMEOUT`](crate::SQLITE_BUSY_TIMEOUT), so a writer waits for
/// another instead of failing at once, and the WAL journal, so readers never wait for the writer.
///
/// A pool of connections that all open `:memory:` gives each connection a database of its own:
/// use a file.
#[cfg(any(feature = "deadpool", feature = "bb8"))]
pub fn sqlite_manager(
    url: impl Into<String>,
) -> diesel_async::pooled_connection::AsyncDieselConnectionManager<AsyncSqliteConnection> {
    use diesel_async::pooled_connection::{AsyncDieselConnectionManager, ManagerConfig};
    use futures::FutureExt;

    let mut config = ManagerConfig::default();
    config.custom_setup = Box::new(|url| {
        let url = url.to_owned();
        async move {
            let mut connection =
                <AsyncSqliteConnection as diesel_async::AsyncConnection>::establish(&url).await?;
            diesel_async::SimpleAsyncConnection::batch_execute(
                &mut connection,
                &lease_sql::sqlite_pragmas(),
            )
            .await
            .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
            Ok(connection)
        }
        .boxed()
    });
    AsyncDieselConnectionManager::new_with_config(url, config)
}
