//! A store that cannot open its pool says whether waiting helps: an invalid URL or an unknown
//! database is `Permanent` (a start-up that retries transient errors stops and says why), a
//! server that refuses connections `Transient` (it may be starting). On PostgreSQL and MariaDB.
#![cfg(all(feature = "postgres", feature = "mysql"))]

use std::net::TcpListener;

use lease_core::{Error, Operation, StoreErrorKind};
use lease_sqlx::{MySqlLeaseStore, PgLeaseStore};
use lease_tests::env;

/// The kind of the error `connect` answered.
fn kind<S: std::fmt::Debug>(answer: Result<S, Error>) -> StoreErrorKind {
    match answer {
        Err(Error::Store {
            operation: Operation::Setup,
            kind,
            ..
        }) => kind,
        other => panic!("not a setup error: {other:?}"),
    }
}

/// `url` with its database replaced by one that does not exist.
fn unknown_database(url: &str) -> String {
    let (server, _) = url.rsplit_once('/').expect("a URL with a database");
    format!("{server}/no_such_database_for_leases")
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn postgres() {
    let url = env::postgres_url();
    assert_eq!(
        kind(PgLeaseStore::connect(&unknown_database(&url)).await),
        StoreErrorKind::Permanent,
        "an unknown database"
    );
    assert_eq!(
        kind(PgLeaseStore::connect("postgres://postgres@127.0.0.1:notaport/test").await),
        StoreErrorKind::Permanent,
        "an invalid URL"
    );
    let refused = format!("postgres://postgres@127.0.0.1:{}/test", closed_port());
    assert_eq!(
        kind(PgLeaseStore::connect(&refused).await),
        StoreErrorKind::Transient,
        "a server that refuses"
    );
}

#[tokio::test]
async fn mariadb() {
    let url = env::mysql_url();
    assert_eq!(
        kind(MySqlLeaseStore::connect(&unknown_database(&url)).await),
        StoreErrorKind::Permanent,
        "an unknown database"
    );
    let refused = format!("mysql://root@127.0.0.1:{}/test", closed_port());
    assert_eq!(
        kind(MySqlLeaseStore::connect(&refused).await),
        StoreErrorKind::Transient,
        "a server that refuses"
    );
}
