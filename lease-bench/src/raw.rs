//! [`Raw`]: the library's own statements sent through the same driver and pool without the
//! library, the seed's naive upsert, and session advisory locks on the same pool: what every
//! figure of the library is measured beside.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use diesel::QueryableByName;
use diesel::sql_types::BigInt;
use diesel_async::pooled_connection::deadpool;
use diesel_async::{AsyncMysqlConnection, AsyncPgConnection, RunQueryDsl};
use lease_core::{BoxError, HolderId, LeaseName, LeaseStore, Ttl};
use lease_diesel::AsyncSqliteConnection;
use lease_sql::{Dialect, Param, Statements};
use sqlx::postgres::PgAdvisoryLock;

use crate::prepared::Prepared;
use sqlx::{AssertSqlSafe, MySql, Pool, Postgres, Sqlite};

/// One lease table reached without the library.
#[async_trait]
pub trait Raw: Send + Sync {
    /// The library's try-acquire statement, bound and sent as a user would: whether it took the
    /// lease.
    async fn try_acquire(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<bool, BoxError>;

    /// The library's release statement: whether it released.
    async fn release(&self, name: &LeaseName, holder: &HolderId) -> Result<bool, BoxError>;

    /// Whether [`prepared_try_acquire`](Raw::prepared_try_acquire) and
    /// [`prepared_release`](Raw::prepared_release) have a path of their own: where the plain
    /// bare statements are not prepared once per connection (diesel's `sql_query`).
    fn has_prepared(&self) -> bool {
        false
    }

    /// The library's try-acquire statement prepared once per connection, as the library
    /// prepares it; `None` where there is no such path apart from the plain one.
    async fn prepared_try_acquire(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<Option<bool>, BoxError> {
        let _ = (name, holder, ttl);
        Ok(None)
    }

    /// The library's release statement prepared once per connection; `None` where there is no
    /// such path apart from the plain one.
    async fn prepared_release(
        &self,
        name: &LeaseName,
        holder: &HolderId,
    ) -> Result<Option<bool>, BoxError> {
        let _ = (name, holder);
        Ok(None)
    }

    /// The seed's upsert (`INSERT ... ON CONFLICT DO UPDATE ... WHERE expired`), without the
    /// library's guard, where there is one to compare with (PostgreSQL); `None` elsewhere.
    async fn naive_try_acquire(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<Option<bool>, BoxError> {
        let _ = (name, holder, ttl);
        Ok(None)
    }

    /// A session advisory lock on `key` taken and released on a pooled connection (sqlx's
    /// `PgAdvisoryLock` on PostgreSQL, `GET_LOCK` on MariaDB): whether it was taken, or `None`
    /// where the database has none.
    async fn advisory_cycle(&self, key: &str) -> Result<Option<bool>, BoxError> {
        let _ = key;
        Ok(None)
    }

    /// How many session advisory locks the pool holds at once, each pinning its connection:
    /// taken until a checkout waits longer than `wait` or `limit` are held.
    async fn advisory_capacity(
        &self,
        limit: usize,
        wait: Duration,
    ) -> Result<Option<usize>, BoxError> {
        let _ = (limit, wait);
        Ok(None)
    }

    /// Adds `count` released rows (no holder, fence 1, taken and expired now) named
    /// `filler-<from + 1>` and on, written with SQL as if earlier leases had come and gone, with
    /// autovacuum off for the table so that its statistics stay those it had; whether the
    /// database has such a statement here (PostgreSQL).
    async fn add_released_rows(&self, from: usize, count: usize) -> Result<bool, BoxError> {
        let _ = (from, count);
        Ok(false)
    }

    /// Drops the table.
    async fn drop_table(&self) -> Result<(), BoxError>;

    /// Closes the pool (and removes SQLite's files).
    async fn close(&self);
}

/// The seed's upsert on PostgreSQL: it decides under the row lock only, so even an attempt
/// that fails locks the row, takes a transaction id and writes WAL.
fn naive_postgres(table: &str) -> String {
    format!(
        "INSERT INTO \"{table}\" AS l (name, holder, fence, taken_at, expires_at)\n\
         VALUES ($1::text, $2::text, 1, now(), now() + $3::int8 * interval '1 microsecond')\n\
         ON CONFLICT (name) DO UPDATE\n\
         SET holder = excluded.holder, fence = l.fence + 1, taken_at = excluded.taken_at, \
         expires_at = excluded.expires_at\n\
         WHERE l.expires_at < now()\n\
         RETURNING l.fence, 1::int8 AS won"
    )
}

/// The statements of [`Raw::add_released_rows`], where there are such.
fn released_rows_sql(dialect: Dialect, table: &str, from: usize, count: usize) -> Option<String> {
    (dialect == Dialect::Postgres).then(|| {
        format!(
            "ALTER TABLE \"{table}\" SET (autovacuum_enabled = false);\n\
             INSERT INTO \"{table}\" (name, holder, fence, taken_at, expires_at)\n\
             SELECT 'filler-' || i, NULL, 1, now(), now() FROM generate_series({}, {}) AS i",
            from + 1,
            from + count
        )
    })
}

fn drop_sql(dialect: Dialect, table: &str) -> String {
    match dialect {
        Dialect::MySql => format!("DROP TABLE IF EXISTS `{table}`"),
        _ => format!("DROP TABLE IF EXISTS \"{table}\""),
    }
}

fn advisory_key(table: &str, key: &str) -> String {
    // Keys are shared by the whole server: the table's unique name keeps them ours.
    format!("{table}:{key}")
}

fn remove_sqlite_files(file: Option<&PathBuf>) {
    if let Some(file) = file {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut path = file.clone().into_os_string();
            path.push(suffix);
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A table through a sqlx pool.
pub struct SqlxRaw<DB: sqlx::Database> {
    pool: Pool<DB>,
    statements: Statements,
    table: String,
    naive: Option<String>,
    file: Option<PathBuf>,
}

impl<DB: sqlx::Database> SqlxRaw<DB> {
    /// The table `table`, whose statements are `statements`, through `pool`.
    pub fn new(pool: Pool<DB>, statements: Statements, table: &str) -> Self {
        let naive = (statements.dialect() == Dialect::Postgres).then(|| naive_postgres(table));
        Self {
            pool,
            statements,
            table: table.to_owned(),
            naive,
            file: None,
        }
    }

    /// The SQLite file, removed on close.
    pub fn with_file(mut self, file: PathBuf) -> Self {
        self.file = Some(file);
        self
    }
}

/// Binds lease-sql's parameters in order, as the library does.
macro_rules! bind_params {
    ($query:expr, $params:expr) => {{
        let mut query = $query;
        for param in $params {
            query = match param {
                Param::Text(text) => query.bind(text),
                Param::Int(int) => query.bind(int),
            };
        }
        query
    }};
}

/// The statements every sqlx database runs the same way.
macro_rules! sqlx_statements {
    ($db:ty) => {
        impl SqlxRaw<$db> {
            async fn acquire_with(&self, query: lease_sql::Query<'_>) -> Result<bool, BoxError> {
                let (sql, params) = query.into_parts();
                let query = sqlx::query_as::<$db, (i64, i64)>(AssertSqlSafe(sql.into_owned()));
                let rows = bind_params!(query, params).fetch_all(&self.pool).await?;
                Ok(lease_sql::acquired(rows.into_iter().next())?.is_some())
            }

            async fn bare_try_acquire(
                &self,
                name: &LeaseName,
                holder: &HolderId,
                ttl: Ttl,
            ) -> Result<bool, BoxError> {
                self.acquire_with(self.statements.try_acquire(name, holder, ttl))
                    .await
            }

            async fn bare_release(
                &self,
                name: &LeaseName,
                holder: &HolderId,
            ) -> Result<bool, BoxError> {
                let query = self.statements.release(name, holder, Duration::ZERO);
                let (sql, params) = query.into_parts();
                let query = sqlx::query::<$db>(AssertSqlSafe(sql.into_owned()));
                let done = bind_params!(query, params).execute(&self.pool).await?;
                Ok(done.rows_affected() > 0)
            }

            async fn bare_drop_table(&self) -> Result<(), BoxError> {
                let sql = drop_sql(self.statements.dialect(), &self.table);
                sqlx::raw_sql(AssertSqlSafe(sql))
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn bare_close(&self) {
                self.pool.close().await;
                remove_sqlite_files(self.file.as_ref());
            }
        }
    };
}

sqlx_statements!(Postgres);
sqlx_statements!(MySql);
sqlx_statements!(Sqlite);

#[async_trait]
impl Raw for SqlxRaw<Postgres> {
    async fn try_acquire(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<bool, BoxError> {
        self.bare_try_acquire(name, holder, ttl).await
    }

    async fn release(&self, name: &LeaseName, holder: &HolderId) -> Result<bool, BoxError> {
        self.bare_release(name, holder).await
    }

    async fn naive_try_acquire(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<Option<bool>, BoxError> {
        let Some(naive) = &self.naive else {
            return Ok(None);
        };
        let query = sqlx::query_as::<Postgres, (i64, i64)>(AssertSqlSafe(naive.clone()))
            .bind(name.as_str())
            .bind(holder.as_str())
            .bind(lease_sql::ttl_micros(ttl));
        let rows = query.fetch_all(&self.pool).await?;
        Ok(Some(
            lease_sql::acquired(rows.into_iter().next())?.is_some(),
        ))
    }

    async fn advisory_cycle(&self, key: &str) -> Result<Option<bool>, BoxError> {
        let connection = self.pool.acquire().await?;
        let lock = PgAdvisoryLock::new(advisory_key(&self.table, key));
        Ok(Some(match lock.try_acquire(connection).await? {
            sqlx::Either::Left(guard) => {
                guard.release_now().await?;
                true
            }
            sqlx::Either::Right(_) => false,
        }))
    }

    async fn advisory_capacity(
        &self,
        limit: usize,
        wait: Duration,
    ) -> Result<Option<usize>, BoxError> {
        let mut held = Vec::new();
        for i in 0..limit {
            let Ok(connection) = tokio::time::timeout(wait, self.pool.acquire()).await else {
                break;
            };
            let lock = PgAdvisoryLock::new(advisory_key(&self.table, &format!("capacity-{i}")));
            match lock.try_acquire(connection?).await? {
                sqlx::Either::Left(guard) => held.push(guard),
                sqlx::Either::Right(_) => break,
            }
        }
        let count = held.len();
        for guard in held {
            guard.release_now().await?;
        }
        Ok(Some(count))
    }

    async fn add_released_rows(&self, from: usize, count: usize) -> Result<bool, BoxError> {
        let Some(sql) = released_rows_sql(self.statements.dialect(), &self.table, from, count)
        else {
            return Ok(false);
        };
        sqlx::raw_sql(AssertSqlSafe(sql))
            .execute(&self.pool)
            .await?;
        Ok(true)
    }

    async fn drop_table(&self) -> Result<(), BoxError> {
        self.bare_drop_table().await
    }

    async fn close(&self) {
        self.bare_close().await;
    }
}

#[async_trait]
impl Raw for SqlxRaw<MySql> {
    async fn try_acquire(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<bool, BoxError> {
        self.bare_try_acquire(name, holder, ttl).await
    }

    async fn release(&self, name: &LeaseName, holder: &HolderId) -> Result<bool, BoxError> {
        self.bare_release(name, holder).await
    }

    async fn advisory_cycle(&self, key: &str) -> Result<Option<bool>, BoxError> {
        let mut connection = self.pool.acquire().await?;
        let key = advisory_key(&self.table, key);
        let taken: Option<i64> = sqlx::query_scalar("SELECT CAST(GET_LOCK(?, 0) AS SIGNED)")
            .bind(&key)
            .fetch_one(&mut *connection)
            .await?;
        if taken == Some(1) {
            sqlx::query("DO RELEASE_LOCK(?)")
                .bind(&key)
                .execute(&mut *connection)
                .await?;
        }
        Ok(Some(taken == Some(1)))
    }

    async fn advisory_capacity(
        &self,
        limit: usize,
        wait: Duration,
    ) -> Result<Option<usize>, BoxError> {
        let mut held = Vec::new();
        for i in 0..limit {
            let Ok(connection) = tokio::time::timeout(wait, self.pool.acquire()).await else {
                break;
            };
            let mut connection = connection?;
            let taken: Option<i64> = sqlx::query_scalar("SELECT CAST(GET_LOCK(?, 0) AS SIGNED)")
                .bind(advisory_key(&self.table, &format!("capacity-{i}")))
                .fetch_one(&mut *connection)
                .await?;
            if taken != Some(1) {
                break;
            }
            held.push(connection);
        }
        let count = held.len();
        for mut connection in held {
            sqlx::query("DO RELEASE_ALL_LOCKS()")
                .execute(&mut *connection)
                .await?;
        }
        Ok(Some(count))
    }

    async fn drop_table(&self) -> Result<(), BoxError> {
        self.bare_drop_table().await
    }

    async fn close(&self) {
        self.bare_close().await;
    }
}

#[async_trait]
impl Raw for SqlxRaw<Sqlite> {
    async fn try_acquire(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<bool, BoxError> {
        self.bare_try_acquire(name, holder, ttl).await
    }

    async fn release(&self, name: &LeaseName, holder: &HolderId) -> Result<bool, BoxError> {
        self.bare_release(name, holder).await
    }

    async fn drop_table(&self) -> Result<(), BoxError> {
        self.bare_drop_table().await
    }

    async fn close(&self) {
        self.bare_close().await;
    }
}

/// A try-acquire row, read by column name.
#[derive(QueryableByName)]
struct AcquireRow {
    #[diesel(sql_type = BigInt)]
    fence: i64,
    #[diesel(sql_type = BigInt)]
    won: i64,
}

/// Whether an advisory lock was taken: 1 or 0.
#[derive(QueryableByName)]
struct Locked {
    #[diesel(sql_type = BigInt)]
    locked: i64,
}

/// A table through a diesel-async pool `P` (deadpool's here).
pub struct DieselRaw<P> {
    pool: P,
    statements: Statements,
    table: String,
    naive: Option<String>,
    file: Option<PathBuf>,
}

impl<P> DieselRaw<P> {
    /// The table `table`, whose statements are `statements`, through `pool`.
    pub fn new(pool: P, statements: Statements, table: &str) -> Self {
        let naive = (statements.dialect() == Dialect::Postgres).then(|| naive_postgres(table));
        Self {
            pool,
            statements,
            table: table.to_owned(),
            naive,
            file: None,
        }
    }

    /// The SQLite file, removed on close.
    pub fn with_file(mut self, file: PathBuf) -> Self {
        self.file = Some(file);
        self
    }
}

/// `sql` with lease-sql's parameters bound in order, as diesel's boxed `sql_query`.
macro_rules! diesel_query {
    ($backend:ty, $sql:expr, $params:expr) => {{
        let mut query = diesel::sql_query($sql).into_boxed::<$backend>();
        for param in $params {
            query = match param {
                Param::Text(text) => query.bind::<diesel::sql_types::Text, _>(text.into_owned()),
                Param::Int(int) => query.bind::<BigInt, _>(int),
            };
        }
        query
    }};
}

/// The [`Raw`] of one diesel connection type; `advisory` gives the SQL that takes a session
/// lock (answering `locked` as 1 or 0) and the SQL that releases it, where there are such.
macro_rules! diesel_raw {
    ($conn:ty, $backend:ty, advisory = $advisory:expr) => {
        #[async_trait]
        impl Raw for DieselRaw<deadpool::Pool<$conn>> {
            async fn try_acquire(
                &self,
                name: &LeaseName,
                holder: &HolderId,
                ttl: Ttl,
            ) -> Result<bool, BoxError> {
                let (sql, params) = self.statements.try_acquire(name, holder, ttl).into_parts();
                let query = diesel_query!($backend, sql.into_owned(), params);
                let mut connection = self.pool.get().await?;
                let rows: Vec<AcquireRow> = query.load(&mut *connection).await?;
                let row = rows.into_iter().next().map(|row| (row.fence, row.won));
                Ok(lease_sql::acquired(row)?.is_some())
            }

            async fn release(&self, name: &LeaseName, holder: &HolderId) -> Result<bool, BoxError> {
                let (sql, params) = self
                    .statements
                    .release(name, holder, Duration::ZERO)
                    .into_parts();
                let query = diesel_query!($backend, sql.into_owned(), params);
                let mut connection = self.pool.get().await?;
                Ok(query.execute(&mut *connection).await? > 0)
            }

            fn has_prepared(&self) -> bool {
                true
            }

            async fn prepared_try_acquire(
                &self,
                name: &LeaseName,
                holder: &HolderId,
                ttl: Ttl,
            ) -> Result<Option<bool>, BoxError> {
                let (sql, params) = self.statements.try_acquire(name, holder, ttl).into_parts();
                let mut connection = self.pool.get().await?;
                let rows: Vec<(i64, i64)> = Prepared::<(BigInt, BigInt)>::new(&sql, &params)
                    .load(&mut *connection)
                    .await?;
                Ok(Some(
                    lease_sql::acquired(rows.into_iter().next())?.is_some(),
                ))
            }

            async fn prepared_release(
                &self,
                name: &LeaseName,
                holder: &HolderId,
            ) -> Result<Option<bool>, BoxError> {
                let (sql, params) = self
                    .statements
                    .release(name, holder, Duration::ZERO)
                    .into_parts();
                let mut connection = self.pool.get().await?;
                let done = Prepared::<diesel::sql_types::Untyped>::new(&sql, &params)
                    .execute(&mut *connection)
                    .await?;
                Ok(Some(done > 0))
            }

            async fn naive_try_acquire(
                &self,
                name: &LeaseName,
                holder: &HolderId,
                ttl: Ttl,
            ) -> Result<Option<bool>, BoxError> {
                let Some(naive) = &self.naive else {
                    return Ok(None);
                };
                let params = [
                    Param::text(name.as_str()),
                    Param::text(holder.as_str()),
                    Param::Int(lease_sql::ttl_micros(ttl)),
                ];
                let query = diesel_query!($backend, naive.clone(), params);
                let mut connection = self.pool.get().await?;
                let rows: Vec<AcquireRow> = query.load(&mut *connection).await?;
                let row = rows.into_iter().next().map(|row| (row.fence, row.won));
                Ok(Some(lease_sql::acquired(row)?.is_some()))
            }

            async fn advisory_cycle(&self, key: &str) -> Result<Option<bool>, BoxError> {
                let Some((lock, unlock)) = $advisory else {
                    return Ok(None);
                };
                let key = advisory_key(&self.table, key);
                let mut connection = self.pool.get().await?;
                let taken: Locked = diesel_query!($backend, lock, [Param::text(&key)])
                    .get_result(&mut *connection)
                    .await?;
                if taken.locked == 1 {
                    diesel_query!($backend, unlock, [Param::text(&key)])
                        .execute(&mut *connection)
                        .await?;
                }
                Ok(Some(taken.locked == 1))
            }

            async fn advisory_capacity(
                &self,
                limit: usize,
                wait: Duration,
            ) -> Result<Option<usize>, BoxError> {
                let Some((lock, unlock)) = $advisory else {
                    return Ok(None);
                };
                let mut held = Vec::new();
                for i in 0..limit {
                    let Ok(connection) = tokio::time::timeout(wait, self.pool.get()).await else {
                        break;
                    };
                    let mut connection = connection?;
                    let key = advisory_key(&self.table, &format!("capacity-{i}"));
                    let taken: Locked = diesel_query!($backend, lock, [Param::text(&key)])
                        .get_result(&mut *connection)
                        .await?;
                    if taken.locked != 1 {
                        break;
                    }
                    held.push((connection, key));
                }
                let count = held.len();
                for (mut connection, key) in held {
                    diesel_query!($backend, unlock, [Param::text(&key)])
                        .execute(&mut *connection)
                        .await?;
                }
                Ok(Some(count))
            }

            async fn add_released_rows(&self, from: usize, count: usize) -> Result<bool, BoxError> {
                let Some(sql) =
                    released_rows_sql(self.statements.dialect(), &self.table, from, count)
                else {
                    return Ok(false);
                };
                let mut connection = self.pool.get().await?;
                diesel_async::SimpleAsyncConnection::batch_execute(&mut *connection, &sql).await?;
                Ok(true)
            }

            async fn drop_table(&self) -> Result<(), BoxError> {
                let sql = drop_sql(self.statements.dialect(), &self.table);
                let mut connection = self.pool.get().await?;
                diesel::sql_query(sql).execute(&mut *connection).await?;
                Ok(())
            }

            async fn close(&self) {
                self.pool.close();
                remove_sqlite_files(self.file.as_ref());
            }
        }
    };
}

diesel_raw!(
    AsyncPgConnection,
    diesel::pg::Pg,
    advisory = Some((
        "SELECT pg_try_advisory_lock(hashtext($1))::int::int8 AS locked",
        "SELECT pg_advisory_unlock(hashtext($1))"
    ))
);
diesel_raw!(
    AsyncMysqlConnection,
    diesel::mysql::Mysql,
    advisory = Some((
        "SELECT CAST(COALESCE(GET_LOCK(?, 0), 0) AS SIGNED) AS locked",
        "DO RELEASE_LOCK(?)"
    ))
);
diesel_raw!(
    AsyncSqliteConnection,
    diesel::sqlite::Sqlite,
    advisory = None::<(&str, &str)>
);

/// The memory store called directly, without a client: the client's own overhead.
pub struct StoreRaw {
    store: Arc<dyn LeaseStore>,
}

impl StoreRaw {
    /// Calls on `store`.
    pub fn new(store: Arc<dyn LeaseStore>) -> Self {
        Self { store }
    }
}

#[async_trait]
impl Raw for StoreRaw {
    async fn try_acquire(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<bool, BoxError> {
        Ok(self.store.try_acquire(name, holder, ttl).await?.is_some())
    }

    async fn release(&self, name: &LeaseName, holder: &HolderId) -> Result<bool, BoxError> {
        Ok(self.store.release(name, holder, Duration::ZERO).await?)
    }

    async fn drop_table(&self) -> Result<(), BoxError> {
        Ok(())
    }

    async fn close(&self) {}
}
