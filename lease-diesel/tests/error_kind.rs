//! Errors that are not the database's, classified through a store as lease-sqlx classifies
//! them: a closed deadpool pool never opens again, and lease-sql's own refusal of a row it
//! cannot read reads the same on every try, so both are `Permanent` (a client's campaign stops
//! on them rather than retry for ever). On SQLite, which needs no server.
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
