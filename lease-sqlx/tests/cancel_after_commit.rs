//! A fenced transaction that committed answers `Ok`, though the message its commit went out in
//! failed after the `COMMIT`.
//!
//! lease-sqlx's fenced commit is one message that goes on after the `COMMIT` with a `BEGIN`
//! (which gives the `ROLLBACK` of sqlx's dropped transaction object a transaction to end).
//! PostgreSQL holds off a cancel (`pg_cancel_backend`, an operator's or a monitor's) that
//! arrives while it writes a commit, and raises it at the start of the message's next
//! statement: the message answers "canceling statement due to user request" though its
//! transaction committed. Read as the commit's failure, that told the caller that nothing had
//! committed (a transient error, which a caller retries: the job done twice).
//!
//! The commit is made slow with `commit_delay` (the sleep inside the commit before its flush, a
//! superuser's setting, on the session of the pool's one connection), and the backend is
//! cancelled while it sleeps: on a private server whose commits flush (`fsync` and
//! `synchronous_commit` on), reached as its superuser. The control sends a message of the same
//! shape through sqlx itself: it answers the cancel while its row committed, which shows that
//! the case can see what it checks.
#![cfg(feature = "postgres")]

#[path = "support/cancelled_commit.rs"]
mod cancelled_commit;

use std::time::Duration;

use cancelled_commit::{
    ATTEMPTS, NOTICES, SLOW_COMMITS, answered_as_it_ended, cancel_the_commit, committed,
    flushing_server,
};
use lease_core::runtime::TokioRuntime;
use lease_core::{BoxError, LeaseClient};
use lease_sqlx::SqlxStore;
use lease_sqlx::sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use lease_sqlx::sqlx::{self, AssertSqlSafe, PgPool};
use lease_tests::server::PostgresServer;
use lease_tests::spans::SpanCapture;

/// What the store logs when the statement after a fenced commit failed.
const COMMITTED_THEN_FAILED: &str =
    "fenced transaction committed; the statement after its COMMIT failed";

/// A pool of one connection to `server` named `application`, whose commits are slow.
async fn slow_commits(server: &PostgresServer, application: &str) -> PgPool {
    let options: PgConnectOptions = server.url().parse().unwrap();
    let options = options.application_name(application).options(SLOW_COMMITS);
    PgPoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_commit_cancelled_after_committing_answers_ok() {
    let (server, mut watcher) = flushing_server().await;
    let application = "lease_cancelled";
    let pool = slow_commits(&server, application).await;
    let store = SqlxStore::new(pool.clone());
    store.setup().await.unwrap();
    let client = LeaseClient::new(store.clone(), TokioRuntime);
    let guard = client.try_acquire("notices").await.unwrap().unwrap();
    let capture = SpanCapture::new();
    let _default = tracing::subscriber::set_default(capture.clone());

    let mut after_the_commit = 0;
    for value in 0..ATTEMPTS as i64 {
        let insert = format!("INSERT INTO {NOTICES} (value) VALUES ({value})");
        let (written, found) = tokio::join!(
            lease_sqlx::fenced(&store, &guard, async |tx| {
                sqlx::raw_sql(AssertSqlSafe(insert))
                    .execute(&mut *tx)
                    .await?;
                Ok::<_, BoxError>(())
            }),
            cancel_the_commit(&mut watcher, application),
        );
        answered_as_it_ended(&mut watcher, value, found, &written).await;
        // Counted where the cancel failed the statement after the commit, not where it came
        // once the message had ended.
        after_the_commit = capture
            .events(tracing::Level::WARN)
            .iter()
            .filter(|event| {
                event
                    .get("message")
                    .is_some_and(|message| message == COMMITTED_THEN_FAILED)
            })
            .count();
        if after_the_commit > 0 {
            break;
        }
    }
    assert!(
        after_the_commit > 0,
        "no cancel in {ATTEMPTS} landed after a commit, so the case checked nothing"
    );
    assert!(guard.is_held(), "a cancelled commit cost the lease");

    drop(guard);
    client.shutdown(Duration::from_secs(5)).await;
    pool.close().await;
}

/// The control: the same cancel on a message of the same shape sent through sqlx, after an
/// insert in a transaction of its own, answers an error while the insert committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_a_cancel_held_off_by_the_commit_fails_the_next_statement() {
    let (server, mut watcher) = flushing_server().await;
    let application = "lease_cancelled_control";
    let pool = slow_commits(&server, application).await;

    let mut after_the_commit = 0;
    for value in 0..ATTEMPTS as i64 {
        let mut connection = pool.acquire().await.unwrap();
        sqlx::raw_sql(AssertSqlSafe(format!(
            "BEGIN; INSERT INTO {NOTICES} (value) VALUES ({value})"
        )))
        .execute(&mut *connection)
        .await
        .unwrap();
        let (sent, found) = tokio::join!(
            sqlx::raw_sql("SELECT 1;\nCOMMIT;\nBEGIN").execute(&mut *connection),
            cancel_the_commit(&mut watcher, application),
        );
        let _ = sqlx::raw_sql("ROLLBACK").execute(&mut *connection).await;
        drop(connection);
        assert!(found, "no commit was seen in flight");
        // Not committed: the cancel landed in the `SELECT`; committed with `Ok`: it came once
        // the message had ended, and the server let it go. Either way, cancel again.
        if committed(&mut watcher, value).await
            && let Err(error) = sent
        {
            assert!(
                error.to_string().contains("canceling statement"),
                "the message failed for another reason than the cancel: {error}"
            );
            after_the_commit += 1;
            break;
        }
    }
    assert!(
        after_the_commit > 0,
        "no cancel in {ATTEMPTS} landed after a commit"
    );
    pool.close().await;
}
