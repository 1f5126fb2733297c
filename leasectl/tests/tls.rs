//! `leasectl` reaches a PostgreSQL server that takes TLS connections only, as managed databases
//! often do: with `sslmode=require` in the URL it lists the server's leases. The control: the
//! same URL with `sslmode=disable` is refused by the server, so the listing did go over TLS.
//! On a private server of this machine's PostgreSQL (`lease_tests::server`), with a certificate
//! `openssl` makes.

use std::process::Command;
use std::time::Duration;

use lease_core::{HolderId, LeaseName, LeaseStore, Ttl};
use lease_sqlx::PgLeaseStore;
use lease_sqlx::sqlx::postgres::PgPoolOptions;
use lease_tests::env;
use lease_tests::server::PostgresServer;

/// The tool's exit code, standard output and standard error for `list` on `url`.
fn list(url: &str) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_leasectl"))
        .args(["--database-url", url, "list"])
        .env_remove("DATABASE_URL")
        .env_remove("LEASE_TABLE")
        .output()
        .expect("leasectl runs");
    (
        output.status.code().expect("leasectl exits"),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_the_leases_of_a_server_that_takes_tls_only() {
    let mut server = match PostgresServer::start() {
        Ok(server) => server,
        Err(error) => return env::skip_or_fail("private postgres", &error.to_string()),
    };
    server.require_tls().expect("the server takes TLS only");
    let url = format!("{}?sslmode=require", server.url());
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(10))
        .connect(&url)
        .await
        .expect("a connection over TLS");
    let store = PgLeaseStore::new(pool.clone());
    store.setup().await.unwrap();
    let name = LeaseName::new("tls-sweep").unwrap();
    store
        .try_acquire(&name, &HolderId::generate(), Ttl::from_secs(60).unwrap())
        .await
        .unwrap()
        .expect("a fresh lease");
    pool.close().await;

    let (code, stdout, stderr) = list(&url);
    assert_eq!(code, 0, "list over TLS failed: {stderr}");
    assert!(stdout.contains("tls-sweep"), "{stdout}");

    let plain = url.replace("sslmode=require", "sslmode=disable");
    let (code, stdout, stderr) = list(&plain);
    assert_ne!(
        code, 0,
        "the server listed its leases to a client without TLS: {stdout}"
    );
    assert!(stderr.contains("no encryption"), "{stderr}");
}
