//! [`Protected`]: a small table the lease protects, written in a transaction of one insert,
//! plain or fenced as [`Fencing`] says, as a user writes it: `pool.begin()` through sqlx,
//! `conn.transaction(...)` through diesel-async, or the drivers' `fenced` functions.

use std::time::Duration;

use async_trait::async_trait;
use diesel::sql_types::BigInt;
use diesel_async::pooled_connection::deadpool;
use diesel_async::{AsyncConnection, AsyncMysqlConnection, AsyncPgConnection, RunQueryDsl};
use lease_core::{BoxError, LeaseGuard};
use lease_diesel::{AsyncSqliteConnection, DieselStore};
use lease_sql::{CheckAt, Dialect};
use lease_sqlx::SqlxStore;
use sqlx::{AssertSqlSafe, MySql, Postgres, Sqlite};
use tokio::sync::oneshot;

/// How long a transaction stays open after its check, and whom to tell once it is checked.
pub struct Hold {
    /// The time between the check and the insert.
    pub open: Duration,
    /// Told when the check has run (the row is locked from then on).
    pub checked: oneshot::Sender<()>,
}

/// How a transaction is fenced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fencing {
    /// Not at all: begin, insert, commit.
    Plain,
    /// The store's check first: `store.fence(&mut *tx, &guard)`, then the insert and the commit.
    AtStart,
    /// The drivers' `fenced` function: on PostgreSQL and MariaDB the check comes with the
    /// commit, in one message; on SQLite it comes first.
    Fenced,
    /// The drivers' `fenced_with(.., CheckAt::Begin, ..)`: the check comes with the `BEGIN`,
    /// in one message.
    FencedAtBegin,
}

impl Fencing {
    /// Where the drivers' fenced functions check, for the two that go through them.
    fn check_at(self) -> Option<CheckAt> {
        match self {
            Self::Fenced => Some(CheckAt::Commit),
            Self::FencedAtBegin => Some(CheckAt::Begin),
            Self::Plain | Self::AtStart => None,
        }
    }
}

/// A protected table beside one lease table.
#[async_trait]
pub trait Protected: Send + Sync {
    /// Makes the table.
    async fn create(&self) -> Result<(), BoxError>;

    /// One transaction fenced by `lease` as `fencing` says, holding (after the check, when it
    /// comes first) for `hold` when given, then one insert of the lease's fence, then the commit.
    async fn insert(
        &self,
        lease: &LeaseGuard,
        fencing: Fencing,
        hold: Option<Hold>,
    ) -> Result<(), BoxError>;

    /// Drops the table.
    async fn drop_table(&self) -> Result<(), BoxError>;
}

fn create_sql(table: &str) -> String {
    format!("CREATE TABLE {table} (fence BIGINT NOT NULL)")
}

fn insert_sql(dialect: Dialect, table: &str) -> String {
    match dialect {
        Dialect::Postgres => format!("INSERT INTO {table} (fence) VALUES ($1)"),
        _ => format!("INSERT INTO {table} (fence) VALUES (?)"),
    }
}

fn value(lease: &LeaseGuard) -> i64 {
    lease.fence().get() as i64
}

async fn wait(hold: Option<Hold>) {
    if let Some(hold) = hold {
        let _ = hold.checked.send(());
        tokio::time::sleep(hold.open).await;
    }
}

/// The protected table beside the lease table of a store `S` (a sqlx or a diesel store).
pub struct ProtectedTable<S> {
    store: S,
    table: String,
    insert: String,
}

impl<S> ProtectedTable<S> {
    /// The table `<lease table>_protected` beside `store`'s, whose SQL is `dialect`'s.
    pub fn new(store: S, dialect: Dialect, lease_table: &str) -> Self {
        let table = format!("{lease_table}_protected");
        let insert = insert_sql(dialect, &table);
        Self {
            store,
            table,
            insert,
        }
    }
}

macro_rules! sqlx_protected {
    ($db:ty) => {
        #[async_trait]
        impl Protected for ProtectedTable<SqlxStore<$db>> {
            async fn create(&self) -> Result<(), BoxError> {
                sqlx::raw_sql(AssertSqlSafe(create_sql(&self.table)))
                    .execute(self.store.pool())
                    .await?;
                Ok(())
            }

            async fn insert(
                &self,
                lease: &LeaseGuard,
                fencing: Fencing,
                hold: Option<Hold>,
            ) -> Result<(), BoxError> {
                // The job, after the check when it comes first.
                let job = async |tx: &mut <$db as sqlx::Database>::Connection| {
                    wait(hold).await;
                    sqlx::query::<$db>(AssertSqlSafe(self.insert.clone()))
                        .bind(value(lease))
                        .execute(&mut *tx)
                        .await?;
                    Ok::<_, BoxError>(())
                };
                if let Some(at) = fencing.check_at() {
                    return lease_sqlx::fenced_with(&self.store, lease, at, job).await;
                }
                let mut tx = self.store.pool().begin().await?;
                if fencing == Fencing::AtStart {
                    self.store.fence(&mut *tx, lease).await?;
                }
                job(&mut *tx).await?;
                tx.commit().await?;
                Ok(())
            }

            async fn drop_table(&self) -> Result<(), BoxError> {
                sqlx::raw_sql(AssertSqlSafe(format!(
                    "DROP TABLE IF EXISTS {}",
                    self.table
                )))
                .execute(self.store.pool())
                .await?;
                Ok(())
            }
        }
    };
}

sqlx_protected!(Postgres);
sqlx_protected!(MySql);
sqlx_protected!(Sqlite);

macro_rules! diesel_protected {
    ($conn:ty) => {
        #[async_trait]
        impl Protected for ProtectedTable<DieselStore<deadpool::Pool<$conn>>> {
            async fn create(&self) -> Result<(), BoxError> {
                let mut connection = self.store.pool().get().await?;
                diesel::sql_query(create_sql(&self.table))
                    .execute(&mut *connection)
                    .await?;
                Ok(())
            }

            async fn insert(
                &self,
                lease: &LeaseGuard,
                fencing: Fencing,
                hold: Option<Hold>,
            ) -> Result<(), BoxError> {
                let mut connection = self.store.pool().get().await?;
                let store = &self.store;
                let insert = &self.insert;
                // The job, after the check when it comes first.
                let job = async |conn: &mut $conn| {
                    wait(hold).await;
                    diesel::sql_query(insert.as_str())
                        .bind::<BigInt, _>(value(lease))
                        .execute(conn)
                        .await?;
                    Ok::<_, BoxError>(())
                };
                if let Some(at) = fencing.check_at() {
                    return lease_diesel::fenced_with(store, &mut connection, lease, at, job).await;
                }
                connection
                    .transaction(async move |conn| {
                        if fencing == Fencing::AtStart {
                            store.fence(&mut *conn, lease).await?;
                        }
                        job(conn).await
                    })
                    .await
            }

            async fn drop_table(&self) -> Result<(), BoxError> {
                let mut connection = self.store.pool().get().await?;
                diesel::sql_query(format!("DROP TABLE IF EXISTS {}", self.table))
                    .execute(&mut *connection)
                    .await?;
                Ok(())
            }
        }
    };
}

diesel_protected!(AsyncPgConnection);
diesel_protected!(AsyncMysqlConnection);
diesel_protected!(AsyncSqliteConnection);
