//! The three databases on both pool kinds, as a `lease_tests::TestBackend`: a fresh table per
//! store, dropped when the case ends.

#![allow(dead_code)]

use std::future::Future;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use diesel_async::pooled_connection::AsyncDieselConnectionManager;
use diesel_async::pooled_connection::{bb8, deadpool};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, AsyncPgConnection};
use futures::future::BoxFuture;
use lease_core::{BoxError, LeaseHandle, LeaseName};
use lease_diesel::CheckAt;
use lease_diesel::{AsyncSqliteConnection, DieselPool, DieselStore, sqlite_manager};
use lease_tests::{
    Capability, FencedStore, FencedWrites, FreshStore, PooledStore, TestBackend, env,
};

/// How long a pool waits for a connection before it reports the database unreachable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// A database the tests run against.
pub trait Database: Send + Sync + 'static {
    /// Its connection.
    type Connection: AsyncConnection + lease_diesel::DieselConnection;

    /// Its name in test output.
    const NAME: &'static str;

    /// Where a store for `table` connects: the server, or for SQLite a file of its own.
    fn url(table: &str) -> String;

    /// Where nothing answers.
    fn unreachable_url() -> String;

    /// How the pools make connections to `url`.
    fn manager(url: String) -> AsyncDieselConnectionManager<Self::Connection>;

    /// Whether the server is there: an error says why not.
    fn available() -> impl Future<Output = Result<(), BoxError>> + Send {
        async {
            Self::Connection::establish(&Self::url("lease_availability"))
                .await
                .map(drop)
                .map_err(|e| format!("cannot connect to {}: {e}", Self::NAME).into())
        }
    }

    /// Removes what a store for `table` left outside the database (SQLite's files).
    fn remove_files(table: &str) {
        let _ = table;
    }
}

/// PostgreSQL at `LEASE_TEST_POSTGRES_URL`.
pub struct Postgres;

impl Database for Postgres {
    type Connection = AsyncPgConnection;
    const NAME: &'static str = "postgres";

    fn url(_: &str) -> String {
        env::postgres_url()
    }

    fn unreachable_url() -> String {
        "postgres://postgres@127.0.0.1:1/test".to_owned()
    }

    fn manager(url: String) -> AsyncDieselConnectionManager<AsyncPgConnection> {
        AsyncDieselConnectionManager::new(url)
    }
}

/// MariaDB at `LEASE_TEST_MYSQL_URL`.
pub struct MariaDb;

impl Database for MariaDb {
    type Connection = AsyncMysqlConnection;
    const NAME: &'static str = "mariadb";

    fn url(_: &str) -> String {
        env::mysql_url()
    }

    fn unreachable_url() -> String {
        "mysql://root@127.0.0.1:1/test".to_owned()
    }

    fn manager(url: String) -> AsyncDieselConnectionManager<AsyncMysqlConnection> {
        AsyncDieselConnectionManager::new(url)
    }
}

/// SQLite, a file of its own per store in the temporary directory.
pub struct Sqlite;

fn sqlite_path(table: &str) -> PathBuf {
    std::env::temp_dir().join(format!("{table}.sqlite3"))
}

impl Database for Sqlite {
    type Connection = AsyncSqliteConnection;
    const NAME: &'static str = "sqlite";

    fn url(table: &str) -> String {
        sqlite_path(table).to_string_lossy().into_owned()
    }

    fn unreachable_url() -> String {
        // A directory that does not exist: SQLite cannot create the file.
        sqlite_path("lease-no-such-directory/leases")
            .to_string_lossy()
            .into_owned()
    }

    fn manager(url: String) -> AsyncDieselConnectionManager<AsyncSqliteConnection> {
        sqlite_manager(url)
    }

    fn available() -> impl Future<Output = Result<(), BoxError>> + Send {
        std::future::ready(Ok(()))
    }

    fn remove_files(table: &str) {
        let path = sqlite_path(table);
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut file = path.clone().into_os_string();
            file.push(suffix);
            let _ = std::fs::remove_file(file);
        }
    }
}

/// A pool kind, over the connection `C`.
pub trait TestPool: DieselPool + Sized {
    /// Its name in test output.
    const POOL: &'static str;

    /// A pool of at most `size` connections made by `manager`.
    fn build(
        manager: AsyncDieselConnectionManager<Self::Connection>,
        size: u32,
    ) -> Result<Self, BoxError>;

    /// Runs `sql` (no parameters) on a connection of the pool.
    fn exec(&self, sql: &str) -> impl Future<Output = Result<(), BoxError>> + Send;

