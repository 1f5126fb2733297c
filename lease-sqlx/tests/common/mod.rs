//! The sqlx stores as a `lease_tests::TestBackend`: one fresh table per store, dropped when the
//! case ends, on the servers `lease_tests::env` names (SQLite: a file in the temp directory).

#![allow(dead_code)]

pub mod fenced;
pub mod focused;

use std::time::Duration;

use lease_core::BoxError;
use lease_sqlx::sqlx::{self, AssertSqlSafe, Pool};
use lease_sqlx::{SqlxDatabase, SqlxStore};
use lease_tests::{
    Capability, FencedStore, FencedWrites, FreshStore, PooledStore, TestBackend, env,
};

use fenced::{Check, FencedSql};

/// How a database is reached in the tests.
pub trait TestDb: SqlxDatabase + Sized {
    /// A short name for messages.
    const LABEL: &'static str;

    /// A pool of at most `connections` on the test server, and where it lives (a file to
    /// remove for SQLite).
    fn connect(
        connections: u32,
    ) -> impl Future<Output = Result<(Pool<Self>, Option<std::path::PathBuf>), BoxError>> + Send;

    /// A pool like [`connect`](TestDb::connect)'s whose transactions are `SERIALIZABLE` by
    /// default ([`env::serializable`]); PostgreSQL only, the others answer an error.
    fn connect_serializable(
        connections: u32,
    ) -> impl Future<Output = Result<(Pool<Self>, Option<std::path::PathBuf>), BoxError>> + Send
    {
        let _ = connections;
        async {
            Err(format!(
                "{}: no serializable connections in these tests",
                Self::LABEL
            )
            .into())
        }
    }

    /// A pool that cannot reach its database, failing fast.
    fn unreachable() -> Result<Pool<Self>, BoxError>;

    /// Creates the store's table.
    fn setup(store: &SqlxStore<Self>)
    -> impl Future<Output = Result<(), lease_core::Error>> + Send;

    /// Runs `sql` through the simple protocol.
    fn execute(pool: &Pool<Self>, sql: String)
    -> impl Future<Output = Result<(), BoxError>> + Send;

    /// `writes` as the suite takes them (each database's impl checks the driver's bounds).
    fn fenced_writes(writes: FencedSql<Self>) -> std::sync::Arc<dyn FencedWrites>;

    /// The column definition of the probe table's one column.
    const PROBE_COLUMN: &'static str = "at BIGINT";
}

/// A backend over database `DB`, optionally changing each store (PostgreSQL's protocol).
pub struct Backend<DB: SqlxDatabase> {
    name: &'static str,
    adjust: fn(SqlxStore<DB>) -> SqlxStore<DB>,
    pushes_releases: bool,
    check: Check,
    serializable: bool,
}

impl<DB: TestDb> Backend<DB>
where
    lease_sqlx::SqlxExecutor<DB>: lease_sqlx::Execute,
{
    /// The stores as [`SqlxStore::new`] and [`SqlxStore::with_table`] make them.
    pub fn plain() -> Self {
        Self {
            name: DB::LABEL,
            adjust: |store| store,
            pushes_releases: false,
            check: Check::Fenced,
            serializable: false,
        }
    }

    /// The stores changed by `adjust`, reported as `name`.
    pub fn adjusted(name: &'static str, adjust: fn(SqlxStore<DB>) -> SqlxStore<DB>) -> Self {
        Self {
            name,
            adjust,
            pushes_releases: false,
            check: Check::Fenced,
            serializable: false,
        }
    }

    /// The same stores, which `adjust` made push their releases (PostgreSQL's notifications).
    pub fn pushing_releases(mut self) -> Self {
        self.pushes_releases = true;
        self
    }

    /// The same stores, whose fenced writes begin with `check` instead of the store's own (the
    /// broken checks the fenced cases must catch).
    pub fn checking(mut self, name: &'static str, check: Check) -> Self {
        self.name = name;
        self.check = check;
        self
    }

    /// The same stores on connections whose transactions are `SERIALIZABLE` by default
    /// (PostgreSQL), reported as `name`: their fenced writes through `lease_sqlx::fenced` check
    /// with the `BEGIN`, as the store does by itself under a snapshot.
    pub fn serializable(mut self, name: &'static str) -> Self {
        self.name = name;
        self.serializable = true;
        self
    }

    /// A pool of at most `connections` as this backend makes them.
    async fn connect(
        &self,
        connections: u32,
    ) -> Result<(Pool<DB>, Option<std::path::PathBuf>), BoxError> {
        if self.serializable {
            DB::connect_serializable(connections).await
        } else {
            DB::connect(connections).await
        }
    }

    /// A fresh store over a pool of at most `connections`, and its teardown.
    pub async fn fresh(
        &self,
        connections: u32,
    ) -> Result<(FreshStore<SqlxStore<DB>>, Pool<DB>, String), BoxError> {
        let (pool, file) = self.connect(connections).await?;
        let table = env::unique_table("lease_sqlx");
        let store = (self.adjust)(SqlxStore::with_table(pool.clone(), &table)?);
        DB::setup(&store).await?;
        let drop_pool = pool.clone();
        let drop_table = table.clone();
        let fresh = FreshStore::new(store).with_teardown(move || async move {
            // Every step runs, whatever failed before it; the first error is reported.
            let mut dropped = Ok(());
            for t in [
                drop_table.clone(),
                format!("{drop_table}_probe"),
                format!("{drop_table}_notices"),
            ] {
                let drop = DB::execute(&drop_pool, format!("DROP TABLE IF EXISTS {t}")).await;
                dropped = dropped.and(drop);
            }
            drop_pool.close().await;
            dropped.and(remove_files(file.as_deref()))
        });
        Ok((fresh, pool, table))
    }
}

