//! When the pool gives no connection, the store's error says why: a server that refuses
//! connections is named by its refusal (sqlx's pool retries it until its timeout and then says
//! only `PoolTimedOut`); a pool whose connections are all in use, and a server that does not
//! answer at all, still say that the pool timed out. On PostgreSQL and MariaDB, through the
//! store's statements and `lease_sqlx::fenced`, on tokio and async-std.
#![cfg(all(feature = "postgres", feature = "mysql"))]

use std::future::Future;
use std::net::TcpListener;
use std::pin::pin;
use std::time::{Duration, Instant};

use futures::future::{Either, select};
use lease_core::runtime::{AsyncStdRuntime, TokioRuntime};
use lease_core::{
    Error, ErrorChain, LeaseClient, LeaseGuard, LeaseName, LeaseStore, MemoryStore, Runtime,
};
use lease_sql::ExecuteOn;
use lease_sqlx::sqlx::mysql::MySqlPoolOptions;
use lease_sqlx::sqlx::postgres::PgPoolOptions;
use lease_sqlx::sqlx::{Database, Pool};
use lease_sqlx::{MySqlLeaseStore, PgLeaseStore, SqlxDatabase, SqlxExecutor, SqlxStore};
use lease_tests::proxy::FaultProxy;
use lease_tests::{env, no_connection};

/// The pools' acquire timeout here: short, so the tests are quick.
const ACQUIRE_TIMEOUT: Duration = Duration::from_millis(300);
/// Longer than any answer may take: the acquire timeout and the second the reason may take.
const BOUND: Duration = Duration::from_secs(10);

/// The store's error on `store` for an inspect, and its classification.
async fn inspect_error<DB>(store: &SqlxStore<DB>) -> Error
where
    DB: SqlxDatabase,
    SqlxExecutor<DB>: for<'c> ExecuteOn<&'c mut DB::Connection>,
{
    let started = Instant::now();
    let answer = store
        .inspect(&LeaseName::new("no-connection").unwrap())
        .await;
    no_connection::transient_within(answer, started, BOUND).unwrap()
}

/// `lease_sqlx::fenced`'s error on `store`, for a lease taken in a memory store (the check
/// never runs: there is no connection to run it on).
async fn fenced_error<DB>(store: &SqlxStore<DB>, lease: &LeaseGuard) -> Error
where
    DB: SqlxDatabase,
    SqlxExecutor<DB>: for<'c> ExecuteOn<&'c mut DB::Connection>,
{
    lease_sqlx::fenced(store, lease, async |_| Ok::<_, Error>(()))
        .await
        .expect_err("no connection, no transaction")
}

/// A lease held in a memory store, on `runtime`.
async fn memory_lease(runtime: impl Runtime) -> LeaseGuard {
    LeaseClient::new(MemoryStore::new(), runtime)
        .try_acquire("no-connection")
        .await
        .unwrap()
        .expect("a fresh memory store")
}

/// The refusal is named, not the pool's timeout, through the store and through `fenced`.
async fn refusal_is_named<DB>(store: SqlxStore<DB>, lease: &LeaseGuard)
where
    DB: SqlxDatabase,
    SqlxExecutor<DB>: for<'c> ExecuteOn<&'c mut DB::Connection>,
{
    for error in [
        inspect_error(&store).await,
        fenced_error(&store, lease).await,
    ] {
        let text = ErrorChain(&error).to_string();
        assert!(text.to_lowercase().contains("connection refused"), "{text}");
        assert!(!text.contains("timed out"), "{text}");
    }
}

fn pg_pool(url: &str, connections: u32) -> Pool<lease_sqlx::sqlx::Postgres> {
    PgPoolOptions::new()
        .max_connections(connections)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_lazy(url)
        .unwrap()
}

fn mysql_pool(url: &str, connections: u32) -> Pool<lease_sqlx::sqlx::MySql> {
    MySqlPoolOptions::new()
        .max_connections(connections)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_lazy(url)
        .unwrap()
}

/// Both databases, a port nothing listens on, a lease taken on `runtime`.
async fn refusals_are_named(runtime: impl Runtime) {
    let lease = memory_lease(runtime).await;
    let port = no_connection::closed_port().unwrap();
    let pg = pg_pool(&format!("postgres://postgres@127.0.0.1:{port}/test"), 2);
    refusal_is_named(PgLeaseStore::new(pg), &lease).await;
    let mysql = mysql_pool(&format!("mysql://root@127.0.0.1:{port}/test"), 2);
    refusal_is_named(MySqlLeaseStore::new(mysql), &lease).await;
}

#[tokio::test]
async fn a_refusing_server_is_named_on_tokio() {
    refusals_are_named(TokioRuntime).await;
}

#[async_std::test]
async fn a_refusing_server_is_named_on_async_std() {
    refusals_are_named(AsyncStdRuntime).await;
}

/// An acquisition the pool had no connection for sent nothing: a transient error, not an
/// unknown outcome (which a client answers by giving the lease back, two more waits on a pool
/// that has no connection), though the refused connection's error, on its own, reads like a
/// socket that broke under a statement. A pool with no free connection answers so too.
#[tokio::test]
async fn an_acquisition_without_a_connection_lost_no_answer() {
    let port = no_connection::closed_port().unwrap();
    let refused = PgLeaseStore::new(pg_pool(
        &format!("postgres://postgres@127.0.0.1:{port}/test"),
        2,
    ));
    let busy_pool = pg_pool(&env::postgres_url(), 1);
    let busy = PgLeaseStore::new(busy_pool.clone());
    let _taken = match busy_pool.acquire().await {
        Ok(connection) => connection,
        Err(error) => {
            env::skip_or_fail("postgres", &error.to_string());
            return;
        }
    };
    for store in [refused, busy] {
        let error = store
            .try_acquire(
                &LeaseName::new("no-connection").unwrap(),
                &lease_core::HolderId::generate(),
                lease_core::Ttl::from_secs(60).unwrap(),
            )
            .await
            .expect_err("no connection to send it on");
        assert_eq!(
            error.store_error_kind(),
            Some(lease_core::StoreErrorKind::Transient),
            "{error:?}"
        );
    }
}

