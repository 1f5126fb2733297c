//! A store statement cut by its caller (the store timeout) while a server that went silent holds
//! it frees its place in the pool within sqlx's close timeout: its connection is closed, not
//! given back to wait for an answer that never comes. Given back, the pool's ping on release
//! waits for that answer without a bound (TCP's retransmission, or for good), and a pool of two
//! holds no connection for anything else: every call fails for want of one.
//! On PostgreSQL and MariaDB behind a proxy that stalls (a black hole); not on SQLite, which
//! runs in the process.
#![cfg(all(feature = "postgres", feature = "mysql"))]

use std::time::{Duration, Instant};

use lease_core::{HolderId, LeaseName, LeaseStore, Ttl};
use lease_sql::Execute;
use lease_sqlx::sqlx::pool::PoolOptions;
use lease_sqlx::sqlx::{MySql, Pool, Postgres};
use lease_sqlx::{SqlxDatabase, SqlxExecutor, SqlxStore};
use lease_tests::env;
use lease_tests::proxy::FaultProxy;

/// How long the pool may take to drop the cut connections: sqlx's close timeout (5 s) and room
/// for a loaded machine.
const FREED_WITHIN: Duration = Duration::from_secs(15);

/// Cuts two renewals on `url`'s server behind a stalled proxy, on a pool of two connections
/// that hands them out untested (as a pool tuned for speed does, and as any pool does for a
/// statement already on its way when the server goes silent), then waits for the pool to
/// hold none of them.
async fn cut_statements_free_their_places<DB>(label: &str, url: &str)
where
    DB: SqlxDatabase,
    SqlxExecutor<DB>: Execute,
{
    let proxy = FaultProxy::in_front_of(url).unwrap();
    let pool: Pool<DB> = match PoolOptions::<DB>::new()
        .max_connections(2)
        .test_before_acquire(false)
        .connect(&proxy.rewrite_url(url))
        .await
    {
        Ok(pool) => pool,
        Err(error) => return env::skip_or_fail(label, &error.to_string()),
    };
    let table = env::unique_table("cut_statement");
    let store = SqlxStore::<DB>::with_table(pool.clone(), &table).unwrap();
    store.setup().await.unwrap();
    let (name, holder) = (LeaseName::new("cut").unwrap(), HolderId::generate());
    let ttl = Ttl::from_secs(30).unwrap();
    store.try_acquire(&name, &holder, ttl).await.unwrap();
    // Both connections open and back in the pool (sqlx pings each as it takes it back), then
    // the server goes silent. sqlx's idle count is an atomic it moves down and up in turn, so
    // it may read past the pool's size for a moment (seen: `usize::MAX`): waited for as 2.
    let (first, second) = (pool.acquire().await.unwrap(), pool.acquire().await.unwrap());
    drop((first, second));
    let started = Instant::now();
    while pool.num_idle() != 2 && started.elapsed() < FREED_WITHIN {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        (pool.size(), pool.num_idle()),
        (2, 2),
        "{label}: the pool did not take its two connections back"
    );
    proxy.stall();
    for _ in 0..2 {
        let cut =
            tokio::time::timeout(Duration::from_millis(200), store.renew(&name, &holder, ttl))
                .await;
        assert!(cut.is_err(), "{label}: a renewal answered through a stall");
    }
    // The size that ended the wait is the one judged: read again, a count moving elsewhere
    // could read otherwise for a moment.
    let started = Instant::now();
    let mut size = pool.size();
    while size > 0 && started.elapsed() < FREED_WITHIN {
        tokio::time::sleep(Duration::from_millis(50)).await;
        size = pool.size();
    }
    let idle = pool.num_idle();
    proxy.pass();
    let dropped = store
        .executor()
        .batch(&format!("DROP TABLE IF EXISTS {table}"))
        .await;
    assert_eq!(
        size, 0,
        "{label}: {size} connections ({idle} idle) still held {FREED_WITHIN:?} after their \
         statements were cut on a silent server"
    );
    dropped.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_cut_statements_free_their_places_in_the_pool() {
    cut_statements_free_their_places::<Postgres>("postgres", &env::postgres_url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_cut_statements_free_their_places_in_the_pool() {
    cut_statements_free_their_places::<MySql>("mariadb", &env::mysql_url()).await;
}
