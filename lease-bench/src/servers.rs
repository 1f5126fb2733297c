//! [`Servers`]: where the databases are, private throwaway servers by default.

use std::path::PathBuf;

use lease_core::BoxError;
use lease_tests::proxy::FaultProxy;
use lease_tests::server::{MariaDbServer, PostgresServer};
use sqlx::mysql::MySqlPoolOptions;

use crate::args::Options;
use crate::backend::Backend;
use lease_sql::Dialect;

/// The database servers of one run, and a directory for SQLite's files.
///
/// Private servers are the default: nobody else's tests load them, so figures are steadier,
/// and only on a private PostgreSQL does every WAL byte written come from the benchmark.
pub struct Servers {
    postgres: Result<String, String>,
    mysql: Result<String, String>,
    /// Whether the PostgreSQL server is private to this run.
    pub postgres_private: bool,
    sqlite_dir: PathBuf,
    /// The delay every chunk to and from the servers takes, through `_proxies`.
    delay: Option<std::time::Duration>,
    // Stopped and removed when dropped.
    _postgres: Option<PostgresServer>,
    _mariadb: Option<MariaDbServer>,
    _proxies: Vec<FaultProxy>,
}

impl Servers {
    /// Starts the private servers the chosen backends need, unless a URL names a server. Blocks
    /// while they start: call it before the runtime.
    ///
    /// # Errors
    /// When the SQLite directory cannot be made. A server that cannot start is reported by the
    /// backends that need it.
    pub fn start(options: &Options) -> Result<Self, BoxError> {
        let needs = |dialect| {
            options
                .backends
                .iter()
                .any(|backend| backend.dialect() == Some(dialect))
        };
        let mut private_postgres = None;
        let postgres = match (&options.postgres_url, needs(Dialect::Postgres)) {
            (Some(url), _) => Ok(url.clone()),
            (None, false) => Err("not needed".to_owned()),
            (None, true) => match PostgresServer::start() {
                Ok(server) => {
                    let url = server.url();
                    private_postgres = Some(server);
                    Ok(url)
                }
                Err(error) => Err(format!("no private PostgreSQL server: {error}")),
            },
        };
        let mut private_mariadb = None;
        let mysql = match (&options.mysql_url, needs(Dialect::MySql)) {
            (Some(url), _) => Ok(url.clone()),
            (None, false) => Err("not needed".to_owned()),
            (None, true) => match MariaDbServer::start() {
                Ok(server) => {
                    let url = server.url();
                    private_mariadb = Some(server);
                    Ok(url)
                }
                Err(error) => Err(format!("no private MariaDB server: {error}")),
            },
        };
        let sqlite_dir = std::env::temp_dir().join(format!("lease-bench-{}", std::process::id()));
        std::fs::create_dir_all(&sqlite_dir)?;
        let mut proxies = Vec::new();
        let (postgres, mysql) = match options.delay {
            None => (postgres, mysql),
            Some(delay) => (
                delayed(postgres, delay, &mut proxies)?,
                delayed(mysql, delay, &mut proxies)?,
            ),
        };
        Ok(Self {
            postgres,
            mysql,
            postgres_private: private_postgres.is_some(),
            sqlite_dir,
            delay: options.delay,
            _postgres: private_postgres,
            _mariadb: private_mariadb,
            _proxies: proxies,
        })
    }

    /// Puts the private MariaDB's durability back to the default a production server runs
    /// with: the throwaway-server helper starts it with `innodb_flush_log_at_trx_commit=0` to
    /// make tests quick, and then a commit never waits for its log to reach the disk, so
    /// statements that write would look as cheap as ones that do not. The setting changes
    /// without a restart. (The private PostgreSQL's `fsync=off` is given on its command line,
    /// which no setting made later overrides: for durable PostgreSQL figures, give a server with
    /// `--postgres-url`.)
    ///
    /// # Errors
    /// When the server refuses.
    pub async fn make_durable(&self) -> Result<(), BoxError> {
        if self._mariadb.is_some() {
            let pool = MySqlPoolOptions::new()
                .max_connections(1)
                .connect(&self.mysql_url()?)
                .await?;
            sqlx::raw_sql("SET GLOBAL innodb_flush_log_at_trx_commit = 1")
                .execute(&pool)
                .await?;
            pool.close().await;
        }
        Ok(())
    }

    /// The PostgreSQL URL.
    ///
    /// # Errors
    /// Why there is no server.
    pub fn postgres_url(&self) -> Result<String, BoxError> {
        self.postgres.clone().map_err(Into::into)
    }

    /// The MariaDB URL.
    ///
    /// # Errors
    /// Why there is no server.
    pub fn mysql_url(&self) -> Result<String, BoxError> {
        self.mysql.clone().map_err(Into::into)
    }

    /// Whether the servers are reached through a delaying proxy.
    pub fn delays(&self) -> bool {
        self.delay.is_some()
    }

    /// The SQLite file for `table`.
    pub fn sqlite_file(&self, table: &str) -> PathBuf {
        self.sqlite_dir.join(format!("{table}.sqlite3"))
    }

    /// What a backend runs on, for the report.
    pub fn describe(&self, backend: Backend) -> String {
        let server = self.server(backend);
        match (self.delay, backend.dialect()) {
            (Some(delay), Some(Dialect::Postgres | Dialect::MySql)) => format!(
                "{server}; reached through a proxy that delays every chunk by {} µs each way",
                delay.as_micros()
            ),
            _ => server.to_owned(),
        }
    }

    /// The server a backend runs on: `private`, `given` or `memory`.
    fn server(&self, backend: Backend) -> &'static str {
        match backend.dialect() {
            None => "in process",
            Some(Dialect::Sqlite) => "file in the temporary directory",
            Some(Dialect::Postgres) if self.postgres_private => {
                "private server, started with fsync, synchronous_commit and full_page_writes off (commits do not wait for the disk)"
            }
            Some(Dialect::MySql) if self._mariadb.is_some() => {
                "private server, durability defaults (innodb_flush_log_at_trx_commit = 1)"
            }
            Some(_) => "given server",
        }
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.sqlite_dir);
    }
}

/// `url` reached through a new proxy (kept in `proxies`) that delays every chunk by `delay`.
///
/// The proxy forwards to 127.0.0.1 and the URL it gives names 127.0.0.1: `url`'s host must be
/// loopback, which [`args::parse`](crate::args::parse) checks of a given URL (a private
/// server's is 127.0.0.1).
fn delayed(
    url: Result<String, String>,
    delay: std::time::Duration,
    proxies: &mut Vec<FaultProxy>,
) -> Result<Result<String, String>, BoxError> {
    let Ok(url) = url else {
        return Ok(url);
    };
    let proxy = FaultProxy::in_front_of(&url)?;
    proxy.delay(delay);
    let proxied = proxy.rewrite_url(&url);
    proxies.push(proxy);
    Ok(Ok(proxied))
}
