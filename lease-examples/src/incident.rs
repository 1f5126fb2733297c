//! The incident of the design story, reproduced on PostgreSQL: one instance with a pool of four
//! connections holds its four jobs, first with session advisory locks, then with leases, and
//! makes the write its readiness probe makes.
//!
//! With advisory locks every lock pins the pooled connection that took it, so the write waits
//! for a connection that never comes back and times out: the instance answers 503. With leases
//! each statement borrows a connection for a moment, so the write commits at once while the four
//! leases stay held and renewed.
//!
//! `cargo run --example incident -- postgres://user@host/db` runs [`run`] and prints its
//! [`Report`].

mod advisory;
mod leases;
mod report;
mod table;

use std::time::Duration;

use lease_core::BoxError;
use lease_sqlx::sqlx::postgres::{PgPool, PgPoolOptions};
use lease_sqlx::sqlx::{Connection, PgConnection};

pub use self::report::{Report, Side, Write};

/// The environment variable the example reads the PostgreSQL URL from when no argument gives it.
pub const URL_VAR: &str = "DATABASE_URL";

/// The pool of every instance in the story.
pub const POOL_SIZE: u32 = 4;

/// The bound of the readiness probe's write: how long it may wait for a connection. The story's
/// probe had 1 s.
pub const READINESS_BOUND: Duration = Duration::from_secs(1);

/// The four jobs one instance held at the moment of the incident: the three cluster-wide ones
/// and its node's uptime checks.
pub const JOBS: [&str; 4] = ["sweep", "alerts", "mail-checks", "uptime:node-a"];

/// The PostgreSQL URL: the first argument, else [`URL_VAR`]; the message to print when neither
/// is there.
///
/// # Errors
/// A usage message naming both ways to give the URL.
pub fn database_url(
    mut args: impl Iterator<Item = String>,
    env: Option<String>,
) -> Result<String, String> {
    args.next()
        .or(env)
        .filter(|url| !url.trim().is_empty())
        .ok_or_else(|| {
            format!(
                "this example needs a PostgreSQL database.\n\
                 usage: cargo run --example incident -- postgres://user@host:5432/database\n\
                 or set {URL_VAR}=postgres://user@host:5432/database"
            )
        })
}

/// Runs both halves against the database at `url` and reports them side by side. Every table
/// it makes has a name of its own and is dropped at the end.
///
/// # Errors
/// When the database cannot be reached or a statement other than the readiness write fails.
pub async fn run(url: &str) -> Result<Report, BoxError> {
    let tables = table::Tables::create(url).await?;
    let result = async {
        let advisory = advisory::run(url, &tables).await?;
        let leases = leases::run(url, &tables).await?;
        Ok::<_, BoxError>(Report { advisory, leases })
    }
    .await;
    let dropped = tables.drop_all().await;
    let report = result?;
    dropped?;
    Ok(report)
}

/// How long a connection of the example's own (its tables, the operator's view) may take to
/// open: sqlx's `PgConnection::connect` has no bound of its own, and a server that accepts and
/// never answers would hold the example for ever.
pub const CONNECT_BOUND: Duration = Duration::from_secs(5);

/// A connection outside the instance's pool, opened within [`CONNECT_BOUND`].
async fn connect(url: &str) -> Result<PgConnection, BoxError> {
    match tokio::time::timeout(CONNECT_BOUND, PgConnection::connect(url)).await {
        Ok(connected) => Ok(connected?),
        Err(_) => Err(format!(
            "the database did not answer within {} s of connecting",
            CONNECT_BOUND.as_secs()
        )
        .into()),
    }
}

/// A pool like the instance's: [`POOL_SIZE`] connections, waiting at most [`READINESS_BOUND`]
/// for one.
async fn instance_pool(url: &str) -> Result<PgPool, BoxError> {
    Ok(PgPoolOptions::new()
        .max_connections(POOL_SIZE)
        .acquire_timeout(READINESS_BOUND)
        .connect(url)
        .await?)
}
