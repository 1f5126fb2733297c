//! Table names are validated before any statement exists: anything but `table` or
//! `schema.table` of plain identifiers is a typed error, whatever the database.
#![cfg(feature = "sqlite")]

use lease_core::Error;
use lease_sqlx::SqliteLeaseStore;
use lease_sqlx::sqlx::sqlite::SqlitePoolOptions;

#[tokio::test]
async fn invalid_table_names_are_refused_before_any_statement() {
    // A pool that never connects: nothing may reach it.
    let pool = SqlitePoolOptions::new()
        .connect_lazy("sqlite::memory:")
        .unwrap();
    for bad in [
        "",
        "leases; DROP TABLE users",
        "lea\"ses",
        "lea`ses",
        "a.b.c",
        "1leases",
        "leases--",
        "läses",
        &"x".repeat(64),
    ] {
        match SqliteLeaseStore::with_table(pool.clone(), bad) {
            Err(Error::InvalidIdentifier { identifier, .. }) => assert_eq!(identifier, bad),
            other => panic!("{bad:?} gave {other:?}"),
        }
    }
    let store = SqliteLeaseStore::with_table(pool.clone(), "main.Leases_2").unwrap();
    assert_eq!(store.table().to_string(), "main.Leases_2");
    assert_eq!(pool.size(), 0, "validating a name opened a connection");
}
