//! PostgreSQL through `AsyncPgConnection`, and connections whose errors keep their cause.

use std::future::ready;

use diesel_async::AsyncPgConnection;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use lease_core::{BoxError, LeaseName, ReleaseEvents};

crate::connection::diesel_connection!(
    diesel_async::AsyncPgConnection,
    dialect = lease_sql::Dialect::Postgres,
    name = "postgres",
    release_events = listen,
);

/// Listens for a table's releases on `connection`, which the stream then owns: `LISTEN` on
/// `channel`, then the lease named by each notification's payload, until the connection fails
/// or closes (diesel-async's connection task then drops the sender of its notifications).
async fn listen(
    mut connection: AsyncPgConnection,
    channel: &str,
) -> Result<Option<ReleaseEvents>, BoxError> {
    let listen = lease_sql::postgres_listen(channel);
    diesel_async::SimpleAsyncConnection::batch_execute(&mut connection, &listen).await?;
    let notifications = futures::stream::unfold(connection, |mut connection| async move {
        let next = std::pin::pin!(connection.notifications_stream())
            .next()
            .await;
        next.map(|notification| (notification, connection))
    });
    let names = notifications
        .take_while(|notification| ready(notification.is_ok()))
        .filter_map(|notification| {
            ready(
                notification
                    .ok()
                    .and_then(|notification| LeaseName::new(notification.payload).ok()),
            )
        });
    Ok(Some(names.boxed()))
}

/// A connection manager for the PostgreSQL database at `url`, for `deadpool::Pool::builder` or
/// `bb8::Pool::builder`, whose failed connections say why they failed: its connections are made
/// by [`establish_postgres`]. To set other parts of the manager's configuration as well (its
/// recycling method), give `establish_postgres` to `ManagerConfig::custom_setup` yourself.
#[cfg(any(feature = "deadpool", feature = "bb8"))]
pub fn postgres_manager(
    url: impl Into<String>,
) -> diesel_async::pooled_connection::AsyncDieselConnectionManager<AsyncPgConnection> {
    use diesel_async::pooled_connection::{AsyncDieselConnectionManager, ManagerConfig};

    let mut config = ManagerConfig::default();
    config.custom_setup = Box::new(establish_postgres);
    AsyncDieselConnectionManager::new_with_config(url, config)
}

/// A connection to the PostgreSQL database at `url` whose error, when it fails, names its cause:
/// a `ManagerConfig::custom_setup` for diesel-async's pools.
///
/// diesel-async's own connections keep only the first line of tokio-postgres' error: a server
/// that refuses connections, a host name that does not resolve and a connection that times out
/// all read `error connecting to server`. This one connects through tokio-postgres itself
/// (without TLS, as diesel-async does) and keeps the whole chain in the error's text (diesel's
/// `ConnectionError` holds a string, not a source): `error connecting to server: Connection
/// refused (os error 111)`. The connection is otherwise diesel-async's, made by
/// `AsyncPgConnection::try_from_client_and_connection`; diesel's instrumentation sees its
/// statements but not its establishment.
///
/// # Errors
/// `ConnectionError::BadConnection` with tokio-postgres' error and its causes when the
/// connection cannot be made, and diesel-async's error when the connection cannot be set up.
///
/// # Cancel safety
/// Cancel safe: dropped, the connection being made is closed.
pub fn establish_postgres(url: &str) -> BoxFuture<'_, diesel::ConnectionResult<AsyncPgConnection>> {
    async move {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .map_err(|error| {
                diesel::ConnectionError::BadConnection(lease_core::ErrorChain(&error).to_string())
            })?;
        AsyncPgConnection::try_from_client_and_connection(client, connection).await
    }
    .boxed()
}
