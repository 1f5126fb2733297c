//! What the cancelled-commit cases of both drivers share: a private PostgreSQL server whose
//! commits flush, so that `commit_delay` (the sleep inside a commit before its flush, a
//! superuser's setting) makes them slow, a connection that watches it, and a cancel sent while
//! a commit sleeps. Included by lease-sqlx's and lease-diesel's `tests/cancel_after_commit.rs`.

use std::time::{Duration, Instant};

use lease_sqlx::sqlx::{self, AssertSqlSafe, Connection, PgConnection};
use lease_tests::server::PostgresServer;

/// How many times a case cancels a commit, at most, for one cancel that lands after the
/// commit (one that lands before it, in the check, fails the transaction: nothing committed;
/// one that lands once the message ended is let go by the server).
pub const ATTEMPTS: usize = 8;

/// How long the canceller looks for the commit in flight.
const LOOK_FOR: Duration = Duration::from_secs(5);

/// The table the transactions insert into.
pub const NOTICES: &str = "notices";

/// The settings that make a session's commits sleep 100 ms (the most `commit_delay` takes)
/// before their flush.
pub const SLOW_COMMITS: [(&str, &str); 2] = [("commit_delay", "100000"), ("commit_siblings", "0")];

/// A private server whose commits flush, so that `commit_delay` makes them sleep, with the
/// table the transactions write, and a connection to watch it from.
pub async fn flushing_server() -> (PostgresServer, PgConnection) {
    let server = PostgresServer::start_with(&[("fsync", "on"), ("synchronous_commit", "on")])
        .expect("a private PostgreSQL server (initdb and pg_ctl of the local installation)");
    let mut watcher = PgConnection::connect(&server.url()).await.unwrap();
    sqlx::raw_sql(AssertSqlSafe(format!(
        "CREATE TABLE {NOTICES} (value BIGINT NOT NULL)"
    )))
    .execute(&mut watcher)
    .await
    .unwrap();
    (server, watcher)
}

/// Cancels the statement of the backend named `application` once it runs a message with a
/// `COMMIT`, and answers whether it found one.
pub async fn cancel_the_commit(watcher: &mut PgConnection, application: &str) -> bool {
    let started = Instant::now();
    while started.elapsed() < LOOK_FOR {
        let cancelled: Option<bool> = sqlx::query_scalar(
            "SELECT pg_cancel_backend(pid) FROM pg_stat_activity \
             WHERE application_name = $1 AND state = 'active' AND query LIKE '%COMMIT%'",
        )
        .bind(application)
        .fetch_optional(&mut *watcher)
        .await
        .unwrap();
        if cancelled == Some(true) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    false
}

/// Whether a row holding `value` committed.
pub async fn committed(watcher: &mut PgConnection, value: i64) -> bool {
    let rows: i64 = sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT count(*) FROM {NOTICES} WHERE value = $1"
    )))
    .bind(value)
    .fetch_one(&mut *watcher)
    .await
    .unwrap();
    rows == 1
}

/// Checks a fenced transaction that inserted `value` while its commit was cancelled: the cancel
/// found it in flight, and it answered as its commit ended, `Ok` where the row committed, an
/// error where it did not. Answers whether it committed.
pub async fn answered_as_it_ended<T: std::fmt::Debug, E: std::fmt::Debug>(
    watcher: &mut PgConnection,
    value: i64,
    found: bool,
    written: &Result<T, E>,
) -> bool {
    assert!(
        found,
        "no commit of the fenced transaction was seen in flight"
    );
    let committed = committed(watcher, value).await;
    if committed {
        assert!(
            written.is_ok(),
            "fenced() answered {written:?} though its transaction committed"
        );
    } else {
        assert!(
            written.is_err(),
            "fenced() answered Ok though nothing committed"
        );
    }
    committed
}
