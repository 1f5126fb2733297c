//! The DDL shipped in `sql/` for users who run their own migrations is exactly what
//! `Statements::create_table` runs. Set `LEASE_SQL_BLESS=1` to rewrite the files after changing
//! the DDL.

use lease_sql::{Dialect, Statements, TableName};

const HEADER: &str = "-- The lease table, as lease-sql's Statements::create_table creates it.\n\
                      -- Rename `leases` as you like; give the store the same table name.\n";

fn check(dialect: Dialect, file: &str) {
    let path = format!("{}/sql/{file}", env!("CARGO_MANIFEST_DIR"));
    let ddl = Statements::new(dialect, &TableName::default())
        .create_table()
        .to_owned();
    let expected = format!("{HEADER}{ddl};\n");
    if std::env::var_os("LEASE_SQL_BLESS").is_some() {
        std::fs::write(&path, &expected).unwrap();
    }
    let shipped = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        shipped, expected,
        "sql/{file} is out of date: rerun with LEASE_SQL_BLESS=1"
    );
}

#[test]
fn postgres_sql_matches_create_table() {
    check(Dialect::Postgres, "postgres.sql");
}

#[test]
fn mariadb_sql_matches_create_table() {
    check(Dialect::MySql, "mariadb.sql");
}

#[test]
fn sqlite_sql_matches_create_table() {
    check(Dialect::Sqlite, "sqlite.sql");
}
