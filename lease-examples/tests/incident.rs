//! The incident example against the local PostgreSQL (`LEASE_TEST_POSTGRES_URL`): advisory
//! locks leave the readiness write without a connection, leases do not.

use std::time::Duration;

use lease_examples::incident::{self, JOBS, URL_VAR, Write};
use lease_sqlx::sqlx::{self, Connection, PgConnection};
use lease_tests::env;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advisory_locks_starve_the_readiness_write_and_leases_do_not() {
    let url = env::postgres_url();
    let mut conn = match PgConnection::connect(&url).await {
        Ok(conn) => conn,
        Err(error) => {
            env::skip_or_fail("postgres", &format!("cannot connect: {error}"));
            return;
        }
    };

    let report = incident::run(&url).await.expect("the example runs");
    let printed = report.to_string();
    assert!(report.reproduced(), "{printed}");

    let advisory = &report.advisory;
    assert_eq!(advisory.held, JOBS.len(), "{printed}");
    assert_eq!(advisory.in_use, incident::POOL_SIZE, "{printed}");
    match &advisory.write {
        Write::Failed { after, error } => {
            assert!(*after >= Duration::from_millis(900), "{printed}");
            assert!(*after < Duration::from_secs(3), "{printed}");
            assert!(error.contains("pool timed out"), "{error}");
        }
        other => panic!("the write got through advisory locks: {other:?}"),
    }
    // The operator's view: four advisory locks, each held by an idle backend.
    assert_eq!(advisory.pg_locks.len(), JOBS.len(), "{printed}");
    assert!(
        advisory.pg_locks.iter().all(|lock| lock.ends_with(" idle")),
        "{printed}"
    );

    let leases = &report.leases;
    assert_eq!(leases.held, JOBS.len(), "{printed}");
    assert!(leases.in_use <= 1, "{printed}");
    match &leases.write {
        Write::Committed { count, slowest } => {
            assert!(*count >= 2, "{printed}");
            assert!(*slowest < Duration::from_secs(3), "{printed}");
        }
        other => panic!("the write failed with leases: {other:?}"),
    }
    // Held for longer than their TTL: renewed through the same pool.
    assert!(
        leases.held_for.unwrap() > Duration::from_secs(2),
        "{printed}"
    );

    for expected in ["503, out of rotation", "serving", "pinned by the locks"] {
        assert!(printed.contains(expected), "{expected}:\n{printed}");
    }

    // Nothing left behind.
    let pattern = format!("lease\\_incident\\_%\\_{}\\_%", std::process::id());
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_tables WHERE tablename LIKE $1")
        .bind(pattern)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(left, 0, "tables left behind");
}

#[test]
fn the_url_comes_from_the_argument_then_the_environment() {
    let arg = || ["postgres://from-arg/db".to_owned()].into_iter();
    let env = || Some("postgres://from-env/db".to_owned());
    assert_eq!(
        incident::database_url(arg(), env()).unwrap(),
        "postgres://from-arg/db"
    );
    assert_eq!(
        incident::database_url(std::iter::empty(), env()).unwrap(),
        "postgres://from-env/db"
    );
    let usage = incident::database_url(std::iter::empty(), Some(" ".to_owned())).unwrap_err();
    assert!(usage.contains("needs a PostgreSQL database"), "{usage}");
    assert!(usage.contains(URL_VAR), "{usage}");
    assert!(usage.contains("cargo run --example incident --"), "{usage}");
}

/// A server that accepts and never answers ends the example with an error within its connect
/// bound, not never: its own connections had no timeout.
#[tokio::test]
async fn a_server_that_never_answers_ends_the_example_with_an_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accepts every connection and keeps it open, silent, until the test ends.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().take(8) {
            match stream {
                Ok(stream) => held.push(stream),
                Err(_) => break,
            }
        }
        std::thread::sleep(Duration::from_secs(60));
    });
    let url = format!("postgres://nobody@127.0.0.1:{port}/nothing");
    let limit = incident::CONNECT_BOUND * 3;
    let ran = tokio::time::timeout(limit, incident::run(&url))
        .await
        .unwrap_or_else(|_| panic!("the example still ran {limit:?} after it began"));
    let error = ran.expect_err("a silent server gives no report");
    assert!(
        error.to_string().contains("did not answer within"),
        "{error}"
    );
}
