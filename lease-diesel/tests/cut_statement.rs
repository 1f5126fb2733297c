//! The two halves of the executor's mark on a connection while a statement is on the wire: a
//! statement that answered unmarks it, so its connection is reused for the next one (the
//! store's own statements, run here); and a connection left marked (what a statement cut
//! there leaves: its caller gone and its background finish past its limit, on a server gone
//! silent) is closed by the pool, never handed out mid-protocol. The first test sets the mark
//! by hand; the second cuts a statement the server holds, on tokio's paused clock, which runs
//! to the background limit of a minute as soon as nothing else is left to do.
#![cfg(all(feature = "postgres", feature = "deadpool"))]

use diesel_async::AsyncPgConnection;
use diesel_async::pooled_connection::AsyncDieselConnectionManager;
use diesel_async::pooled_connection::deadpool::Pool;
use lease_diesel::{DieselConnection, DieselStore};
use lease_sql::{Execute, Query};
use lease_tests::env;

/// A deadpool of one connection to the test server.
fn pool_of_one() -> Pool<AsyncPgConnection> {
    let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new(env::postgres_url());
    Pool::builder(manager).max_size(1).build().unwrap()
}

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
    let pool = pool_of_one();
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

/// Whether the server process `pid` is running a statement, asked through `watcher`.
async fn running(watcher: &DieselStore<Pool<AsyncPgConnection>>, pid: i64) -> bool {
    let found = watcher
        .executor()
        .ints(Query::new(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = $1::int4 AND state = 'active'",
            vec![lease_sql::Param::Int(pid)],
        ))
        .await
        .expect("the server's activity");
    found[0] == 1
}

#[tokio::test(flavor = "current_thread")]
async fn a_statement_cut_at_the_background_limit_leaves_its_connection_to_be_closed() {
    let pool = pool_of_one();
    if let Err(error) = pool.get().await {
        return env::skip_or_fail("postgres", &error.to_string());
    }
    let store = DieselStore::new(pool.clone());
    let watcher = DieselStore::new(pool_of_one());
    let first = backend(&store).await;
    // The server holds the statement's answer back for seconds, as a server gone silent would;
    // its caller stops waiting once the server runs it, and it runs on in the background.
    let held = store
        .executor()
        .ints(Query::new("SELECT 1::int8 FROM pg_sleep(10)", Vec::new()));
    let on_the_server = async {
        for _ in 0..200 {
            if running(&watcher, first).await {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        panic!("the held statement did not reach the server within five seconds");
    };
    tokio::select! {
        answer = held => panic!("the held statement answered: {answer:?}"),
        () = on_the_server => {}
    }
    // Past the background limit, with nothing left to run, the paused clock moves on to it.
    tokio::time::pause();
    tokio::time::sleep(std::time::Duration::from_secs(61)).await;
    tokio::time::resume();
    assert_ne!(
        backend(&store).await,
        first,
        "a connection cut in the middle of a statement was handed out again"
    );
}
