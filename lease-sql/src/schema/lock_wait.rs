//! How long an upgrade waits for the table: the bound, how each dialect's upgrade sets it, and
//! the error that says what to do when a transaction holds the table for longer.
//!
//! An `ALTER TABLE` needs the table to itself (PostgreSQL's `ACCESS EXCLUSIVE` lock, MariaDB's
//! exclusive metadata lock), so it waits for every transaction that has read or written the
//! table to end, and every statement on the table that comes after it waits behind it: every
//! renewal of every holder. Unbounded, one transaction left open (a console, a stuck job) would
//! hold up the whole fleet's renewals, and the upgrade, for as long as it stays open. Bounded,
//! the upgrade gives up after [`LOCK_WAIT`], the table as it was, and the statements queued
//! behind it go on.

use std::fmt;
use std::time::Duration;

use lease_core::{BoxError, Error};

/// The longest an upgrade waits for a lock on the table: as long as a SQLite connection of the
/// store waits for another's write ([`SQLITE_BUSY_TIMEOUT`](crate::SQLITE_BUSY_TIMEOUT)), and
/// short beside a lease's renewal period.
pub(crate) const LOCK_WAIT: Duration = crate::SQLITE_BUSY_TIMEOUT;

/// PostgreSQL: the upgrade's first statement. `SET LOCAL` lasts until the end of the
/// transaction: the upgrade is one simple-protocol message ([`Execute::batch`]: lease-sqlx's
/// `raw_sql`, diesel-async's `batch_execute`), which PostgreSQL runs as one implicit
/// transaction, so the bound covers every statement of the upgrade and the pooled connection
/// keeps its own setting afterwards. Run in a migration tool's transaction, it covers that
/// transaction.
///
/// [`Execute::batch`]: crate::Execute::batch
pub(super) fn postgres() -> String {
    format!("SET LOCAL lock_timeout = '{}s';\n", LOCK_WAIT.as_secs())
}

/// MariaDB: what comes before each of the upgrade's `UPDATE`s (MariaDB 10.1.2 and later): the
/// row locks it waits for (another transaction that wrote a lease row and stays open) and the
/// table's metadata lock (`LOCK TABLES`, a backup's read lock) bounded as the `ALTER TABLE`'s
/// `WAIT` bounds both, for that statement alone, rather than by
/// `innodb_lock_wait_timeout` (50 s by default), while every renewal of a row it locked waits
/// behind it.
pub(super) fn mysql_statement() -> String {
    format!(
        "SET STATEMENT innodb_lock_wait_timeout = {0}, lock_wait_timeout = {0} FOR ",
        LOCK_WAIT.as_secs()
    )
}

/// MariaDB: the clause after `ALTER TABLE name` (MariaDB 10.3 and later), which sets
/// `lock_wait_timeout` for that statement alone, so there is no session setting to put back.
pub(super) fn mysql() -> String {
    format!(" WAIT {}", LOCK_WAIT.as_secs())
}

/// Whether a database's `message` says that a statement gave up waiting for a lock:
/// PostgreSQL's 55P03 (`canceling statement due to lock timeout`), MariaDB's 1205 (`Lock wait
/// timeout exceeded`), SQLite's busy timeout (`database is locked`). Read from the message, as
/// every driver has it (diesel keeps no code); a PostgreSQL server that words its messages in
/// another language is not recognised, and its error is reported as it is.
pub(crate) fn timed_out(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    ["lock timeout", "lock wait timeout", "database is locked"]
        .iter()
        .any(|phrase| message.contains(phrase))
}

/// `error`, a store error of an upgrade that gave up waiting for the table, with its cause
/// saying so and what to do: its kind (transient) and operation unchanged. Any other error as
/// it is.
pub(crate) fn explained(error: Error) -> Error {
    match error {
        Error::Store {
            operation,
            name,
            kind,
            source,
        } => Error::store_of_kind(operation, name.as_ref(), kind, LockWaitTimedOut { source }),
        other => other,
    }
}

/// Why an upgrade failed when another transaction held the table for longer than
/// [`LOCK_WAIT`]; its source is the database's error.
struct LockWaitTimedOut {
    source: BoxError,
}

impl fmt::Display for LockWaitTimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the upgrade gave up waiting for the table (it waits at most {} s, so as not to hold \
             up the leases' statements queued behind it), which another transaction held: one \
             still open that read or wrote it, or a change of its shape; the table's shape is \
             as it was: run the upgrade again when no long transaction holds the table",
            LOCK_WAIT.as_secs()
        )
    }
}

impl fmt::Debug for LockWaitTimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockWaitTimedOut")
            .field("source", &self.source)
            .finish()
    }
}

impl std::error::Error for LockWaitTimedOut {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}

#[cfg(test)]
mod tests {
    use lease_core::{ErrorChain, Operation, StoreErrorKind};

    use super::*;

    #[test]
    fn each_databases_lock_timeout_is_recognised_and_explained() {
        for message in [
            "canceling statement due to lock timeout",
            "Lock wait timeout exceeded; try restarting transaction",
            "database is locked",
        ] {
            assert!(timed_out(message), "{message}");
        }
        for message in [
            "column \"fence\" does not exist",
            "canceling statement due to statement timeout",
            "deadlock detected",
        ] {
            assert!(!timed_out(message), "{message}");
        }
        let error = explained(Error::store_of_kind(
            Operation::Setup,
            None,
            StoreErrorKind::Transient,
            "canceling statement due to lock timeout",
        ));
        assert_eq!(error.store_error_kind(), Some(StoreErrorKind::Transient));
        let line = ErrorChain(&error).to_string();
        assert!(line.starts_with("lease store failed to set up: "), "{line}");
        assert!(
            line.contains("run the upgrade again when no long transaction holds the table"),
            "{line}"
        );
        assert!(
            line.ends_with(": canceling statement due to lock timeout"),
            "{line}"
        );
    }
}