    /// The column `value` (a `BIGINT`) of the rows `sql` returns.
    fn values(&self, sql: &str) -> impl Future<Output = Result<Vec<i64>, BoxError>> + Send;
}

/// A row of one `BIGINT` column called `value`.
#[derive(diesel::QueryableByName)]
pub struct ValueRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub value: i64,
}

macro_rules! test_pools {
    ($conn:ty) => {
        impl TestPool for deadpool::Pool<$conn> {
            const POOL: &'static str = "deadpool";

            fn build(
                manager: AsyncDieselConnectionManager<$conn>,
                size: u32,
            ) -> Result<Self, BoxError> {
                Ok(deadpool::Pool::builder(manager)
                    .max_size(size as usize)
                    .build()?)
            }

            fn exec(&self, sql: &str) -> impl Future<Output = Result<(), BoxError>> + Send {
                let sql = sql.to_owned();
                async move {
                    let mut connection = self.get().await?;
                    diesel_async::SimpleAsyncConnection::batch_execute(&mut *connection, &sql)
                        .await?;
                    Ok(())
                }
            }

            fn values(&self, sql: &str) -> impl Future<Output = Result<Vec<i64>, BoxError>> + Send {
                let sql = sql.to_owned();
                async move {
                    let mut connection = self.get().await?;
                    let rows: Vec<ValueRow> =
                        diesel_async::RunQueryDsl::load(diesel::sql_query(sql), &mut *connection)
                            .await?;
                    Ok(rows.into_iter().map(|row| row.value).collect())
                }
            }
        }

        impl TestPool for bb8::Pool<$conn> {
            const POOL: &'static str = "bb8";

            fn build(
                manager: AsyncDieselConnectionManager<$conn>,
                size: u32,
            ) -> Result<Self, BoxError> {
                Ok(bb8::Pool::builder()
                    .max_size(size)
                    .connection_timeout(CONNECT_TIMEOUT)
                    .build_unchecked(manager))
            }

            fn exec(&self, sql: &str) -> impl Future<Output = Result<(), BoxError>> + Send {
                let sql = sql.to_owned();
                async move {
                    let mut connection = self.get().await?;
                    diesel_async::SimpleAsyncConnection::batch_execute(&mut *connection, &sql)
                        .await?;
                    Ok(())
                }
            }

            fn values(&self, sql: &str) -> impl Future<Output = Result<Vec<i64>, BoxError>> + Send {
                let sql = sql.to_owned();
                async move {
                    let mut connection = self.get().await?;
                    let rows: Vec<ValueRow> =
                        diesel_async::RunQueryDsl::load(diesel::sql_query(sql), &mut *connection)
                            .await?;
                    Ok(rows.into_iter().map(|row| row.value).collect())
                }
            }
        }
    };
}

test_pools!(AsyncPgConnection);
test_pools!(AsyncMysqlConnection);
test_pools!(AsyncSqliteConnection);

/// One database on one pool kind.
pub struct Backend<D, P> {
    name: String,
    /// Whether the fenced cases write through `lease_diesel::fenced_with`, checking where
    /// this says (by default, on PostgreSQL and MariaDB, at the commit), rather than with the
    /// store's check at the start.
    through_fenced: Option<CheckAt>,
    /// Whether the connections' transactions are `SERIALIZABLE` by default (PostgreSQL only).
    serializable: bool,
    /// Whether the stores notify releases and listen for them (PostgreSQL only).
    notifying: bool,
    kinds: PhantomData<fn() -> (D, P)>,
}

impl<D: Database, P: TestPool<Connection = D::Connection>> Backend<D, P> {
    pub fn new() -> Self {
        Self {
            name: format!("diesel-{}-{}", D::NAME, P::POOL),
            through_fenced: None,
            serializable: false,
            notifying: false,
            kinds: PhantomData,
        }
    }

    /// The same backend, whose fenced cases write through `lease_diesel::fenced`.
    pub fn through_fenced(mut self) -> Self {
        self.through_fenced = Some(CheckAt::Commit);
        self
    }

    /// The same backend, whose fenced cases write through
    /// `lease_diesel::fenced_with(.., CheckAt::Begin, ..)`.
    pub fn through_fenced_at_begin(mut self) -> Self {
        self.through_fenced = Some(CheckAt::Begin);
        self
    }

    /// The same backend on PostgreSQL connections whose transactions are `SERIALIZABLE` by
    /// default ([`env::serializable`]): `lease_diesel::fenced` then checks with the `BEGIN`.
    pub fn serializable(mut self) -> Self {
        self.name.push_str("-serializable");
        self.serializable = true;
        self
    }

