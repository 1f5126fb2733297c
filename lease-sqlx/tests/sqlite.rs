//! SQLite: the conformance suite and this crate's cases on tokio and async-std, each store on
//! its own file in the temp directory.
#![cfg(feature = "sqlite")]

mod common;

use common::Backend;
use lease_core::{HolderId, LeaseName, LeaseStore, Ttl};
use lease_sqlx::SqliteLeaseStore;
use lease_sqlx::sqlx::Sqlite;

fn sqlite() -> Backend<Sqlite> {
    Backend::plain()
}

lease_tests::conformance_suite!(mod conformance_tokio, runtime = tokio, backend = sqlite());
lease_tests::conformance_suite!(mod conformance_async_std, runtime = async_std, backend = sqlite());

focused_suite!(mod focused_tokio, runtime = tokio, backend = sqlite());
focused_suite!(mod focused_async_std, runtime = async_std, backend = sqlite());

/// `on` moves a connected store to another table of the same pool: its statements name that
/// table, and a lease taken there is not one of the first table's.
#[tokio::test]
async fn on_moves_the_store_to_another_table_of_the_pool() {
    let file = std::env::temp_dir().join(format!(
        "{}.db",
        lease_tests::env::unique_table("lease_sqlx")
    ));
    let url = format!("sqlite://{}?mode=rwc", file.display());
    let first = SqliteLeaseStore::connect(&url).await.unwrap();
    first.setup().await.unwrap();
    let jobs = first.clone().on("jobs_leases").unwrap();
    assert_eq!(jobs.table().to_string(), "jobs_leases");
    assert!(first.clone().on("no such table").is_err());
    jobs.setup().await.unwrap();
    let name = LeaseName::new("sweep").unwrap();
    let ttl = Ttl::from_secs(5).unwrap();
    assert!(
        jobs.try_acquire(&name, &HolderId::generate(), ttl)
            .await
            .unwrap()
            .is_some()
    );
    assert!(first.inspect(&name).await.unwrap().is_none());
    assert!(
        first
            .try_acquire(&name, &HolderId::generate(), ttl)
            .await
            .unwrap()
            .is_some()
    );
    first.pool().close().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
    }
}

/// `connect` opens the database in write-ahead-log mode, with the bundled SQLite (which has
/// `unixepoch('subsec')`), and the store works on it.
#[tokio::test]
async fn connect_uses_wal_and_the_bundled_sqlite() {
    let file = std::env::temp_dir().join(format!(
        "{}.db",
        lease_tests::env::unique_table("lease_sqlx")
    ));
    let url = format!("sqlite://{}?mode=rwc", file.display());
    let store = SqliteLeaseStore::connect(&url).await.unwrap();
    store.setup().await.unwrap();
    let (mode,): (String,) = lease_sqlx::sqlx::query_as("PRAGMA journal_mode")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(mode, "wal");
    let (version,): (String,) = lease_sqlx::sqlx::query_as("SELECT sqlite_version()")
        .fetch_one(store.pool())
        .await
        .unwrap();
    let minor: u32 = version.split('.').nth(1).unwrap().parse().unwrap();
    assert!(minor >= 42, "SQLite {version} has no unixepoch('subsec')");
    let name = LeaseName::new("sweep").unwrap();
    let fence = store
        .try_acquire(&name, &HolderId::generate(), Ttl::from_secs(5).unwrap())
        .await
        .unwrap();
    // The first fence of a name is the database's clock in microseconds (SQLite: its
    // milliseconds × 1,000): within a minute of this machine's, on the same machine.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let fence = fence.expect("a free lease").get();
    assert_eq!(fence % 1000, 0, "fence {fence} is not whole milliseconds");
    assert!(
        fence.abs_diff(now) < 60_000_000,
        "fence {fence} is not the clock ({now} µs)"
    );
    store.pool().close().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
    }
}

