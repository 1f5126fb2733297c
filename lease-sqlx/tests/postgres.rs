//! PostgreSQL: the conformance suite and this crate's cases, prepared and through the simple
//! protocol, on tokio and async-std, and on connections that are `SERIALIZABLE` by default; the literals of the simple protocol against the server's
//! own parser, and a statement they cannot carry failing before it takes a connection; and the
//! negative control, sqlx's `PgAdvisoryLock` with a pool of one.
#![cfg(feature = "postgres")]

mod common;

use std::time::Duration;

use common::Backend;
use lease_sql::{Execute, Param, Query};
use lease_sqlx::sqlx::postgres::{PgAdvisoryLock, PgPoolOptions};
use lease_sqlx::sqlx::{self, AssertSqlSafe, Postgres};
use lease_sqlx::{PgLeaseStore, PgProtocol, SqlxExecutor};
use lease_tests::env;

fn prepared() -> Backend<Postgres> {
    Backend::plain()
}

fn simple() -> Backend<Postgres> {
    Backend::adjusted("postgres-simple-protocol", |store| {
        store.map_executor(|x| x.with_protocol(PgProtocol::SimpleInline))
    })
}

lease_tests::conformance_suite!(mod conformance_tokio, runtime = tokio, backend = prepared());
lease_tests::conformance_suite!(mod conformance_async_std, runtime = async_std, backend = prepared());
lease_tests::conformance_suite!(mod simple_protocol_tokio, runtime = tokio, backend = simple());
lease_tests::conformance_suite!(mod simple_protocol_async_std, runtime = async_std, backend = simple());
// Connections whose transactions are SERIALIZABLE by default, as a database or role may set
// them: every statement of the store, and its fenced check at the start, under a snapshot.
lease_tests::conformance_suite!(
    mod serializable_tokio,
    runtime = tokio,
    backend = prepared().serializable("postgres-serializable"),
);

focused_suite!(mod focused_tokio, runtime = tokio, backend = prepared());
focused_suite!(mod focused_async_std, runtime = async_std, backend = prepared());
focused_suite!(mod focused_simple_protocol_tokio, runtime = tokio, backend = simple());

/// Connects to the test server, or reports the skip (a failure under LEASE_TEST_REQUIRE_ALL).
async fn server() -> Option<sqlx::PgPool> {
    match PgPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(common::ACQUIRE_TIMEOUT)
        .connect(&env::postgres_url())
        .await
    {
        Ok(pool) => Some(pool),
        Err(error) => {
            env::skip_or_fail("postgres", &error.to_string());
            None
        }
    }
}

/// Every awkward text, written as a literal the way the simple protocol sends parameters, is
/// read back by PostgreSQL exactly as it was, whatever `standard_conforming_strings` says.
#[tokio::test]
async fn inline_literals_read_back_verbatim() {
    let Some(pool) = server().await else { return };
    let texts = [
        "plain",
        "it's",
        "''",
        "\\",
        "\\'",
        "'\\",
        "\\\\''",
        "a\\nb",
        "\\x41",
        "$1",
        "$$",
        "E'x'",
        "'; DROP TABLE leases; --",
        "é 🔒 \u{202e} \u{feff}",
        "\n\r\t",
    ];
    for setting in ["on", "off"] {
        let mut conn = pool.acquire().await.unwrap();
        sqlx::raw_sql(AssertSqlSafe(format!(
            "SET standard_conforming_strings = {setting}"
        )))
        .execute(&mut *conn)
        .await
        .unwrap();
        for text in texts {
            let literal = lease_sql::postgres_literal(text).unwrap();
            let row: (String,) = sqlx::query_as(AssertSqlSafe(format!("SELECT {literal}::text")))
                .persistent(false)
                .fetch_one(&mut *conn)
                .await
                .unwrap();
            assert_eq!(row.0, text, "standard_conforming_strings = {setting}");
        }
        sqlx::raw_sql("RESET standard_conforming_strings")
            .execute(&mut *conn)
            .await
            .unwrap();
    }
}