    /// The same backend whose stores notify releases and listen for them
    /// (`with_notifications(true)`): a waiter is woken by the release itself.
    pub fn notifying(mut self) -> Self {
        self.name.push_str("-notifications");
        self.notifying = true;
        self
    }

    /// A store on a fresh table over a pool of `size`, with the pool and the table's name.
    pub async fn make(&self, size: u32) -> Result<(DieselStore<P>, String), BoxError> {
        let table = env::unique_table("lease_diesel");
        let url = if self.serializable {
            env::serializable(&D::url(&table))
        } else {
            D::url(&table)
        };
        let pool = P::build(D::manager(url), size)?;
        let store = DieselStore::with_table(pool, &table)?.with_notifications(self.notifying);
        store.setup().await?;
        Ok((store, table))
    }

    /// Drops `table` (and its probe table) through `pool`, and the files SQLite left.
    pub async fn drop_table(pool: &P, table: &str) -> Result<(), BoxError> {
        let dropped = pool
            .exec(&format!(
                "DROP TABLE IF EXISTS {table}; DROP TABLE IF EXISTS {table}_probe; \
                 DROP TABLE IF EXISTS {table}_notices"
            ))
            .await;
        D::remove_files(table);
        dropped
    }

    /// A store on a fresh table over a pool of `size`, and fenced writes to a protected table
    /// beside it (`{table}_notices`), as the fenced cases use them.
    pub async fn fenced_writes(
        &self,
        size: u32,
    ) -> Result<(FreshStore<DieselStore<P>>, Arc<dyn FencedWrites>), BoxError>
    where
        P::Connection: diesel_async::SimpleAsyncConnection,
    {
        let (store, table) = self.make(size).await?;
        let notices = format!("{table}_notices");
        store
            .pool()
            .exec(&format!("CREATE TABLE {notices} (value BIGINT NOT NULL)"))
            .await?;
        let writes = Arc::new(FencedDiesel {
            store: store.clone(),
            table: table.clone(),
            notices,
            through_fenced: self.through_fenced,
            snapshot: self.serializable,
        });
        Ok((Self::fresh(store, table), writes))
    }

    fn fresh(store: DieselStore<P>, table: String) -> FreshStore<DieselStore<P>> {
        let pool = store.pool().clone();
        FreshStore::new(store)
            .with_teardown(move || async move { Self::drop_table(&pool, &table).await })
    }
}

#[async_trait::async_trait]
impl<D: Database, P: TestPool<Connection = D::Connection>> TestBackend for Backend<D, P>
where
    DieselStore<P>: lease_core::LeaseStore,
    P::Connection: diesel_async::SimpleAsyncConnection,
{
    type Store = DieselStore<P>;

    fn name(&self) -> &str {
        &self.name
    }

    fn offers(&self, capability: Capability) -> bool {
        capability.offered_by_sql(
            self.notifying,
            <D::Connection as lease_diesel::DieselConnection>::DIALECT,
        )
    }

    async fn available(&self) -> Result<(), BoxError> {
        D::available().await
    }

    async fn store(&self) -> Result<FreshStore<Self::Store>, BoxError> {
        let (store, table) = self.make(4).await?;
        Ok(Self::fresh(store, table))
    }

    async fn pooled(&self, connections: u32) -> Result<Option<PooledStore<Self::Store>>, BoxError> {
        let (store, table) = self.make(connections).await?;
        store
            .pool()
            .exec(&format!("CREATE TABLE {table}_probe (n INTEGER)"))
            .await?;
        let (probe_pool, stats_store) = (store.pool().clone(), store.clone());
        let probe_sql = format!("INSERT INTO {table}_probe (n) VALUES (1)");
        Ok(Some(PooledStore::new(
            Self::fresh(store, table),
            move || {
                let (pool, sql) = (probe_pool.clone(), probe_sql.clone());
                async move { pool.exec(&sql).await }
            },
            move || stats_store.pool_state(),
        )))
    }

    async fn unreachable(&self) -> Result<Option<Self::Store>, BoxError> {
        let pool = P::build(D::manager(D::unreachable_url()), 1)?;
        Ok(Some(DieselStore::new(pool)))
    }

    async fn fenced(&self) -> Result<Option<FencedStore<Self::Store>>, BoxError> {
        let (store, writes) = self.fenced_writes(8).await?;
        Ok(Some(FencedStore::new(store, writes)))
    }
}

