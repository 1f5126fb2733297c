//! MariaDB set read-only, through diesel-async (deadpool), on a private server
//! (`lease_tests::read_only`): the store's account is refused with errors of kind `ReadOnly`
//! and the connection that answered is closed, also by `lease_diesel::fenced`; the same store
//! works again once the server takes writes; an account with `READ ONLY ADMIN` writes through
//! it (the control).
#![cfg(all(feature = "mysql", feature = "deadpool"))]

use diesel_async::pooled_connection::AsyncDieselConnectionManager;
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::{AsyncMysqlConnection, SimpleAsyncConnection};
use lease_core::runtime::TokioRuntime;
use lease_core::{BoxError, LeaseHandle};
use lease_diesel::DieselStore;
use lease_tests::read_only;

type Store = DieselStore<Pool<AsyncMysqlConnection>>;

/// A store on `table` at `url` with a pool of at most `size` connections.
fn store(url: &str, table: &str, size: usize) -> Result<Store, BoxError> {
    let manager = AsyncDieselConnectionManager::<AsyncMysqlConnection>::new(url);
    let pool = Pool::builder(manager).max_size(size).build()?;
    Ok(DieselStore::with_table(pool, table)?)
}

/// Runs `case` on a private server (`read_only::on_private_server`), its root store on a pool
/// of two connections.
fn on_private_server<F>(case: F)
where
    F: AsyncFnOnce(&Store, &str, &str) -> Result<(), BoxError>,
{
    read_only::on_private_server(async |url, table| store(url, table, 2), case);
}

/// One fenced transaction through `lease_diesel::fenced`, on a connection of the store's pool,
/// whose work runs `sql`.
async fn fenced(store: &Store, lease: &LeaseHandle, sql: &str) -> Result<(), BoxError> {
    let mut connection = store.pool().get().await?;
    lease_diesel::fenced(store, &mut connection, lease, async |conn| {
        conn.batch_execute(sql).await?;
        Ok::<_, BoxError>(())
    })
    .await
}

#[test]
fn read_only_refuses_the_store_and_closes_its_connection() {
    on_private_server(async |root, url, table| {
        read_only::read_only_refuses_the_store_and_closes_its_connection(
            root,
            url,
            async |url| store(url, table, 1),
            TokioRuntime,
        )
        .await
    });
}

#[test]
fn read_only_admin_writes_through_read_only() {
    on_private_server(async |root, url, table| {
        read_only::read_only_admin_writes_through_read_only(root, url, async |url| {
            store(url, table, 1)
        })
        .await
    });
}

#[test]
fn fenced_commit_on_read_only_closes_its_connection() {
    on_private_server(async |root, url, table| {
        read_only::fenced_commit_on_read_only_closes_its_connection(
            root,
            url,
            async |url| store(url, table, 1),
            fenced,
            TokioRuntime,
        )
        .await
    });
}
