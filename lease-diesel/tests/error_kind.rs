//! Errors that are not the database's, classified through a store as lease-sqlx classifies
//! them: a closed deadpool pool never opens again, and lease-sql's own refusal of a row it
//! cannot read reads the same on every try, so both are `Permanent` (a client's campaign stops
//! on them rather than retry for ever); so is a PostgreSQL URL tokio-postgres cannot read. On
//! SQLite, which needs no server, and on a URL no server is asked for.
#![cfg(all(feature = "sqlite", feature = "deadpool"))]

use std::path::PathBuf;

use diesel_async::SimpleAsyncConnection;
use diesel_async::pooled_connection::deadpool::Pool;
use lease_core::{ErrorChain, HolderId, LeaseName, LeaseStore, StoreErrorKind, Ttl};
use lease_diesel::{AsyncSqliteConnection, DieselStore, sqlite_manager};
use lease_tests::env;

/// A SQLite file of the test's own, removed with its journal files at the end.
struct File(PathBuf);

impl File {
    fn new() -> Self {
        Self(std::env::temp_dir().join(format!("{}.sqlite3", env::unique_table("error_kind"))))
    }

    fn pool(&self) -> Pool<AsyncSqliteConnection> {
        let manager = sqlite_manager(self.0.to_string_lossy().into_owned());
        Pool::builder(manager).max_size(2).build().unwrap()
    }
}

impl Drop for File {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut file = self.0.clone().into_os_string();
            file.push(suffix);
            let _ = std::fs::remove_file(file);
        }
    }
}

#[tokio::test]
async fn a_closed_pool_is_permanent() {
    let file = File::new();
    let store = DieselStore::new(file.pool());
    store.setup().await.unwrap();
    store.pool().close();
    let error = store
        .inspect(&LeaseName::new("report").unwrap())
        .await
        .expect_err("a closed pool gives no connection");
    assert_eq!(
        error.store_error_kind(),
        Some(StoreErrorKind::Permanent),
        "{}",
        ErrorChain(&error)
    );
    assert!(!error.is_transient());
}

#[tokio::test]
async fn rows_the_store_cannot_read_are_permanent() {
    let file = File::new();
    let store = DieselStore::new(file.pool());
    store.setup().await.unwrap();
    let name = LeaseName::new("report").unwrap();
    store
        .try_acquire(&name, &HolderId::generate(), Ttl::from_secs(60).unwrap())
        .await
        .unwrap()
        .expect("report is free");
    // A fence no statement of the store writes.
    let mut connection = store.pool().get().await.unwrap();
    connection
        .batch_execute("UPDATE leases SET fence = -1")
        .await
        .unwrap();
    drop(connection);
    let error = store.inspect(&name).await.expect_err("a negative fence");
    let text = ErrorChain(&error).to_string();
    assert!(text.contains("negative fence"), "{text}");
    assert_eq!(
        error.store_error_kind(),
        Some(StoreErrorKind::Permanent),
        "{}",
        ErrorChain(&error)
    );
    // A name no lease may have.
    let mut connection = store.pool().get().await.unwrap();
    connection
        .batch_execute("UPDATE leases SET fence = 1, name = ''")
        .await
        .unwrap();
    drop(connection);
    let error = store.list().await.expect_err("an empty name");
    assert_eq!(
        error.store_error_kind(),
        Some(StoreErrorKind::Permanent),
        "{}",
        ErrorChain(&error)
    );
}

/// A PostgreSQL URL tokio-postgres cannot read (a port that is no number) is refused before
/// any server answers, in its own words, and never reads otherwise: `Permanent`, as lease-sqlx
/// reads the same URL. It read as transient, and a campaign retried it for ever.
#[cfg(feature = "postgres")]
#[tokio::test]
async fn a_postgres_url_that_cannot_be_read_is_permanent() {
    let manager = lease_diesel::postgres_manager("postgres://postgres@127.0.0.1:notaport/test");
    let store = DieselStore::new(Pool::builder(manager).max_size(1).build().unwrap());
    let error = store
        .inspect(&LeaseName::new("report").unwrap())
        .await
        .expect_err("no connection from a URL that cannot be read");
    assert_eq!(
        error.store_error_kind(),
        Some(StoreErrorKind::Permanent),
        "{}",
        ErrorChain(&error)
    );
}
