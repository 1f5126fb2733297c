//! [`Wal`]: how many bytes of write-ahead log a PostgreSQL server wrote between two moments.

use lease_core::BoxError;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

/// Reads a PostgreSQL server's WAL position. Only meaningful on a server nobody else writes to:
/// the position is the whole server's.
pub struct Wal {
    pool: PgPool,
}

impl Wal {
    /// A reader of the server at `url`, on a connection of its own.
    ///
    /// # Errors
    /// When the server cannot be reached.
    pub async fn connect(url: &str) -> Result<Self, BoxError> {
        let pool = PgPoolOptions::new().max_connections(1).connect(url).await?;
        Ok(Self { pool })
    }

    /// The current WAL insert position. Reading it writes nothing.
    ///
    /// # Errors
    /// When the server fails.
    pub async fn position(&self) -> Result<String, BoxError> {
        Ok(sqlx::query_scalar("SELECT pg_current_wal_lsn()::text")
            .fetch_one(&self.pool)
            .await?)
    }

    /// Bytes of WAL written since `position`.
    ///
    /// # Errors
    /// When the server fails.
    pub async fn written_since(&self, position: &str) -> Result<i64, BoxError> {
        Ok(
            sqlx::query_scalar("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::int8")
                .bind(position)
                .fetch_one(&self.pool)
                .await?,
        )
    }

    /// Closes its connection.
    pub async fn close(self) {
        self.pool.close().await;
    }
}
