//! A fenced transaction through lease-diesel answers as its commit ended when a cancel lands
//! while PostgreSQL writes the commit: `Ok` where it committed. Its commit message ends with
//! the `COMMIT`, so the server lets the cancel it held off go once the message has ended
//! (lease-sqlx's message goes on with a `BEGIN`, which the held-off cancel fails: its
//! `tests/cancel_after_commit.rs`, whose helpers this case shares, shows that control).
#![cfg(all(feature = "deadpool", feature = "postgres"))]

#[path = "../../lease-sqlx/tests/support/cancelled_commit.rs"]
mod cancelled_commit;

use std::time::Duration;

use cancelled_commit::{
    ATTEMPTS, NOTICES, SLOW_COMMITS, answered_as_it_ended, cancel_the_commit, flushing_server,
};
use diesel_async::pooled_connection::AsyncDieselConnectionManager;
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::{AsyncPgConnection, SimpleAsyncConnection};
use lease_core::runtime::TokioRuntime;
use lease_core::{BoxError, LeaseClient};
use lease_diesel::DieselStore;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_commit_cancelled_while_committing_answers_as_it_ended() {
    let (server, mut watcher) = flushing_server().await;
    let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new(server.url());
    let pool: Pool<AsyncPgConnection> = Pool::builder(manager).max_size(2).build().unwrap();
    let store = DieselStore::new(pool.clone());
    store.setup().await.unwrap();
    let client = LeaseClient::new(store.clone(), TokioRuntime);
    let guard = client.try_acquire("notices").await.unwrap().unwrap();
    // The transactions' connection, held here: the store's own statements use the other.
    let application = "lease_cancelled_diesel";
    let mut connection = pool.get().await.unwrap();
    let slow: String = SLOW_COMMITS
        .iter()
        .map(|(name, value)| format!("SET {name} = {value}; "))
        .collect();
    connection
        .batch_execute(&format!("{slow}SET application_name = '{application}'"))
        .await
        .unwrap();

    let mut committed_under_a_cancel = 0;
    for value in 0..ATTEMPTS as i64 {
        let insert = format!("INSERT INTO {NOTICES} (value) VALUES ({value})");
        let (written, found) = tokio::join!(
            lease_diesel::fenced(&store, &mut connection, &guard, async |conn| {
                conn.batch_execute(&insert).await?;
                Ok::<_, BoxError>(())
            }),
            cancel_the_commit(&mut watcher, application),
        );
        if answered_as_it_ended(&mut watcher, value, found, &written).await {
            committed_under_a_cancel += 1;
        }
    }
    assert!(
        committed_under_a_cancel > 0,
        "no transaction of {ATTEMPTS} committed under a cancel, so the case checked nothing"
    );
    assert!(guard.is_held(), "a cancelled commit cost the lease");

    drop(connection);
    drop(guard);
    client.shutdown(Duration::from_secs(5)).await;
}
