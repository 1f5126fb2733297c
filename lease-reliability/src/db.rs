//! The databases the scenarios run on, and their private servers.
//!
//! Scenarios that hurt a server (stop it, kill its connections, cut it off, add roles) run on a
//! private one from [`lease_tests::server`], never on the shared servers the conformance suite
//! uses. SQLite has no server: its "URL" is a file of its own per scenario.

use std::fmt;
use std::io;
use std::path::PathBuf;

use lease_tests::env;
use lease_tests::server::{
    GaleraCluster, MariaDbServer, PostgresReplication, PostgresServer, Replication,
};

/// A database the stores run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Db {
    /// PostgreSQL.
    Postgres,
    /// MariaDB.
    MariaDb,
    /// SQLite, a file.
    Sqlite,
}

impl Db {
    /// Every database.
    pub const ALL: [Db; 3] = [Db::Postgres, Db::MariaDb, Db::Sqlite];

    /// Its name in messages and on the worker's command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Postgres => "postgres",
            Self::MariaDb => "mariadb",
            Self::Sqlite => "sqlite",
        }
    }

    /// The database named `name`, as [`as_str`](Db::as_str) writes it.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|db| db.as_str() == name)
    }

    /// The shared test server's URL (from `lease_tests::env`), or a fresh SQLite file's.
    pub fn shared_url(self) -> String {
        match self {
            Self::Postgres => env::postgres_url(),
            Self::MariaDb => env::mysql_url(),
            Self::Sqlite => sqlite_url(),
        }
    }
}

impl fmt::Display for Db {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A URL for a new SQLite file in the temporary directory, created on first connection.
pub fn sqlite_url() -> String {
    format!("sqlite://{}?mode=rwc", sqlite_file().display())
}

fn sqlite_file() -> PathBuf {
    std::env::temp_dir().join(format!("{}.db", env::unique_table("lease_reliability")))
}

/// Removes a SQLite database file with its journal files; other URLs are left alone.
pub fn remove_sqlite(url: &str) {
    let Some(path) = url.strip_prefix("sqlite://") else {
        return;
    };
    let path = path.split('?').next().unwrap_or(path);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{path}{suffix}"));
    }
}

/// A private server of a database that has one; stopped and removed when dropped.
#[derive(Debug)]
pub enum PrivateServer {
    /// A private PostgreSQL.
    Postgres(PostgresServer),
    /// A private MariaDB.
    MariaDb(MariaDbServer),
}

impl PrivateServer {
    /// Starts one for `db` (blocking, about a second). `None` for SQLite, which has no server.
    ///
    /// # Errors
    /// When the server binaries are missing or the server does not start.
    pub fn start(db: Db) -> io::Result<Option<Self>> {
        Ok(match db {
            Db::Postgres => Some(Self::Postgres(PostgresServer::start()?)),
            Db::MariaDb => Some(Self::MariaDb(MariaDbServer::start()?)),
            Db::Sqlite => None,
        })
    }

    /// Starts one for `db`, or reports the skip (a failure under `LEASE_TEST_REQUIRE_ALL=1`)
    /// and returns `None`.
    ///
    /// # Panics
    /// When `db` is SQLite, which has no server, or as
    /// [`skip_or_fail`](lease_tests::env::skip_or_fail).
    pub fn start_or_skip(db: Db) -> Option<Self> {
        match Self::start(db) {
            Ok(Some(server)) => Some(server),
            Ok(None) => panic!("{db} has no server"),
            Err(error) => {
                env::skip_or_fail(&format!("private {db}"), &error.to_string());
                None
            }
        }
    }

    /// A URL with every privilege.
    pub fn url(&self) -> String {
        match self {
            Self::Postgres(server) => server.url(),
            Self::MariaDb(server) => server.url(),
        }
    }

    /// The port it listens on, on 127.0.0.1.
    pub fn port(&self) -> u16 {
        match self {
            Self::Postgres(server) => server.port(),
            Self::MariaDb(server) => server.port(),
        }
    }

    /// Stops it, ending every connection; the data stays.
    ///
    /// # Errors
    /// When it cannot be stopped.
    pub fn stop(&mut self) -> io::Result<()> {
        match self {
            Self::Postgres(server) => server.stop(),
            Self::MariaDb(server) => server.stop(),
        }
    }

    /// Starts it again on the same port with the same data.
    ///
    /// # Errors
    /// When it does not start.
    pub fn restart(&mut self) -> io::Result<()> {
        match self {
            Self::Postgres(server) => server.restart(),
            Self::MariaDb(server) => server.restart(),
        }
    }
}

/// Where a scenario's stores connect: a database and a URL, and the private server behind the
/// URL when there is one (dropped with the target). SQLite's file is removed on drop.
#[derive(Debug)]
pub struct Target {
    /// The database.
    pub db: Db,
    /// The URL with every privilege.
    pub url: String,
    /// The private server, when the target has one.
    pub server: Option<PrivateServer>,
}

impl Target {
    /// A private server for PostgreSQL and MariaDB, a fresh file for SQLite; `None` when the
    /// server cannot start (reported as [`PrivateServer::start_or_skip`] does).
    pub fn private(db: Db) -> Option<Self> {
        match db {
            Db::Sqlite => Some(Self {
                db,
                url: sqlite_url(),
                server: None,
            }),
            _ => {
                let server = PrivateServer::start_or_skip(db)?;
                Some(Self {
                    db,
                    url: server.url(),
                    server: Some(server),
                })
            }
        }
    }

    /// The private server.
    ///
    /// # Panics
    /// For SQLite, which has none.
    pub fn server(&mut self) -> &mut PrivateServer {
        self.server.as_mut().expect("a target with a server")
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        remove_sqlite(&self.url);
    }
}

/// A private PostgreSQL primary with a streaming standby, or the skip reported (a failure
/// under `LEASE_TEST_REQUIRE_ALL=1`) and `None`. Blocks while the servers start.
///
/// # Panics
/// As [`skip_or_fail`](lease_tests::env::skip_or_fail).
pub fn replication_or_skip(replication: Replication) -> Option<PostgresReplication> {
    PostgresReplication::start(replication)
        .map_err(|error| env::skip_or_fail("private postgres replication", &error.to_string()))
        .ok()
}

/// A private Galera cluster of `nodes` MariaDB nodes, or the skip reported (a failure under
/// `LEASE_TEST_REQUIRE_ALL=1`) and `None`. Blocks while the nodes start.
///
/// # Panics
/// As [`skip_or_fail`](lease_tests::env::skip_or_fail).
pub fn galera_or_skip(nodes: usize) -> Option<GaleraCluster> {
    GaleraCluster::start(nodes)
        .map_err(|error| env::skip_or_fail("private galera", &error.to_string()))
        .ok()
}
