//! On PostgreSQL a failed statement aborts the transaction, and a plain `COMMIT` then answers
//! `ROLLBACK` without an error: work that swallowed such a failure must not be told that its
//! writes committed, through `lease_diesel::fenced_with` with the check at the `BEGIN` or with
//! the commit. Nothing is committed, the caller gets an error, and the lease is not lost by it.
#![cfg(all(feature = "postgres", feature = "deadpool"))]

use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::{AsyncPgConnection, SimpleAsyncConnection};
use lease_core::runtime::TokioRuntime;
use lease_core::{BoxError, LeaseClient};
use lease_diesel::{CheckAt, DieselStore};
use lease_tests::env;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_work_that_swallowed_a_failure_is_not_told_it_committed() {
    let url = env::postgres_url();
    let pool: Pool<AsyncPgConnection> = Pool::builder(lease_diesel::postgres_manager(&url))
        .max_size(2)
        .build()
        .unwrap();
    let mut connection = match pool.get().await {
        Ok(connection) => connection,
        Err(error) => return env::skip_or_fail("postgres", &error.to_string()),
    };
    let table = env::unique_table("swallowed");
    let store = DieselStore::with_table(pool.clone(), &table).unwrap();
    store.setup().await.unwrap();
    let notes = format!("{table}_notes");
    connection
        .batch_execute(&format!("CREATE TABLE {notes} (v int)"))
        .await
        .unwrap();
    let client = LeaseClient::new(store.clone(), TokioRuntime);
    let guard = client.try_acquire("notes").await.unwrap().expect("free");
    for at in [CheckAt::Begin, CheckAt::Commit] {
        let answer = lease_diesel::fenced_with(&store, &mut connection, &guard, at, async |conn| {
            conn.batch_execute(&format!("INSERT INTO {notes} VALUES (1)"))
                .await?;
            // A failure the work expects and ignores: the transaction is aborted.
            let _ = conn.batch_execute("SELECT 1 / 0").await;
            Ok::<_, BoxError>(())
        })
        .await;
        assert!(answer.is_err(), "{at:?}: told it committed: {answer:?}");
        assert!(
            guard.is_held(),
            "{at:?}: the aborted transaction cost the lease"
        );
    }
    // Read on another connection: nothing of either transaction committed.
    drop(connection);
    let mut reader = pool.get().await.unwrap();
    let committed = reader
        .batch_execute(&format!(
            "DO $$ BEGIN IF (SELECT count(*) FROM {notes}) <> 0 THEN \
             RAISE EXCEPTION 'an aborted transaction committed'; END IF; END $$"
        ))
        .await;
    drop(reader);
    guard.release().await.unwrap();
    pool.get()
        .await
        .unwrap()
        .batch_execute(&format!("DROP TABLE {notes}; DROP TABLE {table}"))
        .await
        .unwrap();
    committed.unwrap();
}
