//! [`TransactionEnded`]: the refusal to commit a fenced transaction that had already ended inside
//! its work.
//!
//! Why: on MariaDB some statements end the transaction they run in without an error the work
//! would see: data definition (`CREATE`, `ALTER`, `DROP`), `TRUNCATE` and `LOCK TABLES` commit
//! it first, and so does a `COMMIT` or `ROLLBACK` the work sends itself. A deadlock (1213) or a
//! Galera abort rolls it back and ends it too, and work that catches that error and goes on
//! (retrying the statement in place) writes on without one. Every later statement then commits
//! on its own, outside the lease's check. The check and the `COMMIT` at the end would still pass
//! (the check's write commits on its own, and the `COMMIT` has nothing to do) and answer `Ok`,
//! or fail and answer that nothing was committed, where some writes were. So on MariaDB the
//! messages that end a fenced transaction first ask whether a transaction is still open
//! (`@@in_transaction`), and fail, naming [`TRANSACTION_ENDED_MARKER`], when none is: the store
//! answers [`OutcomeUnknown`](lease_core::StoreErrorKind::OutcomeUnknown) with this error inside,
//! and the lease is not marked lost by it.
//!
//! On PostgreSQL data definition is transactional and a failed statement aborts the transaction
//! until its end; only a `COMMIT` or `ROLLBACK` the work sends itself ends it early, after which
//! every statement commits on its own too. PostgreSQL has no flag for an open transaction block,
//! but it tells one apart by its clock: `transaction_timestamp()` is the time the first message of
//! the transaction arrived, and `statement_timestamp()` the time the current message did. In a
//! transaction that began in an earlier message (the fenced transaction's `BEGIN`), the commit's
//! message arrives later, so the two differ; once the work ended the transaction, the commit's
//! message runs as a transaction of its own, which starts with it, and the two are equal. Every
//! message that ends a fenced transaction there first tests that, and fails, naming
//! [`TRANSACTION_ENDED_MARKER`], when they are equal: the commit after a check at the begin with
//! a statement of its own ([`postgres_guard`], prepared where the check was), the check with the
//! commit as the first branch of its test ([`postgres_branch`]; the check's text follows a
//! statement that tests it before the snapshot guard's test).
//!
//! SQLite may roll a transaction back by itself on a full disk, an I/O error or a busy database,
//! and the statements after that run on their own; the fenced transaction's `COMMIT` then fails
//! (no transaction is active), which the store reads the same way.
//!
//! What no guard sees: work that ends the transaction and begins another (`COMMIT` then `BEGIN`,
//! or `COMMIT AND CHAIN`); the messages then end the second one, as if it were the fenced
//! transaction.

use std::fmt;

/// The text the guards raise (MariaDB's `SIGNAL`'s message text, PostgreSQL's failed cast) when
/// the fenced transaction had ended before its commit. It holds no quote, `?` or `$`, so that it
/// sits inside the statements' text as it is.
pub const TRANSACTION_ENDED_MARKER: &str =
    "lease-sql: the fenced transaction had ended inside its work";

/// PostgreSQL's guard: a statement that answers `1` in a message that arrived after its
/// transaction began, and otherwise fails, its cast's message naming
/// [`TRANSACTION_ENDED_MARKER`] (see the module's documentation). It also fails, as any
/// statement does, in a transaction a failed statement aborted.
pub(crate) fn postgres_guard() -> String {
    format!(
        "SELECT CAST(CASE {} ELSE '1' END AS int)",
        postgres_branch()
    )
}

/// PostgreSQL's guard as the first branch of a `CASE` whose result is cast to `int`: the marker
/// when the message runs as a transaction of its own, which the cast then fails on. The test is
/// not a constant (both clocks are read when the statement runs), so the planner cannot fold
/// the branch into an error of its own; a statement that tests more goes on to its own
/// branches.
pub(crate) fn postgres_branch() -> String {
    format!(
        "WHEN statement_timestamp() = transaction_timestamp() THEN '{TRANSACTION_ENDED_MARKER}'"
    )
}

/// SQLite's answer to a `COMMIT` with no transaction open. SQLite may roll a transaction back
/// by itself on a full disk, an I/O error or a busy database; work that goes on after that
/// writes on its own, and the fenced transaction's `COMMIT` then fails with this.
const SQLITE_NO_TRANSACTION: &str = "no transaction is active";

/// Whether the database's `message` says that the fenced transaction had ended before its
/// commit: the guard of MariaDB or PostgreSQL ([`TRANSACTION_ENDED_MARKER`]) or SQLite's `COMMIT`
/// with no transaction open.
pub fn is_transaction_ended(message: &str) -> bool {
    message.contains(TRANSACTION_ENDED_MARKER) || message.contains(SQLITE_NO_TRANSACTION)
}

/// The fenced transaction ended inside its work, before its check and commit: the writes after
/// the statement that ended it committed on their own, outside the lease's check, and those
/// before it committed or rolled back with it (see the module's documentation). The store error
/// that carries it is of the kind [`OutcomeUnknown`](lease_core::StoreErrorKind::OutcomeUnknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransactionEnded;

impl fmt::Display for TransactionEnded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "the fenced transaction ended inside its work (a statement that commits by itself, \
             such as CREATE, ALTER, DROP, TRUNCATE or LOCK TABLES on MariaDB, a COMMIT or a \
             rollback, a deadlock's included): the writes after it committed on their own, outside the lease's check",
        )
    }
}

impl std::error::Error for TransactionEnded {}

impl TransactionEnded {
    /// Whether `error`, a fenced transaction's answer, says its work ended the transaction
    /// itself: its source is a `TransactionEnded`.
    pub fn caused(error: &lease_core::Error) -> bool {
        std::error::Error::source(error).is_some_and(|source| source.is::<Self>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_is_found_in_the_servers_message() {
        assert!(is_transaction_ended(
            "lease-sql: the fenced transaction had ended inside its work"
        ));
        assert!(is_transaction_ended(
            "cannot commit - no transaction is active"
        ));
        assert!(!is_transaction_ended(
            "lease-sql: the lease is no longer held"
        ));
    }

    #[test]
    fn the_marker_needs_no_quoting() {
        assert!(!TRANSACTION_ENDED_MARKER.contains(['\'', '"', '?', '$', '\\']));
    }
}