#[lease_core::async_trait]
impl<DB: TestDb> TestBackend for Backend<DB>
where
    lease_sqlx::SqlxExecutor<DB>: lease_sqlx::Execute,
{
    type Store = SqlxStore<DB>;

    fn name(&self) -> &str {
        self.name
    }

    fn offers(&self, capability: Capability) -> bool {
        capability.offered_by_sql(self.pushes_releases, DB::DIALECT)
    }

    async fn available(&self) -> Result<(), BoxError> {
        let (pool, file) = self.connect(1).await?;
        pool.close().await;
        remove_files(file.as_deref())
    }

    async fn store(&self) -> Result<FreshStore<Self::Store>, BoxError> {
        Ok(self.fresh(16).await?.0)
    }

    async fn pooled(&self, connections: u32) -> Result<Option<PooledStore<Self::Store>>, BoxError> {
        let (fresh, pool, table) = self.fresh(connections).await?;
        let probe_table = format!("{table}_probe");
        DB::execute(
            &pool,
            format!("CREATE TABLE {probe_table} ({})", DB::PROBE_COLUMN),
        )
        .await?;
        let insert = format!("INSERT INTO {probe_table} (at) VALUES (1)");
        let probe_pool = pool;
        let stats_store = fresh.store().clone();
        Ok(Some(PooledStore::new(
            fresh,
            move || {
                let pool = probe_pool.clone();
                let insert = insert.clone();
                async move { DB::execute(&pool, insert).await }
            },
            move || stats_store.pool_state(),
        )))
    }

    async fn unreachable(&self) -> Result<Option<Self::Store>, BoxError> {
        Ok(Some((self.adjust)(SqlxStore::new(DB::unreachable()?))))
    }

    async fn fenced(&self) -> Result<Option<FencedStore<Self::Store>>, BoxError> {
        let (fresh, pool, table) = self.fresh(8).await?;
        let notices = format!("{table}_notices");
        DB::execute(
            &pool,
            format!("CREATE TABLE {notices} (value BIGINT NOT NULL)"),
        )
        .await?;
        let writes = DB::fenced_writes(FencedSql {
            store: fresh.store().clone(),
            notices,
            check: self.check,
            snapshot: self.serializable,
        });
        Ok(Some(FencedStore::new(fresh, writes)))
    }
}

/// Removes a SQLite database and the files beside it, once its pool is closed, and checks that
/// none is left: every test makes one, so a leak would fill the temporary directory.
pub fn remove_files(file: Option<&std::path::Path>) -> Result<(), BoxError> {
    let Some(file) = file else { return Ok(()) };
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut path = file.as_os_str().to_owned();
        path.push(suffix);
        let path = std::path::PathBuf::from(path);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(format!("removing {}: {error}", path.display()).into()),
        }
        if path.exists() {
            return Err(format!("{} is still there after its removal", path.display()).into());
        }
    }
    Ok(())
}

/// How long a test waits for a connection: short, so a missing server is reported quickly.
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

#[cfg(feature = "postgres")]
mod postgres {
    use super::*;
    use lease_sqlx::sqlx::Postgres;
    use lease_sqlx::sqlx::postgres::PgPoolOptions;

    impl TestDb for Postgres {
        const LABEL: &'static str = "postgres";

