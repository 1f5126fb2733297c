//! A fenced commit whose answer is lost (`lease_tests::lost_answer`), through diesel-async
//! (deadpool) on PostgreSQL and MariaDB: the commit commits, its answer never arrives, and the
//! write answers an error of the kind `OutcomeUnknown`, the lease still held. Through
//! `lease_diesel::fenced` (the check with the commit) and `fenced_with(.., CheckAt::Begin, ..)`
//! (the check with the `BEGIN`, then a plain `COMMIT`).
//! Not on SQLite, which runs in the process: no connection there loses an answer.
#![cfg(all(feature = "postgres", feature = "mysql", feature = "deadpool"))]

use diesel_async::pooled_connection::AsyncDieselConnectionManager;
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::{AsyncMysqlConnection, AsyncPgConnection, SimpleAsyncConnection};
use lease_core::runtime::TokioRuntime;
use lease_core::{BoxError, LeaseHandle};
use lease_diesel::{CheckAt, DieselPool, DieselStore};
use lease_tests::{env, lost_answer};

/// A store on `table` at `url` on PostgreSQL, with a pool of one connection.
async fn postgres_store(url: &str, table: &str) -> Result<PgStore, BoxError> {
    let pool = Pool::builder(lease_diesel::postgres_manager(url))
        .max_size(1)
        .build()?;
    Ok(DieselStore::with_table(pool, table)?)
}

/// A store on `table` at `url` on MariaDB, with a pool of one connection, kept on TCP: the
/// MariaDB driver under diesel-async moves a connection to 127.0.0.1 onto the server's Unix
/// socket (`prefer_socket`), past the proxy.
async fn mariadb_store(url: &str, table: &str) -> Result<MariaDbStore, BoxError> {
    let manager = AsyncDieselConnectionManager::<AsyncMysqlConnection>::new(format!(
        "{url}?prefer_socket=false"
    ));
    let pool = Pool::builder(manager).max_size(1).build()?;
    Ok(DieselStore::with_table(pool, table)?)
}

type PgStore = DieselStore<Pool<AsyncPgConnection>>;
type MariaDbStore = DieselStore<Pool<AsyncMysqlConnection>>;

/// `sql` in a fenced transaction on `connection` checked as `at` says, then `then`, before the
/// commit.
async fn write<P>(
    at: CheckAt,
    store: &DieselStore<P>,
    connection: &mut P::Connection,
    lease: &LeaseHandle,
    sql: &str,
    then: &(dyn Fn() + Sync),
) -> Result<(), BoxError>
where
    P: DieselPool,
    P::Connection: SimpleAsyncConnection,
{
    lease_diesel::fenced_with(store, connection, lease, at, async |conn| {
        conn.batch_execute(sql).await?;
        then();
        Ok::<_, BoxError>(())
    })
    .await
}

async fn postgres_write(
    at: CheckAt,
    store: &PgStore,
    lease: &LeaseHandle,
    sql: &str,
    then: &(dyn Fn() + Sync),
) -> Result<(), BoxError> {
    let mut connection = store.pool().get().await?;
    write(at, store, &mut connection, lease, sql, then).await
}

async fn mariadb_write(
    at: CheckAt,
    store: &MariaDbStore,
    lease: &LeaseHandle,
    sql: &str,
    then: &(dyn Fn() + Sync),
) -> Result<(), BoxError> {
    let mut connection = store.pool().get().await?;
    write(at, store, &mut connection, lease, sql, then).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    lost_answer::fenced_commit_whose_answer_is_lost(
        &env::postgres_url(),
        postgres_store,
        postgres_write,
        TokioRuntime,
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb() {
    lost_answer::fenced_commit_whose_answer_is_lost(
        &env::mysql_url(),
        mariadb_store,
        mariadb_write,
        TokioRuntime,
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_acquire_whose_answer_is_lost() {
    lost_answer::acquire_whose_answer_is_lost(&env::postgres_url(), postgres_store, TokioRuntime)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_acquire_whose_answer_is_lost() {
    lost_answer::acquire_whose_answer_is_lost(&env::mysql_url(), mariadb_store, TokioRuntime)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_connection_killed_under_a_statement() {
    lost_answer::killed_under_a_statement(&env::postgres_url(), postgres_store, TokioRuntime)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_connection_killed_under_a_statement() {
    lost_answer::killed_under_a_statement(&env::mysql_url(), mariadb_store, TokioRuntime)
        .await
        .unwrap();
}
