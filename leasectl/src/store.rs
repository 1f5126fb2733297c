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

/// `url` with its scheme (up to the first `:`) in lower case, as URLs compare schemes.
fn lower_scheme(url: &str) -> String {
    match url.split_once(':') {
        Some((scheme, rest)) => format!("{}:{rest}", scheme.to_ascii_lowercase()),
        None => url.to_owned(),
    }
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
/// and the value of every `password=` (and `sslpassword=`, any key that ends in `password`)
/// anywhere in it, in the query as in a key/value connection string (`host=db password=s3cret`),
/// quoted or not.
pub(crate) fn redact(url: &str) -> String {
    mask_password_values(&redact_userinfo(url))
}

/// `text` with the value of each key that ends in `password` (in any case), followed by `=`,
/// replaced by `***`. A value ends at `&` or a space, or, quoted as libpq quotes it (`'...'`,
/// `\'` inside), at its closing quote.
fn mask_password_values(text: &str) -> String {
    const KEY: &str = "password";
    // ASCII lower case keeps every byte where it was.
    let lower = text.to_ascii_lowercase();
    let mut masked = String::with_capacity(text.len());
    let (mut copied, mut from) = (0, 0);
    while let Some(found) = lower[from..].find(KEY) {
        let after_key = from + found + KEY.len();
        let rest = text[after_key..].trim_start();
        let Some(value) = rest.strip_prefix('=') else {
            from = after_key;
            continue;
        };
        let value = value.trim_start();
        let start = text.len() - value.len();
        let end = start + value_len(value);
        masked.push_str(&text[copied..start]);
        masked.push_str("***");
        (copied, from) = (end, end);
    }
    masked.push_str(&text[copied..]);
    masked
}

/// The length of the value `value` starts with: up to `&` or a space, or a quoted one up to
/// and with its closing quote (to the end when it has none).
fn value_len(value: &str) -> usize {
    let Some(quoted) = value.strip_prefix('\'') else {
        return value
            .find(|c: char| c == '&' || c.is_whitespace())
            .unwrap_or(value.len());
    };
    let mut chars = quoted.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '\'' => return 1 + at + 1,
            _ => {}
        }
    }
    value.len()
}

/// What a message may say of a URL the tool does not read: its scheme, when it has one (the
/// rest is never shown, as nothing tells where its password is), else that it is not a URL.
fn unsupported(url: &str) -> String {
    let scheme = url
        .split_once(':')
        .map(|(scheme, _)| scheme)
        .filter(|scheme| {
            scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        });
    match scheme {
        Some(scheme) => format!("unsupported database URL scheme {scheme}:"),
        None => "the database URL is not a URL (a key/value connection string such as \
                 `host=db user=app` is not read)"
            .to_owned(),
    }
}

/// `url` with the password of its user's part, if any, replaced by `***`.
fn redact_userinfo(url: &str) -> String {
    // With `//` or without: sqlx also reads `postgres:app:s3cret@db/app` as a URL, with the
    // user's part before its `@`.
    let Some((scheme, separator, rest)) = url
        .split_once("://")
        .map(|(scheme, rest)| (scheme, "://", rest))
        .or_else(|| {
            url.split_once(':')
                .map(|(scheme, rest)| (scheme, ":", rest))
        })
    else {
        return url.to_owned();
    };
    // The user's part ends at the last `@`: a password that was not percent-encoded may hold
    // `/`, `?` or `@` itself. An `@` in the query hides more than the password, never less.
    let Some(at) = rest.rfind('@') else {
        return url.to_owned();
    };
    let (userinfo, host) = (&rest[..at], &rest[at + 1..]);
    match userinfo.split_once(':') {
        Some((user, _password)) => format!("{scheme}{separator}{user}:***@{host}"),
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
    // The scheme in lower case: sqlx reads `SQLite:leases.db` as a file of that name.
    let url = &lower_scheme(url);
    let kind = kind(url).ok_or_else(|| {
        Failure::Usage(format!(
            "{}: expected postgres://, mysql://, mariadb:// or sqlite:",
            unsupported(url)
        ))
    })?;
    // sqlx reads `postgres:app:s3cret@db/app` as a URL with no host, connects to the local
    // server, whose refusal then names the "database" `app:s3cret@db/app`: refused before.
    let (scheme, rest) = url.split_once(':').unwrap_or((url, ""));
    if !matches!(kind, Kind::Sqlite) && !rest.starts_with("//") {
        return Err(Failure::Usage(format!(
            "invalid database URL: a server's URL has `//` after its scheme, as in \
             {scheme}://user@host/database"
        )));
    }
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
                .map_err(|e| Failure::Usage(format!("invalid SQLite URL {}: {e}", redact(url))))?
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
        // Without `//`, which sqlx reads as a URL with the user's part before the `@`.
        assert_eq!(
            redact("postgres:app:s3cret@db/app"),
            "postgres:app:***@db/app"
        );
        assert_eq!(redact("postgres:app@db/app"), "postgres:app@db/app");
        assert_eq!(
            redact("postgres://db/app?user=app&Password=s3cret&sslpassword=k3y&sslmode=require"),
            "postgres://db/app?user=app&Password=***&sslpassword=***&sslmode=require"
        );
    }

    /// libpq's key/value form, which the tool does not read, still never shows its password:
    /// quoted or not, spaced around `=` or not.
    #[test]
    fn never_shows_a_key_value_password() {
        assert_eq!(
            redact("host=db user=app password=s3cret dbname=app"),
            "host=db user=app password=*** dbname=app"
        );
        assert_eq!(
            redact("host=db password = 's3 \\'cret' dbname=app"),
            "host=db password = *** dbname=app"
        );
        assert_eq!(redact("PASSWORD='unterminated"), "PASSWORD=***");
        assert_eq!(redact("password="), "password=***");
        assert_eq!(redact("passwordless host=db"), "passwordless host=db");
        for text in [
            "host=db user=app password=s3cret dbname=app",
            "hostaddr=::1 password=s3cret",
            "s3cret",
        ] {
            assert!(!unsupported(text).contains("s3cret"), "{text}");
        }
        assert_eq!(
            unsupported("redis://:s3cret@localhost/0"),
            "unsupported database URL scheme redis:"
        );
    }
}