/// A store opened from a URL whose server refuses says so at once, not after the pool's 30 s of
/// retries with only `PoolTimedOut`: what a service that cannot start prints.
#[tokio::test]
async fn connecting_to_a_refusing_server_names_the_refusal_at_once() {
    let port = no_connection::closed_port().unwrap();
    for url in [
        format!("postgres://postgres@127.0.0.1:{port}/test"),
        format!("mysql://root@127.0.0.1:{port}/test"),
    ] {
        let started = Instant::now();
        let error = if url.starts_with("postgres") {
            PgLeaseStore::connect(&url).await.map(drop)
        } else {
            MySqlLeaseStore::connect(&url).await.map(drop)
        }
        .expect_err("nothing listens there");
        let text = ErrorChain(&error).to_string();
        assert!(
            text.to_lowercase().contains("connection refused"),
            "{url}: {text}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{url}: answered after {:?}",
            started.elapsed()
        );
    }
}

/// A server that takes the connection and never answers: the reason cannot be had within its
/// second, and the pool's timeout stands, within the bound.
async fn silence_is_a_timeout(runtime: impl Runtime) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let pg = PgLeaseStore::new(pg_pool(
        &format!("postgres://postgres@127.0.0.1:{port}/test"),
        2,
    ));
    let mysql = MySqlLeaseStore::new(mysql_pool(
        &format!("mysql://root@127.0.0.1:{port}/test"),
        2,
    ));
    // A diagnosis without its own limit would wait on this server for ever: the test gives up
    // after twice the bound rather than hang.
    for error in [
        bounded(&runtime, inspect_error(&pg)).await,
        bounded(&runtime, inspect_error(&mysql)).await,
    ] {
        let text = ErrorChain(&error).to_string();
        assert!(text.contains("pool timed out"), "{text}");
    }
    drop(listener);
}

/// `future`'s output, or a panic after twice [`BOUND`] on `runtime`.
async fn bounded<T>(runtime: &impl Runtime, future: impl Future<Output = T>) -> T {
    match select(pin!(future), runtime.sleep(2 * BOUND)).await {
        Either::Left((output, _)) => output,
        Either::Right(_) => panic!("no answer within {:?}", 2 * BOUND),
    }
}

#[tokio::test]
async fn a_silent_server_is_a_timeout_on_tokio() {
    silence_is_a_timeout(TokioRuntime).await;
}

#[async_std::test]
async fn a_silent_server_is_a_timeout_on_async_std() {
    silence_is_a_timeout(AsyncStdRuntime).await;
}

/// A pool of one on the `backend` server at `url`, its connection taken: the server accepts
/// connections, so the pool's timeout is the answer.
async fn busy_pool_times_out<DB>(backend: &str, url: &str, pool: Pool<DB>)
where
    DB: SqlxDatabase + Database,
    SqlxExecutor<DB>: for<'c> ExecuteOn<&'c mut DB::Connection>,
{
    let taken = match pool.acquire().await {
        Ok(taken) => taken,
        Err(error) => return env::skip_or_fail(backend, &format!("{url}: {error}")),
    };
    let store = SqlxStore::<DB>::new(pool.clone());
    let text = ErrorChain(&inspect_error(&store).await).to_string();
    assert!(text.contains("pool timed out"), "{text}");
    drop(taken);
}

#[tokio::test]
async fn a_busy_pool_still_times_out() {
    let url = env::postgres_url();
    busy_pool_times_out("postgres", &url, pg_pool(&url, 1)).await;
    let url = env::mysql_url();
    busy_pool_times_out("mariadb", &url, mysql_pool(&url, 1)).await;
}

/// How many waiters time out together on a busy pool.
const WAITERS: usize = 16;

/// Waiters that time out together on a busy pool (its one connection taken) open one
/// connection between them to ask why, not one each: one diagnosis of a store runs at a time,
/// and a timeout met while it runs answers the timeout. Counted at a proxy in front of the
/// server: with a connection per waiter, 16.
#[tokio::test]
async fn waiters_that_time_out_together_ask_why_once_at_a_time() {
    let url = env::postgres_url();
    let proxy = FaultProxy::in_front_of(&url).unwrap();
    let pool = pg_pool(&proxy.rewrite_url(&url), 1);
    let taken = match pool.acquire().await {
        Ok(taken) => taken,
        Err(error) => return env::skip_or_fail("postgres", &format!("{url}: {error}")),
    };
    // Every connection the waiters open to ask why takes a while (each of its round trips
    // 200 ms), so that each one asked while another does: the waiters' timeouts all fall
    // within the first one's.
    proxy.delay(Duration::from_millis(100));
    let before = proxy.stats().accepted;
    let store = PgLeaseStore::new(pool.clone());
    let answers = futures::future::join_all((0..WAITERS).map(|_| inspect_error(&store))).await;
    for error in &answers {
        let text = ErrorChain(error).to_string();
        assert!(text.contains("pool timed out"), "{text}");
    }
    let diagnoses = proxy.stats().accepted - before;
    assert!(
        (1..=2).contains(&diagnoses),
        "{WAITERS} waiters that timed out together opened {diagnoses} connections to ask why"
    );
    drop(taken);
    pool.close().await;
}
