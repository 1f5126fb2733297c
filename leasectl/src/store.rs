//! Opening the lease table a URL names: PostgreSQL, MariaDB or SQLite.

use std::str::FromStr;
use std::time::Duration;

use lease_core::{DynLeaseStore, Error, ErrorChain};
use lease_sqlx::sqlx::mysql::MySqlConnectOptions;
use lease_sqlx::sqlx::pool::PoolOptions;
use lease_sqlx::sqlx::postgres::PgConnectOptions;
use lease_sqlx::sqlx::sqlite::SqliteConnectOptions;
use lease_sqlx::sqlx::{ConnectOptions, Connection, Database, Pool};
use lease_sqlx::{MySqlLeaseStore, PgLeaseStore, SQLITE_BUSY_TIMEOUT, SqliteLeaseStore, TableName};

use crate::Failure;

/// How long connecting may take before the tool gives up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long one statement may take, once connected, before the tool gives up on it.
pub(crate) const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// The databases the tool reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Postgres,
    MySql,
    Sqlite,
}

/// Which database `url` names, from its scheme.
fn kind(url: &str) -> Option<Kind> {
    let scheme = url.split_once(':')?.0.to_ascii_lowercase();
    match scheme.as_str() {
        "postgres" | "postgresql" => Some(Kind::Postgres),
        "mysql" | "mariadb" => Some(Kind::MySql),
        "sqlite" => Some(Kind::Sqlite),
        _ => None,
    }
}

/// `url` with its passwords, if any, replaced by `***`, for messages: the user's (`user:pass@`)
/// and those of the query (`?password=...`, `sslpassword=...`, which sqlx reads too).
pub(crate) fn redact(url: &str) -> String {
    let url = redact_userinfo(url);
    let Some((base, query)) = url.split_once('?') else {
        return url;
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _))
                if key.eq_ignore_ascii_case("password")
                    || key.eq_ignore_ascii_case("sslpassword") =>
            {
                format!("{key}=***")
            }
            _ => pair.to_owned(),
        })
        .collect();
    format!("{base}?{}", query.join("&"))
}

/// `url` with the password of its user's part, if any, replaced by `***`.
fn redact_userinfo(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    // The user's part ends at the last `@`: a password that was not percent-encoded may hold
    // `/`, `?` or `@` itself. An `@` in the query hides more than the password, never less.
    let Some(at) = rest.rfind('@') else {
        return url.to_owned();
    };
    let (userinfo, host) = (&rest[..at], &rest[at + 1..]);
    match userinfo.split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_owned(),
    }
}

/// A lease table opened through the driver its URL names.
pub(crate) enum Store {
    Postgres(PgLeaseStore),
    MySql(MySqlLeaseStore),
    Sqlite(SqliteLeaseStore),
}

impl Store {
    /// The store, as every command but `check` uses it.
    pub(crate) fn leases(&self) -> &DynLeaseStore {
        match self {
            Self::Postgres(store) => store,
            Self::MySql(store) => store,
            Self::Sqlite(store) => store,
        }
    }

    /// The store's check of the table (`SqlStore::verify`).
    pub(crate) async fn verify(&self) -> Result<(), Error> {
        match self {
            Self::Postgres(store) => store.verify().await,
            Self::MySql(store) => store.verify().await,
            Self::Sqlite(store) => store.verify().await,
        }
    }
}