/// A store's `Debug` names the table and pool size, never the URL or the password.
#[tokio::test]
async fn debug_never_shows_the_password() {
    let pool = PgPoolOptions::new()
        .connect_lazy("postgres://lease_user:s3cret-pw@127.0.0.1:1/leasedb")
        .unwrap();
    let store = PgLeaseStore::with_table(pool, "jobs.leases").unwrap();
    let debug = format!("{store:?}");
    assert!(debug.contains("jobs.leases"), "{debug}");
    for secret in ["s3cret-pw", "lease_user", "127.0.0.1", "leasedb"] {
        assert!(!debug.contains(secret), "{debug} shows {secret}");
    }
}

/// The negative control: with sqlx's session advisory locks and a pool of one connection, the
/// first lock pins the connection (its guard keeps it), so a write through the same pool cannot
/// get through within the readiness probe's generous 3 seconds. The test ends by itself: the
/// write is abandoned after 3 seconds and the lock released.
#[tokio::test]
async fn advisory_locks_pin_the_only_connection() {
    let Some(setup_pool) = server().await else {
        return;
    };
    let table = env::unique_table("lease_sqlx_advisory");
    sqlx::raw_sql(AssertSqlSafe(format!("CREATE TABLE {table} (at bigint)")))
        .execute(&setup_pool)
        .await
        .unwrap();

    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(10))
        .connect(&env::postgres_url())
        .await
        .unwrap();
    let jobs = ["sweep", "alerts", "mail-checks", "uptime:node-a"];
    let mut held = Vec::new();
    // The first lock takes the only connection; the other three would wait for it forever, so
    // each gets a bounded try.
    for job in jobs {
        let lock = PgAdvisoryLock::new(job);
        let attempt = tokio::time::timeout(Duration::from_millis(500), async {
            let conn = pool.acquire().await?;
            lock.acquire(conn).await
        })
        .await;
        if let Ok(guard) = attempt {
            held.push(guard.unwrap());
        }
    }
    assert_eq!(
        held.len(),
        1,
        "only the first lock can get the one connection"
    );

    let insert = format!("INSERT INTO {table} (at) VALUES (1)");
    let write = tokio::time::timeout(
        Duration::from_secs(3),
        sqlx::raw_sql(AssertSqlSafe(insert.clone())).execute(&pool),
    )
    .await;
    assert!(
        write.is_err(),
        "the write got through while an advisory lock held the pool's connection"
    );

    for guard in held {
        guard.release_now().await.unwrap();
    }
    // Released, the same write goes through at once: the lock was what kept it out.
    tokio::time::timeout(
        Duration::from_secs(3),
        sqlx::raw_sql(AssertSqlSafe(insert)).execute(&pool),
    )
    .await
    .expect("the write after releasing the lock")
    .unwrap();
    sqlx::raw_sql(AssertSqlSafe(format!("DROP TABLE {table}")))
        .execute(&setup_pool)
        .await
        .unwrap();
}

/// Through the simple protocol, a statement that cannot be written as one text (a NUL in a
/// text parameter) fails before it takes a connection from the pool: the pool's one connection
/// is the same server process after it, not one closed for a statement that never went out.
#[tokio::test]
async fn a_statement_the_simple_protocol_cannot_carry_takes_no_connection() {
    let pool = match PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(common::ACQUIRE_TIMEOUT)
        .connect(&env::postgres_url())
        .await
    {
        Ok(pool) => pool,
        Err(error) => return env::skip_or_fail("postgres", &error.to_string()),
    };
    let executor = SqlxExecutor::new(pool.clone()).with_protocol(PgProtocol::SimpleInline);
    let backend = || executor.ints(Query::new("SELECT pg_backend_pid()::int8", Vec::new()));
    let before = backend().await.unwrap();
    let refused = executor
        .affected(Query::new("SELECT $1::text", vec![Param::text("a\0b")]))
        .await;
    assert!(refused.is_err(), "a NUL went out as text: {refused:?}");
    assert_eq!(
        backend().await.unwrap(),
        before,
        "the pool's connection was closed for a statement that never went out"
    );
    pool.close().await;
}
