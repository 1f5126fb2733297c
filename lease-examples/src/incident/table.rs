//! [`Tables`]: the readiness table and the lease table of one run, with names of their own.

use std::time::{SystemTime, UNIX_EPOCH};

use lease_core::BoxError;
use lease_sqlx::sqlx::{self, Connection};

/// The tables one run makes, dropped at its end.
#[derive(Debug)]
pub(crate) struct Tables {
    url: String,
    /// What the readiness probe writes to.
    pub(crate) readiness: String,
    /// The lease table of the second half.
    pub(crate) leases: String,
}

impl Tables {
    /// Names no other run uses (process id and time), and the readiness table created.
    pub(crate) async fn create(url: &str) -> Result<Self, BoxError> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos() % 1_000_000_000_000);
        let suffix = format!("{}_{nanos}", std::process::id());
        let tables = Self {
            url: url.to_owned(),
            readiness: format!("lease_incident_ready_{suffix}"),
            leases: format!("lease_incident_leases_{suffix}"),
        };
        let mut conn = super::connect(url).await?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "CREATE TABLE {} (instance text PRIMARY KEY, ready_at timestamptz NOT NULL)",
            tables.readiness
        )))
        .execute(&mut conn)
        .await?;
        conn.close().await?;
        Ok(tables)
    }

    /// The readiness probe's write: one upsert.
    pub(crate) fn readiness_write(&self) -> String {
        format!(
            "INSERT INTO {} (instance, ready_at) VALUES ('instance-1', now()) \
             ON CONFLICT (instance) DO UPDATE SET ready_at = now()",
            self.readiness
        )
    }

    /// Drops both tables, on a connection of its own.
    pub(crate) async fn drop_all(self) -> Result<(), BoxError> {
        let mut conn = super::connect(&self.url).await?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DROP TABLE IF EXISTS {}; DROP TABLE IF EXISTS {}",
            self.readiness, self.leases
        )))
        .execute(&mut conn)
        .await?;
        conn.close().await?;
        Ok(())
    }
}