/// `connect_with_table` opens a pool of its own as `connect` does, on any table; a bad table
/// name is refused before anything is opened.
#[tokio::test]
async fn connect_with_table_opens_the_store_on_that_table() {
    let file = std::env::temp_dir().join(format!(
        "{}.db",
        lease_tests::env::unique_table("lease_sqlx")
    ));
    let url = format!("sqlite://{}?mode=rwc", file.display());
    let store = SqliteLeaseStore::connect_with_table(&url, "jobs_leases")
        .await
        .unwrap();
    assert_eq!(store.table().to_string(), "jobs_leases");
    store.setup().await.unwrap();
    let name = LeaseName::new("sweep").unwrap();
    let ttl = Ttl::from_secs(5).unwrap();
    assert!(
        store
            .try_acquire(&name, &HolderId::generate(), ttl)
            .await
            .unwrap()
            .is_some()
    );
    // The default table was never made: the lease is in jobs_leases.
    let default = SqliteLeaseStore::connect(&url).await.unwrap();
    assert!(default.verify().await.is_err());
    assert!(matches!(
        SqliteLeaseStore::connect_with_table("sqlite:///no/such/dir/x.db", "a b").await,
        Err(lease_core::Error::InvalidIdentifier { .. })
    ));
    store.pool().close().await;
    default.pool().close().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
    }
}

/// `connect_with` opens a store from the application's `SqliteConnectOptions` on any table,
/// with the settings `connect` applies put over the options' own: write-ahead logging and the
/// busy timeout, where the options asked for a rollback journal and a timeout of 1 ms. The
/// control, a pool opened from the same options without them, keeps what the options say, so
/// the check tells the two apart. A bad table name is refused before anything is opened.
#[tokio::test]
async fn connect_with_opens_a_store_from_options_on_any_table() {
    use lease_sqlx::sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool};
    use std::time::Duration;

    let options = |file: &std::path::Path| {
        SqliteConnectOptions::new()
            .filename(file)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Delete)
            .busy_timeout(Duration::from_millis(1))
    };
    let settings = async |pool: &SqlitePool| -> (String, i64) {
        let (mode,): (String,) = lease_sqlx::sqlx::query_as("PRAGMA journal_mode")
            .fetch_one(pool)
            .await
            .unwrap();
        let (timeout,): (i64,) = lease_sqlx::sqlx::query_as("PRAGMA busy_timeout")
            .fetch_one(pool)
            .await
            .unwrap();
        (mode, timeout)
    };
    let busy_ms = i64::try_from(lease_sqlx::SQLITE_BUSY_TIMEOUT.as_millis()).unwrap();
    let file = std::env::temp_dir().join(format!(
        "{}.db",
        lease_tests::env::unique_table("lease_sqlx")
    ));
    let control_file = std::env::temp_dir().join(format!(
        "{}.db",
        lease_tests::env::unique_table("lease_sqlx")
    ));

    let store = SqliteLeaseStore::connect_with(options(&file), "jobs_leases")
        .await
        .unwrap();
    assert_eq!(store.table().to_string(), "jobs_leases");
    assert_eq!(settings(store.pool()).await, ("wal".to_owned(), busy_ms));
    store.setup().await.unwrap();
    let name = LeaseName::new("sweep").unwrap();
    let ttl = Ttl::from_secs(5).unwrap();
    let (ours, theirs) = (HolderId::generate(), HolderId::generate());
    let fence = store.try_acquire(&name, &ours, ttl).await.unwrap();
    assert!(fence.is_some());
    assert!(
        store
            .try_acquire(&name, &theirs, ttl)
            .await
            .unwrap()
            .is_none()
    );
    let info = store
        .inspect(&name)
        .await
        .unwrap()
        .expect("the lease is held");
    assert_eq!(info.holder, ours);
    assert!(store.release(&name, &ours, Duration::ZERO).await.unwrap());
    let next = store.try_acquire(&name, &theirs, ttl).await.unwrap();
    assert!(next > fence, "{next:?} after {fence:?}");
    // The lease is in jobs_leases: the default table was never made.
    let default = SqliteLeaseStore::new(store.pool().clone());
    assert!(default.verify().await.is_err());

    let control = SqlitePool::connect_with(options(&control_file))
        .await
        .unwrap();
    let (mode, timeout) = settings(&control).await;
    assert_ne!(mode, "wal");
    assert_eq!(timeout, 1);

    assert!(matches!(
        SqliteLeaseStore::connect_with(
            SqliteConnectOptions::new().filename("/no/such/dir/x.db"),
            "a b"
        )
        .await,
        Err(lease_core::Error::InvalidIdentifier { .. })
    ));
    assert!(matches!(
        SqliteLeaseStore::connect_with(
            SqliteConnectOptions::new().filename("/no/such/dir/x.db"),
            "jobs_leases"
        )
        .await,
        Err(lease_core::Error::Store { .. })
    ));
    store.pool().close().await;
    control.close().await;
    for file in [&file, &control_file] {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
        }
    }
}