/// Fenced transactions on a connection of the store's pool: `BEGIN`, the store's fenced check,
/// the job's work, the insert, `COMMIT`; or, `through_fenced`, the job's work and the insert
/// through `lease_diesel::fenced`.
pub struct FencedDiesel<P> {
    store: DieselStore<P>,
    table: String,
    notices: String,
    through_fenced: Option<CheckAt>,
    /// The connections' transactions read from a snapshot: `lease_diesel::fenced` checks with
    /// the `BEGIN`.
    snapshot: bool,
}

impl<P> FencedDiesel<P>
where
    P: TestPool,
    P::Connection: diesel_async::SimpleAsyncConnection,
{
    /// Sets `set` on the lease `name`'s row. The suite's lease names are plain words, written
    /// here as a literal. The statement may wait for the row lock of a fenced transaction; on
    /// connections that read from a snapshot it then fails with a serialization failure (the
    /// transaction changed the row), and is tried again, at most three times.
    async fn change_row(&self, name: &LeaseName, set: &str) -> Result<(), BoxError> {
        use diesel::result::{DatabaseErrorKind, Error};

        let sql = format!(
            "UPDATE {} SET {set} WHERE name = '{}'",
            self.table,
            name.as_str().replace('\'', "''")
        );
        for _ in 0..3 {
            match self.store.pool().exec(&sql).await {
                Err(error)
                    if matches!(
                        error.downcast_ref::<Error>(),
                        Some(Error::DatabaseError(
                            DatabaseErrorKind::SerializationFailure,
                            _
                        ))
                    ) => {}
                done => return done,
            }
        }
        Err(format!("`{sql}` failed with a serialization failure three times").into())
    }
}

#[async_trait::async_trait]
impl<P> FencedWrites for FencedDiesel<P>
where
    P: TestPool,
    P::Connection: diesel_async::SimpleAsyncConnection,
{
    async fn write(
        &self,
        lease: &LeaseHandle,
        value: i64,
        hold: BoxFuture<'_, ()>,
    ) -> Result<(), lease_core::Error> {
        let failed = |e: BoxError| {
            lease_core::Error::store(lease_core::Operation::Fence, Some(lease.name()), e)
        };
        let mut connection = self.store.pool().connection().await.map_err(failed)?;
        let connection: &mut P::Connection = &mut connection;
        if let Some(at) = self.through_fenced {
            let insert = format!("INSERT INTO {} (value) VALUES ({value})", self.notices);
            let done =
                lease_diesel::fenced_with(&self.store, connection, lease, at, async |conn| {
                    hold.await;
                    diesel_async::SimpleAsyncConnection::batch_execute(conn, &insert).await?;
                    Ok::<_, BoxError>(())
                })
                .await;
            return done.map_err(|e| match e.downcast::<lease_core::Error>() {
                Ok(error) => *error,
                Err(other) => failed(other),
            });
        }
        let mut tries = 0;
        loop {
            tries += 1;
            let begin =
                diesel_async::SimpleAsyncConnection::batch_execute(connection, "BEGIN").await;
            begin.map_err(|e| failed(e.into()))?;
            let Err(refused) = self.store.fence(&mut *connection, lease).await else {
                break;
            };
            let _ =
                diesel_async::SimpleAsyncConnection::batch_execute(connection, "ROLLBACK").await;
            // Under a snapshot, the holder's own renewal in flight as the check began (a
            // serialization failure): what the docs advise, the transaction again, once.
            if tries > 1 || refused.store_error_kind() != Some(lease_core::StoreErrorKind::Conflict)
            {
                return Err(refused);
            }
        }
        hold.await;
        let insert = format!(
            "INSERT INTO {} (value) VALUES ({value}); COMMIT",
            self.notices
        );
        diesel_async::SimpleAsyncConnection::batch_execute(connection, &insert)
            .await
            .map_err(|e| failed(e.into()))
    }

    fn checks_at_commit(&self) -> bool {
        self.through_fenced == Some(CheckAt::Commit)
            && !self.snapshot
            && self.store.statements().checks_at_commit()
    }

    async fn written(&self) -> Result<Vec<i64>, BoxError> {
        self.store
            .pool()
            .values(&format!("SELECT value FROM {}", self.notices))
            .await
    }

    async fn expire(&self, name: &LeaseName) -> Result<(), BoxError> {
        self.change_row(name, "expires_at = taken_at").await
    }

    async fn free(&self, name: &LeaseName) -> Result<(), BoxError> {
        self.change_row(name, "holder = NULL").await
    }
}