/// Connects to the database `url` names, and the lease table `table` in it.
pub(crate) async fn open(url: &str, table: &TableName) -> Result<Store, Failure> {
    let kind = kind(url).ok_or_else(|| {
        Failure::Usage(format!(
            "unsupported database URL {}: expected postgres://, mysql://, mariadb:// or sqlite:",
            redact(url)
        ))
    })?;
    let cannot = |why: String| Failure::Failed(format!("cannot connect to {}: {why}", redact(url)));
    let invalid = |error: lease_sqlx::sqlx::Error| {
        Failure::Usage(format!("invalid database URL {}: {error}", redact(url)))
    };
    Ok(match kind {
        Kind::Postgres => {
            let options = PgConnectOptions::from_str(url).map_err(invalid)?;
            let pool = pool_of_one(options).await.map_err(cannot)?;
            // A release notifies, so instances that listen take the lease at once.
            Store::Postgres(PgLeaseStore::on_table(pool, table).with_notifications(true))
        }
        Kind::MySql => {
            // sqlx knows MariaDB by the MySQL scheme.
            let url = match url.split_once("://") {
                Some((scheme, rest)) if scheme.eq_ignore_ascii_case("mariadb") => {
                    format!("mysql://{rest}")
                }
                _ => url.to_owned(),
            };
            let options = MySqlConnectOptions::from_str(&url).map_err(invalid)?;
            let pool = pool_of_one(options).await.map_err(cannot)?;
            Store::MySql(MySqlLeaseStore::on_table(pool, table))
        }
        Kind::Sqlite => {
            // Never creates the file: a wrong path is an error, not an empty database.
            let options = SqliteConnectOptions::from_str(url)
                .map_err(|e| Failure::Usage(format!("invalid SQLite URL {url}: {e}")))?
                .create_if_missing(false);
            // The busy timeout, so a read waits out the services' writes; the journal mode is
            // left as the services set it.
            let pool = pool_of_one(options.busy_timeout(SQLITE_BUSY_TIMEOUT))
                .await
                .map_err(cannot)?;
            Store::Sqlite(SqliteLeaseStore::on_table(pool, table))
        }
    })
}

/// A pool of one connection on `options`, whose first connection is made on its own, within
/// [`CONNECT_TIMEOUT`], to tell why it fails: a pool retries a connection the server refuses
/// until its timeout and then says only that it timed out, where one connection says why (the
/// server refused it, the host is unknown, the password is wrong). The error is the reason,
/// for the message.
async fn pool_of_one<DB: Database>(
    options: <DB::Connection as Connection>::Options,
) -> Result<Pool<DB>, String> {
    match tokio::time::timeout(CONNECT_TIMEOUT, options.connect()).await {
        Err(_) => {
            return Err(format!("no answer within {} s", CONNECT_TIMEOUT.as_secs()));
        }
        Ok(Err(error)) => return Err(ErrorChain(&error).to_string()),
        Ok(Ok(connection)) => {
            // The pool makes its own; this one only told that the server answers.
            let _ = connection.close().await;
        }
    }
    PoolOptions::<DB>::new()
        .max_connections(1)
        .acquire_timeout(CONNECT_TIMEOUT)
        .connect_with(options)
        .await
        .map_err(|error| ErrorChain(&error).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knows_each_database_by_its_scheme() {
        assert_eq!(kind("postgres://h/db"), Some(Kind::Postgres));
        assert_eq!(kind("postgresql://h/db"), Some(Kind::Postgres));
        assert_eq!(kind("mysql://h/db"), Some(Kind::MySql));
        assert_eq!(kind("MariaDB://h/db"), Some(Kind::MySql));
        assert_eq!(kind("sqlite:leases.db"), Some(Kind::Sqlite));
        assert_eq!(kind("sqlite://leases.db"), Some(Kind::Sqlite));
        assert_eq!(kind("redis://h"), None);
        assert_eq!(kind("leases.db"), None);
    }

    #[test]
    fn never_shows_a_password() {
        assert_eq!(
            redact("postgres://app:s3cret@db:5432/app?sslmode=require"),
            "postgres://app:***@db:5432/app?sslmode=require"
        );
        assert_eq!(redact("mysql://root@db/test"), "mysql://root@db/test");
        assert_eq!(redact("sqlite:leases.db"), "sqlite:leases.db");
        assert_eq!(redact("postgres://u:p@ss@db/x"), "postgres://u:***@db/x");
        // Not percent-encoded: a `/` in the password hides nothing.
        assert_eq!(redact("postgres://u:pa/ss@db/x"), "postgres://u:***@db/x");
        assert_eq!(
            redact("mysql://u:p/a?s@db:3306/x?ssl-mode=required"),
            "mysql://u:***@db:3306/x?ssl-mode=required"
        );
    }
}