/// A script dropped part-way (a timeout around `upgrade()`, a `select!` with a shutdown) may
/// have begun a transaction sqlx does not see (SQLite's rebuild of a table, `BEGIN IMMEDIATE`
/// to `COMMIT`, stopped where its future was dropped): its connection is closed, not given back
/// to the pool holding the database's write lock, which would fail every other writer, every
/// renewal of every process on the file, until the pool retired it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_dropped_part_way_leaves_no_transaction_on_the_pool() {
    use std::time::{Duration, Instant};

    use lease_sqlx::Execute;
    use lease_sqlx::sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
    use lease_sqlx::sqlx::{self, Connection};

    let file = std::env::temp_dir().join(format!(
        "{}.db",
        lease_tests::env::unique_table("dropped_script")
    ));
    let options = || {
        lease_sqlx::sqlite_connect_options(
            SqliteConnectOptions::new()
                .filename(&file)
                .create_if_missing(true),
        )
    };
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options())
        .await
        .unwrap();
    let store = SqliteLeaseStore::new(pool.clone());
    store.setup().await.unwrap();
    // Another process's writer holds the write lock, so the script's `BEGIN IMMEDIATE` waits.
    let mut other = sqlx::SqliteConnection::connect_with(&options())
        .await
        .unwrap();
    sqlx::raw_sql("BEGIN IMMEDIATE")
        .execute(&mut other)
        .await
        .unwrap();
    let script = "BEGIN IMMEDIATE;\nINSERT INTO leases (name, holder, fence, taken_at, expires_at) VALUES ('x', 'h', 1, 0, 0);\nCOMMIT;";
    let dropped =
        tokio::time::timeout(Duration::from_millis(300), store.executor().batch(script)).await;
    assert!(
        dropped.is_err(),
        "the script ended before the timeout: {dropped:?}"
    );
    // The lock is let go: the dropped script's `BEGIN IMMEDIATE` goes through, and its script
    // stops there, its answer having nobody to go to.
    sqlx::raw_sql("ROLLBACK").execute(&mut other).await.unwrap();
    // Until the pool has closed its connection, which it does once the script stopped; kept
    // (the control), it never does, and after 2 s its script holds the lock for sure.
    let waited = Instant::now();
    while pool.size() > 0 && waited.elapsed() < Duration::from_secs(2) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Another writer is not kept out.
    let started = Instant::now();
    let wrote = sqlx::raw_sql("BEGIN IMMEDIATE; ROLLBACK")
        .execute(&mut other)
        .await;
    assert!(
        wrote.is_ok() && started.elapsed() < Duration::from_secs(2),
        "another writer waited {:?} and got {wrote:?}: a pooled connection holds the write lock",
        started.elapsed()
    );
    // And the store's pool answers outside any transaction.
    assert_eq!(
        store.inspect(&LeaseName::new("x").unwrap()).await.unwrap(),
        None
    );
    other.close().await.unwrap();
    pool.close().await;
    let _ = common::remove_files(Some(&file));
}

/// A store on a pool that was closed (an application that closed its pool before its client's
/// shutdown, a shared pool closed elsewhere) fails with a permanent error: a closed pool never
/// opens again, so a campaign stops instead of retrying for ever.
#[tokio::test]
async fn a_closed_pool_is_a_permanent_failure() {
    let file = std::env::temp_dir().join(format!(
        "{}.db",
        lease_tests::env::unique_table("closed_pool")
    ));
    let url = format!("sqlite:{}?mode=rwc", file.display());
    let store = SqliteLeaseStore::connect(&url).await.unwrap();
    store.setup().await.unwrap();
    store.pool().close().await;
    let error = store
        .inspect(&LeaseName::new("sweep").unwrap())
        .await
        .expect_err("a closed pool answered");
    assert_eq!(
        error.store_error_kind(),
        Some(lease_core::StoreErrorKind::Permanent),
        "{error}"
    );
    let _ = common::remove_files(Some(&file));
}
