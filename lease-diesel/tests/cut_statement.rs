//! The two halves of the executor's mark on a connection while a statement is on the wire: a
//! statement that answered unmarks it, so its connection is reused for the next one (the
//! store's own statements, run here); and a connection left marked (what a statement cut
//! there leaves: its caller gone and its background finish past its limit, on a server gone
//! silent; the mark set by hand here, as the limit is a minute) is closed by the pool, never
//! handed out mid-protocol.
#![cfg(all(feature = "postgres", feature = "deadpool"))]

use diesel_async::AsyncPgConnection;
use diesel_async::pooled_connection::AsyncDieselConnectionManager;
use diesel_async::pooled_connection::deadpool::Pool;
use lease_diesel::{DieselConnection, DieselStore};
use lease_sql::{Execute, Query};
use lease_tests::env;

/// The server process behind the pool's connection that runs the next statement.
async fn backend(store: &DieselStore<Pool<AsyncPgConnection>>) -> i64 {
    let pids = store
        .executor()
        .ints(Query::new("SELECT pg_backend_pid()::int8", Vec::new()))
        .await
        .expect("the backend's process id");
    pids[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_cut_on_the_wire_closes_its_connection_and_one_answered_keeps_it() {
    let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new(env::postgres_url());
    let pool: Pool<AsyncPgConnection> = Pool::builder(manager).max_size(1).build().unwrap();
    if let Err(error) = pool.get().await {
        return env::skip_or_fail("postgres", &error.to_string());
    }
    let store = DieselStore::new(pool.clone());
    let first = backend(&store).await;
    assert_eq!(
        backend(&store).await,
        first,
        "a statement that answered did not give its connection back for the next"
    );
    // What a statement cut on the wire leaves: the executor's mark, and the connection dropped
    // back into the pool with it.
    {
        let mut connection = pool.get().await.unwrap();
        let _ = connection.in_flight();
    }
    assert_ne!(
        backend(&store).await,
        first,
        "a connection cut in the middle of a statement was handed out again"
    );
}
