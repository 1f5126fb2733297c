//! When the pool gives no connection, the store's error says why. bb8 retries a connection the
//! server refuses until its connection timeout and then says only `Timed out in bb8`, as it
//! does when every connection is in use: the store then names the failed connection instead.
//! A pool whose connections are all in use, and a server that does not answer at all, still
//! say that bb8 timed out. deadpool answers a failed connection's error at once, unchanged. On
//! PostgreSQL and MariaDB; on PostgreSQL, `postgres_manager`'s connections also keep the cause
//! that diesel-async's own manager drops.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use diesel_async::SimpleAsyncConnection;
use diesel_async::pooled_connection::{AsyncDieselConnectionManager, bb8, deadpool};
use diesel_async::{AsyncMysqlConnection, AsyncPgConnection};
use lease_core::{Error, ErrorChain, HolderId, LeaseName, LeaseStore, Ttl};
use lease_diesel::{DieselPool, DieselStore, postgres_manager};
use lease_tests::{env, no_connection};

/// The pools' connection timeout here: short, so the tests are quick.
const CONNECTION_TIMEOUT: Duration = Duration::from_millis(500);
/// Longer than any answer may take: the connection timeout and the second the reason may take.
const BOUND: Duration = Duration::from_secs(10);

fn pg_bb8(url: String, connections: u32) -> bb8::Pool<AsyncPgConnection> {
    bb8::Pool::builder()
        .max_size(connections)
        .connection_timeout(CONNECTION_TIMEOUT)
        .build_unchecked(AsyncDieselConnectionManager::new(url))
}

fn mysql_bb8(url: String, connections: u32) -> bb8::Pool<AsyncMysqlConnection> {
    bb8::Pool::builder()
        .max_size(connections)
        .connection_timeout(CONNECTION_TIMEOUT)
        .build_unchecked(AsyncDieselConnectionManager::new(url))
}

/// The store's error for an inspect, answered within the bound and transient.
async fn inspect_error<P: DieselPool>(store: &DieselStore<P>) -> Error {
    let started = Instant::now();
    let answer = tokio::time::timeout(
        2 * BOUND,
        store.inspect(&LeaseName::new("no-connection").unwrap()),
    )
    .await
    .expect("the store answered within twice the bound");
    no_connection::transient_within(answer, started, BOUND).unwrap()
}

/// The error names the connection that failed (and, where the driver keeps it, the refusal),
/// not bb8's timeout.
fn names_the_failed_connection(error: &Error, reason: &str) {
    let text = ErrorChain(error).to_string();
    assert!(text.to_lowercase().contains(reason), "{text}");
    assert!(!text.contains("Timed out in bb8"), "{text}");
}

#[tokio::test]
async fn a_refusing_server_is_named_through_bb8() {
    let port = no_connection::closed_port().unwrap();
    let pg = DieselStore::new(pg_bb8(
        format!("postgres://postgres@127.0.0.1:{port}/test"),
        2,
    ));
    // diesel-async keeps only the first line of tokio-postgres' error, without its cause.
    names_the_failed_connection(&inspect_error(&pg).await, "error connecting to server");
    let mysql = DieselStore::new(mysql_bb8(format!("mysql://root@127.0.0.1:{port}/test"), 2));
    names_the_failed_connection(&inspect_error(&mysql).await, "connection refused");
}

#[tokio::test]
async fn a_refusing_server_is_named_through_deadpool_at_once() {
    let port = no_connection::closed_port().unwrap();
    let pg = DieselStore::new(
        deadpool::Pool::builder(AsyncDieselConnectionManager::<AsyncPgConnection>::new(
            format!("postgres://postgres@127.0.0.1:{port}/test"),
        ))
        .build()
        .unwrap(),
    );
    let started = Instant::now();
    names_the_failed_connection(&inspect_error(&pg).await, "error connecting to server");
    let mysql = DieselStore::new(
        deadpool::Pool::builder(AsyncDieselConnectionManager::<AsyncMysqlConnection>::new(
            format!("mysql://root@127.0.0.1:{port}/test"),
        ))
        .build()
        .unwrap(),
    );
    names_the_failed_connection(&inspect_error(&mysql).await, "connection refused");
    assert!(
        started.elapsed() < CONNECTION_TIMEOUT,
        "deadpool waited: {:?}",
        started.elapsed()
    );
}

/// A server that takes the connection and never answers: the reason cannot be had within its
/// second, and bb8's timeout stands, within the bound.
#[tokio::test]
async fn a_silent_server_is_a_timeout_through_bb8() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let pg = DieselStore::new(pg_bb8(
        format!("postgres://postgres@127.0.0.1:{port}/test"),
        2,
    ));
    let mysql = DieselStore::new(mysql_bb8(format!("mysql://root@127.0.0.1:{port}/test"), 2));
    for error in [inspect_error(&pg).await, inspect_error(&mysql).await] {
        let text = ErrorChain(&error).to_string();
        assert!(text.contains("Timed out in bb8"), "{text}");
    }
    drop(listener);
}

