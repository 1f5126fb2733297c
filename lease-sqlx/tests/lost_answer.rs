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
async fn postgres_acquire_whose_answer_is_lost() {
    lost_answer::acquire_whose_answer_is_lost(
        &env::postgres_url(),
        connect::<Postgres>,
        TokioRuntime,
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_acquire_whose_answer_is_lost() {
    lost_answer::acquire_whose_answer_is_lost(&env::mysql_url(), connect::<MySql>, TokioRuntime)
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

/// A session the server ends (`pg_terminate_backend`) is read as such by its SQLSTATE (57P01),
/// not only by the English words of its message: a server that writes its messages in another
/// language (`lc_messages`) must still have a commit answered this way read as `OutcomeUnknown`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_reads_a_terminated_session_by_its_code() {
    let url = env::postgres_url();
    let store = match connect::<Postgres>(&url, &env::unique_table("terminated")).await {
        Ok(store) => store,
        Err(error) => {
            env::skip_or_fail("postgres", &error.to_string());
            return;
        }
    };
    let mut connection = store.pool().acquire().await.unwrap();
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *connection)
        .await
        .unwrap();
    let admin = sqlx::PgPool::connect(&url).await.unwrap();
    let terminated: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(pid)
        .fetch_one(&admin)
        .await
        .unwrap();
    assert!(terminated);
    // The server's farewell (57P01, `terminating connection due to administrator command`)
    // waits on the socket for the next statement to read it once the backend is gone.
    wait_until_gone(&admin, pid).await;
    let error = sqlx::raw_sql("SELECT 1")
        .execute(&mut *connection)
        .await
        .expect_err("the session was terminated");
    // The farewell is read before the closed socket: a database error, with its code.
    assert!(
        matches!(&error, sqlx::Error::Database(database) if database.code().as_deref() == Some("57P01")),
        "{error:?}"
    );
    let error = BoxError::from(error);
    assert!(
        store.executor().code_ends_session(&*error) == Some(true),
        "the code of {error} not read as the session's end"
    );
    assert!(store.executor().answer_lost(&*error), "{error}");
    admin.close().await;
}

/// A session the server ended because its transaction stayed idle too long
/// (`idle_in_transaction_session_timeout`, 25P03) rolled the transaction back before the
/// commit came: nothing committed, so the commit's failure is not a lost answer, though the
/// message says the connection terminates. Read by the code, as in every language.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_transaction_ended_for_idling_is_not_a_lost_answer() {
    let url = env::postgres_url();
    let store = match connect::<Postgres>(&url, &env::unique_table("idled")).await {
        Ok(store) => store,
        Err(error) => {
            env::skip_or_fail("postgres", &error.to_string());
            return;
        }
    };
    let mut connection = store.pool().acquire().await.unwrap();
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *connection)
        .await
        .unwrap();
    sqlx::raw_sql("SET idle_in_transaction_session_timeout = '100ms'; BEGIN; SELECT 1")
        .execute(&mut *connection)
        .await
        .unwrap();
    // The farewell waits on the socket once the server has ended the session.
    let admin = sqlx::PgPool::connect(&url).await.unwrap();
    wait_until_gone(&admin, pid).await;
    admin.close().await;
    let error = sqlx::raw_sql("COMMIT")
        .execute(&mut *connection)
        .await
        .expect_err("the session ended for its idle transaction");
    assert!(
        matches!(&error, sqlx::Error::Database(database) if database.code().as_deref() == Some("25P03")),
        "{error:?}"
    );
    let error = BoxError::from(error);
    assert_eq!(store.executor().code_ends_session(&*error), Some(false));
    assert!(
        !store.executor().answer_lost(&*error),
        "a commit after the transaction was rolled back read as a lost answer: {error}"
    );
    assert_eq!(
        store.executor().classify(&*error),
        lease_core::StoreErrorKind::Transient
    );
}

/// Waits (at most 10 s) until the server's backend `pid` has left `pg_stat_activity`.
async fn wait_until_gone(admin: &sqlx::PgPool, pid: i32) {
    let waited = std::time::Instant::now();
    loop {
        let alive: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE pid = $1")
            .bind(pid)
            .fetch_one(admin)
            .await
            .unwrap();
        if alive == 0 {
            return;
        }
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(10),
            "the backend {pid} is still there"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
