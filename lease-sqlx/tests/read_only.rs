//! MariaDB set read-only, through sqlx, on a private server (`lease_tests::read_only`): the
//! store's account is refused with errors of kind `ReadOnly` and the connection that answered
//! is closed, also by `lease_sqlx::fenced`; the same store works again once the server takes
//! writes; an account with `READ ONLY ADMIN` writes through it (the control).
#![cfg(feature = "mysql")]

use lease_core::runtime::TokioRuntime;
use lease_core::{BoxError, LeaseHandle};
use lease_sqlx::sqlx::mysql::MySqlPoolOptions;
use lease_sqlx::sqlx::{self, AssertSqlSafe, MySql};
use lease_sqlx::{MySqlLeaseStore, SqlxStore};
use lease_tests::read_only;

/// Runs `case` on a private server (`read_only::on_private_server`), its root store on a pool
/// of two connections.
fn on_private_server<F>(case: F)
where
    F: AsyncFnOnce(&MySqlLeaseStore, &str, &str) -> Result<(), BoxError>,
{
    read_only::on_private_server(
        async |url, table| {
            let pool = MySqlPoolOptions::new()
                .max_connections(2)
                .connect(url)
                .await?;
            Ok(MySqlLeaseStore::with_table(pool, table)?)
        },
        case,
    );
}

/// A store on `table` at `url` with a pool of one connection.
async fn one_connection(url: &str, table: &str) -> Result<SqlxStore<MySql>, BoxError> {
    let pool = MySqlPoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await?;
    Ok(SqlxStore::with_table(pool, table)?)
}

/// One fenced transaction through `lease_sqlx::fenced` whose work runs `sql`.
async fn fenced(store: &SqlxStore<MySql>, lease: &LeaseHandle, sql: &str) -> Result<(), BoxError> {
    lease_sqlx::fenced(store, lease, async |tx| {
        sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
            .execute(&mut *tx)
            .await?;
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
            async |url| one_connection(url, table).await,
            TokioRuntime,
        )
        .await
    });
}

#[test]
fn read_only_admin_writes_through_read_only() {
    on_private_server(async |root, url, table| {
        read_only::read_only_admin_writes_through_read_only(root, url, async |url| {
            one_connection(url, table).await
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
            async |url| one_connection(url, table).await,
            fenced,
            TokioRuntime,
        )
        .await
    });
}
