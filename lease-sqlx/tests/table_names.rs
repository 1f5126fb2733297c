//! Table names are validated before any statement exists: anything but `table` or
//! `schema.table` of plain identifiers is a typed error, whatever the database.
#![cfg(feature = "sqlite")]

use lease_sqlx::SqliteLeaseStore;
use lease_sqlx::sqlx::sqlite::SqlitePoolOptions;
use lease_tests::table_names::assert_invalid_table_names_refused;

#[tokio::test]
async fn invalid_table_names_are_refused_before_any_statement() {
    // A pool that never connects: nothing may reach it.
    let pool = SqlitePoolOptions::new()
        .connect_lazy("sqlite::memory:")
        .unwrap();
    let store = assert_invalid_table_names_refused(|table| {
        SqliteLeaseStore::with_table(pool.clone(), table)
    });
    assert_eq!(store.table().to_string(), "main.Leases_2");
    assert_eq!(pool.size(), 0, "validating a name opened a connection");
}