        async fn connect(
            connections: u32,
        ) -> Result<(Pool<Self>, Option<std::path::PathBuf>), BoxError> {
            let pool = PgPoolOptions::new()
                .max_connections(connections)
                .acquire_timeout(ACQUIRE_TIMEOUT)
                .connect(&env::postgres_url())
                .await?;
            Ok((pool, None))
        }

        async fn connect_serializable(
            connections: u32,
        ) -> Result<(Pool<Self>, Option<std::path::PathBuf>), BoxError> {
            let pool = PgPoolOptions::new()
                .max_connections(connections)
                .acquire_timeout(ACQUIRE_TIMEOUT)
                .connect(&env::serializable(&env::postgres_url()))
                .await?;
            Ok((pool, None))
        }

        fn unreachable() -> Result<Pool<Self>, BoxError> {
            Ok(PgPoolOptions::new()
                .acquire_timeout(Duration::from_secs(2))
                .connect_lazy("postgres://postgres@127.0.0.1:1/test")?)
        }

        async fn execute(pool: &Pool<Self>, sql: String) -> Result<(), BoxError> {
            sqlx::raw_sql(AssertSqlSafe(sql)).execute(pool).await?;
            Ok(())
        }

        async fn setup(store: &SqlxStore<Self>) -> Result<(), lease_core::Error> {
            store.setup().await
        }

        fn fenced_writes(writes: FencedSql<Self>) -> std::sync::Arc<dyn FencedWrites> {
            std::sync::Arc::new(writes)
        }
    }
}

#[cfg(feature = "mysql")]
mod mysql {
    use super::*;
    use lease_sqlx::sqlx::MySql;
    use lease_sqlx::sqlx::mysql::MySqlPoolOptions;

    impl TestDb for MySql {
        const LABEL: &'static str = "mariadb";

        async fn connect(
            connections: u32,
        ) -> Result<(Pool<Self>, Option<std::path::PathBuf>), BoxError> {
            let pool = MySqlPoolOptions::new()
                .max_connections(connections)
                .acquire_timeout(ACQUIRE_TIMEOUT)
                .connect(&env::mysql_url())
                .await?;
            Ok((pool, None))
        }

        fn unreachable() -> Result<Pool<Self>, BoxError> {
            Ok(MySqlPoolOptions::new()
                .acquire_timeout(Duration::from_secs(2))
                .connect_lazy("mysql://root@127.0.0.1:1/test")?)
        }

        async fn execute(pool: &Pool<Self>, sql: String) -> Result<(), BoxError> {
            sqlx::raw_sql(AssertSqlSafe(sql)).execute(pool).await?;
            Ok(())
        }

        async fn setup(store: &SqlxStore<Self>) -> Result<(), lease_core::Error> {
            store.setup().await
        }

        fn fenced_writes(writes: FencedSql<Self>) -> std::sync::Arc<dyn FencedWrites> {
            std::sync::Arc::new(writes)
        }
    }
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use super::*;
    use lease_sqlx::sqlx::Sqlite;
    use lease_sqlx::sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};

    impl TestDb for Sqlite {
        const LABEL: &'static str = "sqlite";
        const PROBE_COLUMN: &'static str = "at INTEGER";

        async fn connect(
            connections: u32,
        ) -> Result<(Pool<Self>, Option<std::path::PathBuf>), BoxError> {
            let file = std::env::temp_dir().join(format!("{}.db", env::unique_table("lease_sqlx")));
            let options = SqliteConnectOptions::new()
                .filename(&file)
                .create_if_missing(true);
            let pool = SqlitePoolOptions::new()
                .max_connections(connections)
                .acquire_timeout(ACQUIRE_TIMEOUT)
                .connect_with(lease_sqlx::sqlite_connect_options(options))
                .await?;
            Ok((pool, Some(file)))
        }

        /// A database in a directory that does not exist: every connection fails to open.
        fn unreachable() -> Result<Pool<Self>, BoxError> {
            let options = SqliteConnectOptions::new()
                .filename(std::env::temp_dir().join("lease-sqlx-missing-dir/none/leases.db"));
            Ok(SqlitePoolOptions::new()
                .acquire_timeout(Duration::from_secs(2))
                .connect_lazy_with(options))
        }

        async fn execute(pool: &Pool<Self>, sql: String) -> Result<(), BoxError> {
            sqlx::raw_sql(AssertSqlSafe(sql)).execute(pool).await?;
            Ok(())
        }

        async fn setup(store: &SqlxStore<Self>) -> Result<(), lease_core::Error> {
            store.setup().await
        }

        fn fenced_writes(writes: FencedSql<Self>) -> std::sync::Arc<dyn FencedWrites> {
            std::sync::Arc::new(writes)
        }
    }
}
