//! A failed contended acquire writes no WAL: a correctness property of the PostgreSQL
//! try-acquire statement (it reads the row before it would lock it), checked through lease-sqlx
//! and lease-diesel on a private server nobody else writes to. The seed's naive upsert is the
//! control: it writes WAL on every failed attempt, so the measurement can see WAL at all.

use std::sync::Arc;

use diesel_async::AsyncPgConnection;
use diesel_async::pooled_connection::{AsyncDieselConnectionManager, deadpool};
use lease_core::{BoxError, HolderId, LeaseName, LeaseStore, Ttl};
use lease_diesel::DieselStore;
use lease_sqlx::PgLeaseStore;
use lease_tests::env;
use lease_tests::server::PostgresServer;
use sqlx::postgres::PgPoolOptions;
use sqlx::{AssertSqlSafe, PgPool};

/// Failed attempts per measured window.
const ATTEMPTS: usize = 200;
/// Windows tried: a background process (a checkpoint, the background writer's snapshot of
/// running transactions) may write a few bytes during one; none of them belongs to an attempt.
const WINDOWS: usize = 5;

async fn wal_position(admin: &PgPool) -> Result<String, BoxError> {
    Ok(sqlx::query_scalar("SELECT pg_current_wal_lsn()::text")
        .fetch_one(admin)
        .await?)
}

async fn wal_since(admin: &PgPool, position: &str) -> Result<i64, BoxError> {
    Ok(
        sqlx::query_scalar("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::int8")
            .bind(position)
            .fetch_one(admin)
            .await?,
    )
}

/// WAL bytes of each window of `ATTEMPTS` failed attempts on `name`, held by somebody else.
async fn failed_attempt_windows(
    admin: &PgPool,
    store: &dyn LeaseStore,
    name: &LeaseName,
) -> Result<Vec<i64>, BoxError> {
    let ttl = Ttl::from_secs(3600)?;
    let mut windows = Vec::new();
    for _ in 0..WINDOWS {
        let position = wal_position(admin).await?;
        for _ in 0..ATTEMPTS {
            let fence = store.try_acquire(name, &HolderId::generate(), ttl).await?;
            assert!(fence.is_none(), "a contender took a held lease");
        }
        let written = wal_since(admin, &position).await?;
        windows.push(written);
        if written == 0 {
            break;
        }
    }
    Ok(windows)
}

async fn check(url: String) -> Result<(), BoxError> {
    let admin = PgPoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await?;
    let table = env::unique_table("lease_wal");
    let ttl = Ttl::from_secs(3600)?;
    let name = LeaseName::new("contended")?;

    let sqlx_store = PgLeaseStore::with_table(
        PgPoolOptions::new()
            .max_connections(2)
            .connect(&url)
            .await?,
        &table,
    )?;
    sqlx_store.setup().await?;
    let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new(url.clone());
    let diesel_store: Arc<dyn LeaseStore> = Arc::new(DieselStore::with_table(
        deadpool::Pool::builder(manager).max_size(2).build()?,
        &table,
    )?);
    assert!(
        sqlx_store
            .try_acquire(&name, &HolderId::generate(), ttl)
            .await?
            .is_some()
    );

    for (driver, store) in [
        ("lease-sqlx", &sqlx_store as &dyn LeaseStore),
        ("lease-diesel", diesel_store.as_ref()),
    ] {
        let windows = failed_attempt_windows(&admin, store, &name).await?;
        assert_eq!(
            windows.last(),
            Some(&0),
            "{driver}: every window of {ATTEMPTS} failed attempts wrote WAL: {windows:?} bytes"
        );
    }

    // The control: the naive upsert decides under the row lock, so each failed attempt locks
    // the row and commits a transaction id, and the same measurement sees it.
    let naive = format!(
        "INSERT INTO {table} AS l (name, holder, fence, taken_at, expires_at) \
         VALUES ($1, $2, 1, now(), now() + interval '1 hour') \
         ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, fence = l.fence + 1 \
         WHERE l.expires_at < now()"
    );
    let position = wal_position(&admin).await?;
    for _ in 0..ATTEMPTS {
        let done = sqlx::query(AssertSqlSafe(naive.clone()))
            .bind(name.as_str())
            .bind(HolderId::generate().as_str())
            .execute(sqlx_store.pool())
            .await?;
        assert_eq!(
            done.rows_affected(),
            0,
            "the naive upsert took a held lease"
        );
    }
    let naive_bytes = wal_since(&admin, &position).await?;
    assert!(
        naive_bytes >= ATTEMPTS as i64,
        "the naive upsert wrote only {naive_bytes} bytes of WAL in {ATTEMPTS} failed attempts"
    );

    sqlx::raw_sql(AssertSqlSafe(format!("DROP TABLE {table}")))
        .execute(&admin)
        .await?;
    Ok(())
}

#[test]
fn a_failed_contended_acquire_writes_no_wal() {
    // A private server: on a shared one, other tests' writes would land in the window.
    let server = match PostgresServer::start() {
        Ok(server) => server,
        Err(error) => {
            env::skip_or_fail("postgres (private server)", &error.to_string());
            return;
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime
        .block_on(check(server.url()))
        .expect("the check ran");
}
