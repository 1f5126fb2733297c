//! The private servers start, stop, restart with their data, and leave nothing behind, also
//! when the test that made them panics.

use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use lease_tests::env::skip_or_fail;
use lease_tests::server::{MariaDbServer, PostgresServer};
use sqlx::{Connection, MySqlConnection, PgConnection, Row};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn accepts(port: u16) -> bool {
    let address = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port).into();
    TcpStream::connect_timeout(&address, Duration::from_millis(500)).is_ok()
}

#[test]
fn a_private_postgres_stops_and_restarts_with_its_data() {
    let mut server = match PostgresServer::start() {
        Ok(server) => server,
        Err(error) => return skip_or_fail("private postgres", &error.to_string()),
    };
    let (url, port, dir) = (
        server.url(),
        server.port(),
        server.directory().to_path_buf(),
    );
    assert!(server.is_running());
    let rt = runtime();
    rt.block_on(async {
        let mut connection = PgConnection::connect(&url).await.expect("connects");
        sqlx::query("CREATE TABLE kept (id int)")
            .execute(&mut connection)
            .await
            .unwrap();
        sqlx::query("INSERT INTO kept VALUES (1)")
            .execute(&mut connection)
            .await
            .unwrap();
        connection.close().await.unwrap();
    });

    server.stop().expect("stops");
    assert!(!server.is_running());
    assert!(!accepts(port), "port {port} still accepts after stop");
    let refused = rt.block_on(PgConnection::connect(&url));
    assert!(refused.is_err(), "connected to a stopped server");

    server.restart().expect("restarts");
    let kept: i64 = rt.block_on(async {
        let mut connection = PgConnection::connect(&url).await.expect("reconnects");
        sqlx::query("SELECT count(*) FROM kept")
            .fetch_one(&mut connection)
            .await
            .unwrap()
            .get(0)
    });
    assert_eq!(kept, 1);

    drop(server);
    assert!(!accepts(port), "port {port} still accepts after drop");
    assert!(!dir.exists(), "{} is left behind", dir.display());
}

#[test]
fn a_private_postgres_is_removed_when_its_test_panics() {
    let mut seen: Option<(u16, PathBuf)> = None;
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let server = match PostgresServer::start() {
            Ok(server) => server,
            Err(error) => return Err(error),
        };
        seen = Some((server.port(), server.directory().to_path_buf()));
        panic!("the test failed while its server ran");
    }));
    match outcome {
        Ok(Err(error)) => skip_or_fail("private postgres", &error.to_string()),
        Ok(Ok(())) => unreachable!("the closure panics once the server runs"),
        Err(_) => {
            let (port, dir) = seen.expect("the server started before the panic");
            assert!(!accepts(port), "port {port} still accepts after the panic");
            assert!(!dir.exists(), "{} is left behind", dir.display());
        }
    }
}

#[test]
fn a_private_mariadb_stops_and_restarts_with_its_data() {
    let mut server = match MariaDbServer::start() {
        Ok(server) => server,
        Err(error) => return skip_or_fail("private mariadb", &error.to_string()),
    };
    let (url, port, dir) = (
        server.url(),
        server.port(),
        server.directory().to_path_buf(),
    );
    let rt = runtime();
    rt.block_on(async {
        let mut connection = MySqlConnection::connect(&url).await.expect("connects");
        sqlx::query("CREATE TABLE kept (id int)")
            .execute(&mut connection)
            .await
            .unwrap();
        sqlx::query("INSERT INTO kept VALUES (1)")
            .execute(&mut connection)
            .await
            .unwrap();
        connection.close().await.unwrap();
    });

    server.stop().expect("stops");
    assert!(!server.is_running());
    assert!(!accepts(port), "port {port} still accepts after stop");

    server.restart().expect("restarts");
    let kept: i64 = rt.block_on(async {
        let mut connection = MySqlConnection::connect(&url).await.expect("reconnects");
        sqlx::query("SELECT count(*) FROM kept")
            .fetch_one(&mut connection)
            .await
            .unwrap()
            .get(0)
    });
    assert_eq!(kept, 1);

    drop(server);
    assert!(!accepts(port), "port {port} still accepts after drop");
    assert!(!dir.exists(), "{} is left behind", dir.display());
}

/// A private MariaDB leaves the system's temporary directory alone. A MariaDB server starting
/// (the install's bootstrap is one) removes every `#sql*` file of its temporary directory: with
/// the system's, it removed the open temporary tables of the machine's own server, which runs
/// as the same user, and that server's query then failed ("Error on delete of
/// '/tmp/#sql-temptable-...'", seen once in a full test run). The probe is such a file, owned
/// by the user the private server runs as.
#[test]
fn a_private_mariadb_leaves_the_system_temporary_files_alone() {
    let probe = std::env::temp_dir().join(format!("#sql-lease-probe-{}.MAI", std::process::id()));
    std::fs::write(&probe, b"").expect("the probe file is written");
    if let Some(uid) = mysql_uid() {
        std::os::unix::fs::chown(&probe, Some(uid), None).expect("the probe is given to mysql");
    }
    let started = MariaDbServer::start();
    let kept = probe.exists();
    let _ = std::fs::remove_file(&probe);
    let server = match started {
        Ok(server) => server,
        Err(error) => return skip_or_fail("private mariadb", &error.to_string()),
    };
    drop(server);
    assert!(
        kept,
        "starting a private MariaDB removed {} from the system's temporary directory",
        probe.display()
    );
}

/// The id of the `mysql` user, which a private MariaDB runs as when the tests run as root;
/// `None` otherwise (it then runs as the test's own user, who owns the probe already).
fn mysql_uid() -> Option<u32> {
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .ok()
        .is_some_and(|out| out.stdout.starts_with(b"0\n"));
    if !root {
        return None;
    }
    let out = std::process::Command::new("id")
        .args(["-u", "mysql"])
        .output()
        .ok()?;
    String::from_utf8(out.stdout).ok()?.trim().parse().ok()
}
