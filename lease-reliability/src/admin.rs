//! [`Admin`]: what a scenario does to a private server as its superuser: make accounts for the
//! application, grant them more or less, and kill their connections.

use lease_core::BoxError;
use lease_sqlx::sqlx::mysql::MySqlPoolOptions;
use lease_sqlx::sqlx::postgres::PgPoolOptions;
use lease_sqlx::sqlx::{self, AssertSqlSafe, MySqlPool, PgPool};

use crate::db::{Db, Target};

/// A superuser connection to a private server.
#[derive(Debug, Clone)]
pub enum Admin {
    /// PostgreSQL, as `postgres`.
    Postgres(PgPool, u16),
    /// MariaDB, as `root`.
    MariaDb(MySqlPool, u16),
}

/// What an application account may do.
#[derive(Debug, Clone, Copy)]
pub enum Grant<'a> {
    /// Everything in the test database, schema changes included.
    All,
    /// `SELECT, INSERT, UPDATE, DELETE` on this one table, nothing else.
    Rows(&'a str),
    /// `SELECT, INSERT, UPDATE` on this one table: what the stores' READMEs say they need.
    RowsWithoutDelete(&'a str),
}

impl Grant<'_> {
    /// The table rights granted, as SQL.
    fn rights(self) -> &'static str {
        match self {
            Self::All => "ALL PRIVILEGES",
            Self::Rows(_) => "SELECT, INSERT, UPDATE, DELETE",
            Self::RowsWithoutDelete(_) => "SELECT, INSERT, UPDATE",
        }
    }
}

impl Admin {
    /// Connects to `target`'s private server as its superuser.
    ///
    /// # Errors
    /// When it cannot connect, or the target is SQLite.
    pub async fn connect(target: &Target) -> Result<Self, BoxError> {
        let port = target.server.as_ref().ok_or("SQLite has no server")?.port();
        Ok(match target.db {
            Db::Postgres => Self::Postgres(
                PgPoolOptions::new()
                    .max_connections(1)
                    .connect(&target.url)
                    .await?,
                port,
            ),
            Db::MariaDb => Self::MariaDb(
                MySqlPoolOptions::new()
                    .max_connections(1)
                    .connect(&target.url)
                    .await?,
                port,
            ),
            Db::Sqlite => return Err("SQLite has no server".into()),
        })
    }

    /// Runs `sql`.
    ///
    /// # Errors
    /// When the server refuses it.
    pub async fn execute(&self, sql: &str) -> Result<(), BoxError> {
        let sql = AssertSqlSafe(sql.to_owned());
        match self {
            Self::Postgres(pool, _) => {
                sqlx::raw_sql(sql).execute(pool).await?;
            }
            Self::MariaDb(pool, _) => {
                sqlx::raw_sql(sql).execute(pool).await?;
            }
        }
        Ok(())
    }

    /// Makes the login `user` (no password; the private servers trust 127.0.0.1) with `grant`,
    /// and returns its URL. `user` and the table must be plain identifiers.
    ///
    /// # Errors
    /// When the server refuses.
    pub async fn create_user(&self, user: &str, grant: Grant<'_>) -> Result<String, BoxError> {
        match self {
            Self::Postgres(_, port) => {
                self.execute(&format!("CREATE ROLE {user} LOGIN")).await?;
                match grant {
                    Grant::All => {
                        self.execute(&format!("GRANT ALL ON SCHEMA public TO {user}"))
                            .await?;
                        self.execute(&format!(
                            "GRANT ALL ON ALL TABLES IN SCHEMA public TO {user}"
                        ))
                        .await?;
                    }
                    Grant::Rows(table) | Grant::RowsWithoutDelete(table) => {
                        // PostgreSQL 15 and later no longer let everybody create in `public`;
                        // earlier versions did. Take it away either way.
                        self.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
                            .await?;
                        self.execute(&format!("GRANT {} ON {table} TO {user}", grant.rights()))
                            .await?;
                    }
                }
                Ok(format!("postgres://{user}@127.0.0.1:{port}/postgres"))
            }
            Self::MariaDb(_, port) => {
                self.execute(&format!("CREATE USER '{user}'@'127.0.0.1'"))
                    .await?;
                let what = match grant {
                    Grant::All => "ALL PRIVILEGES ON test.*".to_owned(),
                    Grant::Rows(table) | Grant::RowsWithoutDelete(table) => {
                        format!("{} ON test.{table}", grant.rights())
                    }
                };
                self.execute(&format!("GRANT {what} TO '{user}'@'127.0.0.1'"))
                    .await?;
                Ok(format!("mysql://{user}@127.0.0.1:{port}/test"))
            }
        }
    }

    /// Kills every connection of `user` (PostgreSQL `pg_terminate_backend`, MariaDB `KILL`);
    /// returns how many it killed.
    ///
    /// # Errors
    /// When the server refuses.
    pub async fn kill_connections_of(&self, user: &str) -> Result<u64, BoxError> {
        match self {
            Self::Postgres(pool, _) => {
                // Listed first, then terminated one by one: in a single statement the planner
                // may call pg_terminate_backend before it filters by user, killing everybody.
                let pids: Vec<i32> =
                    sqlx::query_scalar("SELECT pid FROM pg_stat_activity WHERE usename = $1")
                        .bind(user)
                        .fetch_all(pool)
                        .await?;
                let mut killed = 0;
                for pid in pids {
                    let done: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
                        .bind(pid)
                        .fetch_one(pool)
                        .await?;
                    killed += u64::from(done);
                }
                Ok(killed)
            }
            Self::MariaDb(pool, _) => {
                let ids: Vec<i64> = sqlx::query_scalar(
                    "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?",
                )
                .bind(user)
                .fetch_all(pool)
                .await?;
                let mut killed = 0;
                for id in ids {
                    // A connection that ended meanwhile is not an error here.
                    let sql = AssertSqlSafe(format!("KILL CONNECTION {id}"));
                    if sqlx::raw_sql(sql).execute(pool).await.is_ok() {
                        killed += 1;
                    }
                }
                Ok(killed)
            }
        }
    }
}
