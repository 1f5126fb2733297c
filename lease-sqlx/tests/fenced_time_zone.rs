//! MariaDB's fenced check reads the database's clock in UTC, whatever the zone of the caller's
//! connection it runs on (an application's pool may set one of its own). It had read
//! `SYSDATE(6)`'s distance from `NOW(6)`, two times in the session's zone: where that zone has
//! summer time and the statement started on one side of a change and read the row on the
//! other, the distance was an hour off, so a held lease failed its check in spring, and one
//! expired less than an hour before passed it in autumn.
//!
//! A session's `@@timestamp` stands in for the statement's start on the other side of a change:
//! `NOW` follows it, `SYSDATE` does not. The zone's rules must be in the server's tables, so
//! the case runs on a private server, into which `mariadb-tzinfo-to-sql` loads them. The SQL is
//! lease-sql's, the same text through both drivers; this crate's driver runs it.
#![cfg(feature = "mysql")]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lease_core::runtime::TokioRuntime;
use lease_core::{BoxError, Error, LeaseClient, Ttl};
use lease_sqlx::MySqlLeaseStore;
use lease_sqlx::sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
use lease_sqlx::sqlx::{self, AssertSqlSafe, Connection, MySqlConnection};
use lease_tests::{env, read_only};

/// A zone with summer time, and where its rules are on the machine.
const ZONE: &str = "Europe/Berlin";
const ZONE_FILE: &str = "/usr/share/zoneinfo/Europe/Berlin";

/// How far from the check the lease's expiry is set, each way: within the hour a distance read
/// across a change was off by.
const MARGIN_MINUTES: u32 = 30;

#[test]
fn the_mariadb_check_reads_utc_whatever_the_callers_zone() {
    let rules = match zone_rules() {
        Ok(rules) => rules,
        Err(why) => return env::skip_or_fail("mariadb time zones", &why),
    };
    read_only::on_private_server(
        async |url: &str, table: &str| {
            let pool = MySqlPoolOptions::new()
                .max_connections(2)
                .connect(url)
                .await?;
            let store = MySqlLeaseStore::with_table(pool, table)?;
            store.setup().await?;
            Ok(store)
        },
        async |store: &MySqlLeaseStore, url: &str, table: &str| {
            let options: MySqlConnectOptions = url.parse()?;
            let mut admin =
                MySqlConnection::connect_with(&options.clone().database("mysql")).await?;
            sqlx::raw_sql(AssertSqlSafe(rules))
                .execute(&mut admin)
                .await?;
            admin.close().await?;

            let client = LeaseClient::builder(store.clone(), TokioRuntime)
                .ttl(Ttl::new(Duration::from_secs(3_600))?)
                .renew_every(Duration::from_secs(1_200))
                .build()?;
            let guard = client
                .try_acquire("notices")
                .await?
                .ok_or("the lease was taken on a fresh table")?;
            let mut rows = MySqlConnection::connect_with(&options).await?;
            let mut caller = MySqlConnection::connect_with(&options).await?;
            the_other_season(&mut caller).await?;

            // Held for half an hour more: the check holds.
            set_expiry(&mut rows, table, "+").await?;
            let mut tx = caller.begin().await?;
            let checked = store.fence(&mut *tx, &guard).await;
            tx.rollback().await?;
            if let Err(error) = checked {
                return Err(format!(
                    "a lease held for {MARGIN_MINUTES} minutes more failed the check on a \
                     connection in {ZONE}, its statement started in the other season: {error}"
                )
                .into());
            }
            // Expired half an hour ago: the check fails.
            set_expiry(&mut rows, table, "-").await?;
            let mut tx = caller.begin().await?;
            let checked = store.fence(&mut *tx, &guard).await;
            tx.rollback().await?;
            match checked {
                Err(Error::NotHeld { .. }) => Ok(()),
                Err(error) => {
                    Err(format!("the check on an expired lease failed so: {error}").into())
                }
                Ok(fence) => Err(format!(
                    "a lease expired {MARGIN_MINUTES} minutes ago passed the check (fence {fence}) \
                     on a connection in {ZONE}, its statement started in the other season"
                )
                .into()),
            }
        },
    );
}

/// The SQL that loads [`ZONE`]'s rules into the `mysql` schema.
fn zone_rules() -> Result<String, String> {
    if !Path::new(ZONE_FILE).exists() {
        return Err(format!("no {ZONE_FILE}: install the tzdata package"));
    }
    for program in ["mariadb-tzinfo-to-sql", "mysql_tzinfo_to_sql"] {
        let Ok(output) = Command::new(program).args([ZONE_FILE, ZONE]).output() else {
            continue;
        };
        if !output.status.success() {
            return Err(format!(
                "{program} failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        return String::from_utf8(output.stdout).map_err(|error| error.to_string());
    }
    Err("no mariadb-tzinfo-to-sql: install the mariadb-server package".into())
}

/// Sets `connection`'s zone to [`ZONE`] and its `@@timestamp` to a moment of the last year
/// whose offset from UTC is not the present one's (summer time now: a winter's; winter now: a
/// summer's).
async fn the_other_season(connection: &mut MySqlConnection) -> Result<(), BoxError> {
    sqlx::raw_sql(AssertSqlSafe(format!("SET time_zone = '{ZONE}'")))
        .execute(&mut *connection)
        .await?;
    let offset = "SELECT TIMESTAMPDIFF(MINUTE, UTC_TIMESTAMP(), NOW())";
    let now: i64 = sqlx::query_scalar(offset)
        .fetch_one(&mut *connection)
        .await?;
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    for months in 1..=12 {
        let moment = since_epoch - months * 30 * 86_400;
        sqlx::raw_sql(AssertSqlSafe(format!("SET timestamp = {moment}")))
            .execute(&mut *connection)
            .await?;
        let then: i64 = sqlx::query_scalar(offset)
            .fetch_one(&mut *connection)
            .await?;
        if then != now {
            return Ok(());
        }
    }
    Err(
        format!("{ZONE} kept its offset of {now} minutes over the last year: no summer time")
            .into(),
    )
}

/// Sets the lease's expiry [`MARGIN_MINUTES`] after (`+`) or before (`-`) the database's UTC
/// time, on a connection of its own (in UTC, its `@@timestamp` the server's clock).
async fn set_expiry(
    connection: &mut MySqlConnection,
    table: &str,
    sign: &str,
) -> Result<(), BoxError> {
    sqlx::raw_sql(AssertSqlSafe(format!(
        "UPDATE {table} SET expires_at = UTC_TIMESTAMP(6) {sign} INTERVAL {MARGIN_MINUTES} MINUTE \
         WHERE name = 'notices'"
    )))
    .execute(&mut *connection)
    .await?;
    Ok(())
}
