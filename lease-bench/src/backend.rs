//! [`Backend`]: a store kind the benchmark measures, and [`Target`]: one lease table on it,
//! reached both through the library and through the same pool without it.

use std::sync::Arc;
use std::time::Duration;

use diesel_async::pooled_connection::deadpool;
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod,
};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, AsyncPgConnection};
use futures::FutureExt;
use lease_core::{BoxError, LeaseStore, MemoryStore};
use lease_diesel::{AsyncSqliteConnection, DieselStore};
use lease_sql::Dialect;
use lease_sqlx::{MySqlLeaseStore, PgLeaseStore, SqliteLeaseStore};
use sqlx::mysql::MySqlPoolOptions;
use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};

use crate::protected::{Protected, ProtectedTable};
use crate::raw::{DieselRaw, Raw, SqlxRaw, StoreRaw};
use crate::servers::Servers;

/// A store kind: a driver on a database, or memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `MemoryStore`: the library's own overhead, with no database at all.
    Memory,
    /// lease-sqlx on PostgreSQL.
    SqlxPostgres,
    /// lease-sqlx on MariaDB.
    SqlxMariaDb,
    /// lease-sqlx on SQLite.
    SqlxSqlite,
    /// lease-diesel (deadpool) on PostgreSQL.
    DieselPostgres,
    /// lease-diesel (deadpool) on MariaDB.
    DieselMariaDb,
    /// lease-diesel (deadpool) on SQLite.
    DieselSqlite,
}

impl Backend {
    /// Every backend, in report order.
    pub const ALL: [Self; 7] = [
        Self::Memory,
        Self::SqlxPostgres,
        Self::SqlxMariaDb,
        Self::SqlxSqlite,
        Self::DieselPostgres,
        Self::DieselMariaDb,
        Self::DieselSqlite,
    ];

    /// Its name on the command line and in tables.
    pub fn key(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::SqlxPostgres => "sqlx-postgres",
            Self::SqlxMariaDb => "sqlx-mariadb",
            Self::SqlxSqlite => "sqlx-sqlite",
            Self::DieselPostgres => "diesel-postgres",
            Self::DieselMariaDb => "diesel-mariadb",
            Self::DieselSqlite => "diesel-sqlite",
        }
    }

    /// The backend named `text`.
    ///
    /// # Errors
    /// A message listing the names there are.
    pub fn parse(text: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|backend| backend.key() == text)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|b| b.key()).collect();
                format!("unknown backend {text:?}; there are {}", names.join(", "))
            })
    }

    /// The SQL it runs, or `None` for memory.
    pub fn dialect(self) -> Option<Dialect> {
        match self {
            Self::Memory => None,
            Self::SqlxPostgres | Self::DieselPostgres => Some(Dialect::Postgres),
            Self::SqlxMariaDb | Self::DieselMariaDb => Some(Dialect::MySql),
            Self::SqlxSqlite | Self::DieselSqlite => Some(Dialect::Sqlite),
        }
    }

    /// Whether its pool can check connections at checkout (every one but memory).
    pub fn has_pool(self) -> bool {
        self != Self::Memory
    }
}

/// How the pool of a [`Target`] is made.
#[derive(Debug, Clone, Copy)]
pub struct PoolSettings {
    /// Its most connections.
    pub size: u32,
    /// Whether it checks every connection at checkout: sqlx's `test_before_acquire` (on by
    /// default), deadpool's `RecyclingMethod::Verified` (diesel-async's default).
    pub ping: bool,
    /// PostgreSQL (through sqlx or diesel): releases notify waiters (`LISTEN/NOTIFY`).
    pub notifications: bool,
}

impl PoolSettings {
    /// A pool of `size` with the drivers' defaults.
    pub fn default_of(size: u32) -> Self {
        Self {
            size,
            ping: true,
            notifications: false,
        }
    }
}

/// One fresh lease table on a backend: the store the library uses, and the same pool without
/// the library ([`Raw`]).
pub struct Target {
    /// The library's store.
    pub store: Arc<dyn LeaseStore>,
    /// The same table and pool, without the library.
    pub raw: Arc<dyn Raw>,
    /// A table the lease protects, on the same pool, when there is a database (not memory).
    pub protected: Option<Arc<dyn Protected>>,
}

impl Target {
    /// Drops the table and closes the pool.
    pub async fn finish(self) {
        if let Some(protected) = &self.protected
            && let Err(error) = protected.drop_table().await
        {
            eprintln!("lease-bench: could not drop a protected table: {error}");
        }
        if let Err(error) = self.raw.drop_table().await {
            eprintln!("lease-bench: could not drop a table: {error}");
        }
        self.raw.close().await;
    }
}

/// How long a pool waits for a connection before it gives up.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(30);

/// A [`Target`] on a deadpool pool of `size` made by `manager` (a macro: diesel-async's pools
/// are only pools for concrete connection types).
macro_rules! diesel_target {
    ($manager:expr, $settings:expr, $table:expr, $file:expr) => {{
        let pool = deadpool::Pool::builder($manager)
            .max_size($settings.size as usize)
            .build()?;
        let store = DieselStore::with_table(pool.clone(), $table)?
            .with_notifications($settings.notifications);
        store.setup().await?;
        let protected = ProtectedTable::new(store.clone(), store.statements().dialect(), $table);
        let mut raw = DieselRaw::new(pool, store.statements().clone(), $table);
        if let Some(file) = $file {
            raw = raw.with_file(file);
        }
        Target {
            store: Arc::new(store),
            raw: Arc::new(raw),
            protected: Some(Arc::new(protected)),
        }
    }};
}

