//! A fenced commit whose answer is lost (`lease_tests::lost_answer`), through sqlx on PostgreSQL
//! and MariaDB: the commit commits, its answer never arrives, and the write answers an error of
//! the kind `OutcomeUnknown`, the lease still held. Through `lease_sqlx::fenced` (the check with
//! the commit, lease-sql's message) and `fenced_with(.., CheckAt::Begin, ..)` (the check with
//! the `BEGIN`, then sqlx's own `COMMIT`).
//! Not on SQLite, which runs in the process: no connection there loses an answer.
#![cfg(all(feature = "postgres", feature = "mysql"))]

use lease_core::runtime::TokioRuntime;
use lease_core::{BoxError, LeaseHandle};
use lease_sqlx::sqlx::pool::PoolOptions;
use lease_sqlx::sqlx::{self, AssertSqlSafe, Executor, MySql, Postgres};
use lease_sqlx::{CheckAt, Execute, ExecuteOn, SqlxDatabase, SqlxExecutor, SqlxStore};
use lease_tests::{env, lost_answer};

/// A store on `table` at `url`, with a pool of one connection.
async fn connect<DB>(url: &str, table: &str) -> Result<SqlxStore<DB>, BoxError>
where
    DB: SqlxDatabase,
    SqlxExecutor<DB>: Execute,
{
    let pool = PoolOptions::<DB>::new()
        .max_connections(1)
        .connect(url)
        .await?;
    Ok(SqlxStore::with_table(pool, table)?)
}

/// `sql` in a fenced transaction checked as `at` says, then `then`, before the commit.
async fn write<DB>(
    at: CheckAt,
    store: &SqlxStore<DB>,
    lease: &LeaseHandle,
    sql: &str,
    then: &(dyn Fn() + Sync),
) -> Result<(), BoxError>
where
    DB: SqlxDatabase,
    SqlxExecutor<DB>: for<'c> ExecuteOn<&'c mut DB::Connection>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    lease_sqlx::fenced_with(store, lease, at, async |tx| {
        sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
            .execute(&mut *tx)
            .await?;
        then();
        Ok::<_, BoxError>(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    lost_answer::fenced_commit_whose_answer_is_lost(
        &env::postgres_url(),
        connect::<Postgres>,
        write::<Postgres>,
        TokioRuntime,
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb() {
    lost_answer::fenced_commit_whose_answer_is_lost(
        &env::mysql_url(),
        connect::<MySql>,
        write::<MySql>,
        TokioRuntime,
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_connection_killed_under_a_statement() {
    lost_answer::killed_under_a_statement(&env::postgres_url(), connect::<Postgres>, TokioRuntime)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_connection_killed_under_a_statement() {
    lost_answer::killed_under_a_statement(&env::mysql_url(), connect::<MySql>, TokioRuntime)
        .await
        .unwrap();
}