/// The store on a pool of one whose only connection is taken: the server accepts connections,
/// so bb8's timeout is the answer.
async fn busy_pool_times_out<P: DieselPool>(store: &DieselStore<P>) {
    let text = ErrorChain(&inspect_error(store).await).to_string();
    assert!(text.contains("Timed out in bb8"), "{text}");
}

#[tokio::test]
async fn a_busy_pool_still_times_out_through_bb8() {
    let pg = pg_bb8(env::postgres_url(), 1);
    match pg.get_owned().await {
        Ok(_taken) => busy_pool_times_out(&DieselStore::new(pg.clone())).await,
        Err(error) => env::skip_or_fail("postgres", &error.to_string()),
    }
    let mysql = mysql_bb8(env::mysql_url(), 1);
    match mysql.get_owned().await {
        Ok(_taken) => busy_pool_times_out(&DieselStore::new(mysql.clone())).await,
        Err(error) => env::skip_or_fail("mariadb", &error.to_string()),
    }
}

/// `postgres_manager`'s connections keep tokio-postgres' cause: the refusal is named through
/// both pools, where diesel-async's own manager says only `error connecting to server`.
#[tokio::test]
async fn postgres_manager_names_the_refusal() {
    let port = no_connection::closed_port().unwrap();
    let url = format!("postgres://postgres@127.0.0.1:{port}/test");
    let through_bb8 = bb8::Pool::builder()
        .max_size(2)
        .connection_timeout(CONNECTION_TIMEOUT)
        .build_unchecked(postgres_manager(url.clone()));
    let through_deadpool = deadpool::Pool::builder(postgres_manager(url))
        .build()
        .unwrap();
    for error in [
        inspect_error(&DieselStore::new(through_bb8)).await,
        inspect_error(&DieselStore::new(through_deadpool)).await,
    ] {
        names_the_failed_connection(&error, "error connecting to server: connection refused");
    }
}

/// A store on `postgres_manager`'s connections works as on diesel-async's own: a lease taken,
/// seen, and given back on the shared server.
#[tokio::test]
async fn postgres_manager_connections_hold_leases() {
    let url = env::postgres_url();
    let pool = deadpool::Pool::builder(postgres_manager(url.clone()))
        .max_size(2)
        .build()
        .unwrap();
    let table = env::unique_table("lease_pg_manager");
    let store = DieselStore::with_table(pool.clone(), &table).unwrap();
    if let Err(error) = store.setup().await {
        return env::skip_or_fail("postgres", &format!("{url}: {}", ErrorChain(&error)));
    }
    let name = LeaseName::new("pg-manager").unwrap();
    let me = HolderId::generate();
    let fence = store
        .try_acquire(&name, &me, Ttl::from_secs(30).unwrap())
        .await
        .unwrap()
        .expect("a fresh table");
    let seen = store
        .inspect(&name)
        .await
        .unwrap()
        .expect("the lease just taken");
    assert_eq!((seen.holder, seen.fence), (me.clone(), fence));
    assert!(store.release(&name, &me, Duration::ZERO).await.unwrap());
    assert!(store.inspect(&name).await.unwrap().is_none(), "released");
    let mut conn = pool.get().await.unwrap();
    conn.batch_execute(&format!("DROP TABLE {table}"))
        .await
        .unwrap();
}

/// A connection the server refuses for good (here a database that does not exist) is a
/// permanent failure, as lease-sqlx reads its code, not a transient one to retry for ever; on
/// PostgreSQL through `postgres_manager`, whose connections keep the server's answer.
#[tokio::test]
async fn a_database_that_does_not_exist_is_a_permanent_failure() {
    let missing = env::unique_table("no_such_db");
    let pg_url = env::postgres_url();
    let pg_base = pg_url
        .rsplit_once('/')
        .map_or(pg_url.as_str(), |(base, _)| base);
    let pg = DieselStore::new(
        deadpool::Pool::builder(postgres_manager(format!("{pg_base}/{missing}")))
            .build()
            .unwrap(),
    );
    let mysql_url = env::mysql_url();
    let mysql_base = mysql_url
        .rsplit_once('/')
        .map_or(mysql_url.as_str(), |(base, _)| base);
    let mysql = DieselStore::new(
        deadpool::Pool::builder(AsyncDieselConnectionManager::<AsyncMysqlConnection>::new(
            format!("{mysql_base}/{missing}"),
        ))
        .build()
        .unwrap(),
    );
    let name = LeaseName::new("no-connection").unwrap();
    for (label, answer) in [
        ("postgres", pg.inspect(&name).await),
        ("mariadb", mysql.inspect(&name).await),
    ] {
        let error = answer.expect_err("a store on a database that does not exist");
        let text = ErrorChain(&error).to_string();
        if text.to_lowercase().contains("connection refused") {
            env::skip_or_fail(label, &text);
            continue;
        }
        assert_eq!(
            error.store_error_kind(),
            Some(lease_core::StoreErrorKind::Permanent),
            "{label}: {text}"
        );
    }
}