/// Makes a fresh table on `backend` and a pool made with `settings`.
///
/// # Errors
/// When the server cannot be reached or the table cannot be made.
pub async fn open(
    backend: Backend,
    servers: &Servers,
    settings: PoolSettings,
) -> Result<Target, BoxError> {
    let table = lease_tests::env::unique_table("lease_bench");
    let size = settings.size;
    let target = match backend {
        Backend::Memory => {
            let store = Arc::new(MemoryStore::new());
            Target {
                store: store.clone(),
                raw: Arc::new(StoreRaw::new(store)),
                protected: None,
            }
        }
        Backend::SqlxPostgres => {
            let pool = PgPoolOptions::new()
                .max_connections(size)
                .test_before_acquire(settings.ping)
                .acquire_timeout(ACQUIRE_TIMEOUT)
                .connect(&servers.postgres_url()?)
                .await?;
            let store = PgLeaseStore::with_table(pool.clone(), &table)?
                .with_notifications(settings.notifications);
            store.setup().await?;
            let raw = SqlxRaw::new(pool, store.statements().clone(), &table);
            Target {
                protected: Some(Arc::new(ProtectedTable::new(
                    store.clone(),
                    store.statements().dialect(),
                    &table,
                ))),
                store: Arc::new(store),
                raw: Arc::new(raw),
            }
        }
        Backend::SqlxMariaDb => {
            let pool = MySqlPoolOptions::new()
                .max_connections(size)
                .test_before_acquire(settings.ping)
                .acquire_timeout(ACQUIRE_TIMEOUT)
                .connect(&servers.mysql_url()?)
                .await?;
            let store = MySqlLeaseStore::with_table(pool.clone(), &table)?;
            store.setup().await?;
            let raw = SqlxRaw::new(pool, store.statements().clone(), &table);
            Target {
                protected: Some(Arc::new(ProtectedTable::new(
                    store.clone(),
                    store.statements().dialect(),
                    &table,
                ))),
                store: Arc::new(store),
                raw: Arc::new(raw),
            }
        }
        Backend::SqlxSqlite => {
            let options = SqliteConnectOptions::new()
                .filename(servers.sqlite_file(&table))
                .create_if_missing(true);
            let pool = SqlitePoolOptions::new()
                .max_connections(size)
                .test_before_acquire(settings.ping)
                .acquire_timeout(ACQUIRE_TIMEOUT)
                .connect_with(lease_sqlx::sqlite_connect_options(options))
                .await?;
            let store = SqliteLeaseStore::with_table(pool, &table)?;
            store.setup().await?;
            let raw = SqlxRaw::new(store.pool().clone(), store.statements().clone(), &table)
                .with_file(servers.sqlite_file(&table));
            Target {
                protected: Some(Arc::new(ProtectedTable::new(
                    store.clone(),
                    store.statements().dialect(),
                    &table,
                ))),
                store: Arc::new(store),
                raw: Arc::new(raw),
            }
        }
        Backend::DieselPostgres => {
            let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new_with_config(
                servers.postgres_url()?,
                manager_config(settings.ping),
            );
            diesel_target!(manager, settings, &table, None::<std::path::PathBuf>)
        }
        Backend::DieselMariaDb => {
            let mut url = servers.mysql_url()?;
            if servers.delays() {
                // mysql_async moves a connection to 127.0.0.1 onto the server's Unix socket
                // (`prefer_socket`), past the delaying proxy.
                url.push_str(if url.contains('?') { "&" } else { "?" });
                url.push_str("prefer_socket=false");
            }
            let manager = AsyncDieselConnectionManager::<AsyncMysqlConnection>::new_with_config(
                url,
                manager_config(settings.ping),
            );
            diesel_target!(manager, settings, &table, None::<std::path::PathBuf>)
        }
        Backend::DieselSqlite => {
            let file = servers.sqlite_file(&table);
            let mut config = manager_config(settings.ping);
            // lease_diesel::sqlite_manager's setup, with the recycling method chosen here.
            config.custom_setup = Box::new(|url| {
                let url = url.to_owned();
                async move {
                    let mut connection = AsyncSqliteConnection::establish(&url).await?;
                    let pragmas = format!(
                        "PRAGMA busy_timeout = {}; PRAGMA journal_mode = WAL;",
                        lease_diesel::SQLITE_BUSY_TIMEOUT.as_millis()
                    );
                    diesel_async::SimpleAsyncConnection::batch_execute(&mut connection, &pragmas)
                        .await
                        .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
                    Ok(connection)
                }
                .boxed()
            });
            let manager = AsyncDieselConnectionManager::<AsyncSqliteConnection>::new_with_config(
                file.to_string_lossy(),
                config,
            );
            diesel_target!(manager, settings, &table, Some(file))
        }
    };
    Ok(target)
}

fn manager_config<C: AsyncConnection + 'static>(ping: bool) -> ManagerConfig<C> {
    let mut config = ManagerConfig::default();
    config.recycling_method = if ping {
        RecyclingMethod::Verified
    } else {
        RecyclingMethod::Fast
    };
    config
}
