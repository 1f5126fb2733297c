//! The fenced checks run in a `lease.store` span, as the client's own store calls do:
//! `lease.operation` = `fence`, the lease's name, and `lease.outcome` = `ok` while the lease is
//! held, `not_held` once it is gone and `error` when its statement failed; checked first, with
//! the commit and with the `BEGIN` alike. The client that holds the lease counts each check by
//! how it ended.

use std::str::FromStr;
use std::time::Duration;

use lease_core::runtime::TokioRuntime;
use lease_core::{Error, LeaseClient, Ttl};
use lease_sqlx::sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use lease_sqlx::sqlx::{self, Pool};
use lease_sqlx::{CheckAt, Execute, ExecuteOn, SqlxDatabase, SqlxExecutor, SqlxStore};
use lease_tests::env;
use lease_tests::spans::{SpanCapture, span_fields};

/// Checks first, with the commit and with the `BEGIN` (`fenced_with`, [`CheckAt::Begin`]: on
/// SQLite, first) while the lease is held, then all three once it was released,
/// and answers the outcomes the `fence` spans recorded, in order (the client's own calls have
/// spans of their own).
async fn outcomes<DB>(pool: Pool<DB>) -> Vec<(String, String)>
where
    DB: SqlxDatabase,
    SqlxExecutor<DB>: Execute + for<'c> ExecuteOn<&'c mut DB::Connection>,
{
    let capture = SpanCapture::new();
    let _default = tracing::subscriber::set_default(capture.clone());
    let table = env::unique_table("lease_sqlx_fence_span");
    let store = SqlxStore::with_table(pool.clone(), &table).unwrap();
    store.setup().await.unwrap();
    let client = LeaseClient::builder(store.clone(), TokioRuntime)
        .ttl(Ttl::new(Duration::from_secs(10)).unwrap())
        .build()
        .unwrap();
    let guard = client.try_acquire("fence-span").await.unwrap().unwrap();
    let handle = guard.handle();

    let mut tx = pool.begin().await.unwrap();
    store.fence(&mut *tx, &handle).await.unwrap();
    tx.commit().await.unwrap();
    let tx = pool.begin().await.unwrap();
    lease_sqlx::commit_fenced(&store, tx, &handle)
        .await
        .unwrap();
    lease_sqlx::fenced_with(
        &store,
        &handle,
        CheckAt::Begin,
        async |_| Ok::<_, Error>(()),
    )
    .await
    .unwrap();

    guard.release().await.unwrap();
    let mut tx = pool.begin().await.unwrap();
    let refused = store.fence(&mut *tx, &handle).await;
    assert!(matches!(refused, Err(Error::NotHeld { .. })), "{refused:?}");
    drop(tx);
    let tx = pool.begin().await.unwrap();
    let refused = lease_sqlx::commit_fenced(&store, tx, &handle).await;
    assert!(matches!(refused, Err(Error::NotHeld { .. })), "{refused:?}");
    let refused =
        lease_sqlx::fenced_with(
            &store,
            &handle,
            CheckAt::Begin,
            async |_| Ok::<_, Error>(()),
        )
        .await;
    assert!(matches!(refused, Err(Error::NotHeld { .. })), "{refused:?}");

    // A check whose statement fails (its table is gone) answers an error, and says so.
    store
        .executor()
        .batch(&format!("DROP TABLE {table}"))
        .await
        .unwrap();
    let mut tx = pool.begin().await.unwrap();
    let failed = store.fence(&mut *tx, &handle).await;
    assert!(matches!(failed, Err(Error::Store { .. })), "{failed:?}");
    drop(tx);

    // The client that holds the lease counted every check, by how it ended.
    let checks = client.stats().fenced_checks;
    assert_eq!(
        (checks.passed, checks.not_held, checks.failed),
        (3, 3, 1),
        "the client's count of the fenced checks: {checks:?}"
    );

    let spans = capture.named("lease.store");
    spans
        .into_iter()
        .filter(|span| span["lease.operation"] == "fence")
        .map(|span| {
            assert_eq!(
                span_fields(&[
                    ("name", "lease.store"),
                    ("lease.operation", "fence"),
                    ("lease.name", "fence-span"),
                    ("lease.leases", "1"),
                    ("lease.outcome", span["lease.outcome"].as_str()),
                ]),
                span,
                "the span's fields"
            );
            (
                span["lease.operation"].clone(),
                span["lease.outcome"].clone(),
            )
        })
        .collect()
}

fn expected() -> Vec<(String, String)> {
    [
        "ok", "ok", "ok", "not_held", "not_held", "not_held", "error",
    ]
    .into_iter()
    .map(|outcome| ("fence".to_owned(), outcome.to_owned()))
    .collect()
}

// A runtime on this thread: the capture is this thread's subscriber.
#[tokio::test(flavor = "current_thread")]
async fn postgres() {
    let pool = match sqlx::PgPool::connect(&env::postgres_url()).await {
        Ok(pool) => pool,
        Err(e) => return env::skip_or_fail("postgres", &e.to_string()),
    };
    assert_eq!(outcomes(pool).await, expected());
}

#[tokio::test(flavor = "current_thread")]
async fn mariadb() {
    let pool = match sqlx::MySqlPool::connect(&env::mysql_url()).await {
        Ok(pool) => pool,
        Err(e) => return env::skip_or_fail("mariadb", &e.to_string()),
    };
    assert_eq!(outcomes(pool).await, expected());
}

#[tokio::test(flavor = "current_thread")]
async fn sqlite() {
    let dir = std::env::temp_dir().join(env::unique_table("lease_sqlx_fence_span"));
    std::fs::create_dir_all(&dir).unwrap();
    let options = SqliteConnectOptions::from_str("sqlite://fence_span.db?mode=rwc")
        .unwrap()
        .filename(dir.join("fence_span.db"));
    let pool = SqlitePoolOptions::new()
        .max_connections(2)
        .connect_with(lease_sqlx::sqlite_connect_options(options))
        .await
        .unwrap();
    let outcomes = outcomes(pool.clone()).await;
    pool.close().await;
    let _ = std::fs::remove_dir_all(dir);
    assert_eq!(outcomes, expected());
}
