//! [`SnapshotIsolation`]: PostgreSQL's refusal to check a lease with the commit of a transaction
//! that reads from one snapshot (`REPEATABLE READ`, `SERIALIZABLE`).
//!
//! Why: the check with the commit updates the lease's row at the transaction's end. Under
//! `READ COMMITTED` that update sees the row's latest version. Under a snapshot it finds the
//! version of the transaction's first statement: when a renewal committed since (in a
//! transaction longer than the renewal interval, always), the update fails with a serialization
//! failure, and the transaction's work is lost for a lease still held. So on PostgreSQL the
//! messages that check with the commit (and the ones that begin such a transaction) run the
//! guard's statement before the check (in the commit's message, after the guard of
//! [`TransactionEnded`](crate::TransactionEnded)), which raises an error carrying [`SNAPSHOT_MARKER`] and the
//! level under a snapshot. A fenced transaction of the store's own then checks at its start,
//! where the check is the transaction's first statement and so sees the latest row; a
//! transaction of the caller's gets [`SnapshotIsolation`], and nothing is marked lost.
//!
//! The check itself (PostgreSQL's, wherever it runs) matches the row on holder and fence, locks
//! it and only then reads the expiry, so under a snapshot a renewal since fails it with a
//! serialization failure rather than a report that the lease is gone. What a snapshot still
//! cannot show is a lease acquired after it was taken: the check then matches no row, and the
//! row it sees holds an older fence (or nothing). When the check matched no row, a second
//! statement ([`Statements::unmatched_fence`](crate::Statements::unmatched_fence)) tells that
//! apart from a lease taken over or released (a fence as great as the lease's, fences only
//! grow) and fails naming [`SNAPSHOT_PREDATES_MARKER`] and the level: [`SnapshotIsolation`]
//! again, marking nothing lost.
//!
//! MariaDB's `UPDATE` reads the latest version of the row whatever the isolation level, and
//! SQLite checks at the start: neither has the guard. With `innodb_snapshot_isolation` on (the
//! default from MariaDB 11.6.2), a transaction that read before a renewal committed cannot
//! update the row: the check fails with error 1020, which
//! [`mysql_error_kind`](crate::mysql_error_kind) reads as a
//! [`Conflict`](lease_core::StoreErrorKind::Conflict), nothing committed.

use std::fmt;

/// The text the guard's error carries, followed by the transaction's isolation level. It holds
/// no quote, `?` or `$`, so that it sits inside the statements' text as it is.
pub const SNAPSHOT_MARKER: &str = "lease-sql: the check with the commit needs read committed, not ";

/// PostgreSQL's guard: one statement that answers `1` under `READ COMMITTED` (and `READ
/// UNCOMMITTED`, which PostgreSQL runs as `READ COMMITTED`) and otherwise
/// fails, its cast's message naming [`SNAPSHOT_MARKER`] and the level. The level is not a
/// constant, so the planner cannot fold the `ELSE` branch into an error of its own.
pub(crate) fn snapshot_guard() -> String {
    format!("SELECT CAST(CASE {} END AS int)", snapshot_branches())
}

/// The guard's test as the last branches of a `CASE` whose result is cast to `int`: `'1'` under
/// `READ COMMITTED`, else [`SNAPSHOT_MARKER`] and the level. For a guard that tests more first.
pub(crate) fn snapshot_branches() -> String {
    format!(
        "WHEN current_setting('transaction_isolation') IN ('read committed', 'read uncommitted') THEN '1' \
         ELSE '{SNAPSHOT_MARKER}' || current_setting('transaction_isolation')"
    )
}

/// The text PostgreSQL's check raises, followed by the transaction's isolation level, when it
/// runs in a transaction whose snapshot was taken before the lease was acquired (see the
/// module's docs). Like [`SNAPSHOT_MARKER`], it needs no quoting.
pub const SNAPSHOT_PREDATES_MARKER: &str =
    "lease-sql: the snapshot of this transaction predates the acquisition of the lease, at ";

/// The isolation level named in the database's `message` when it is the guard's
/// refusal; `None` for every other message.
pub fn snapshot_refusal(message: &str) -> Option<&str> {
    level_after(message, SNAPSHOT_MARKER)
}

/// What the database's `message` says of a snapshot: the refusal of the guard
/// ([`SNAPSHOT_MARKER`]) or of the check ([`SNAPSHOT_PREDATES_MARKER`]), as the error to answer;
/// `None` for every other message.
pub fn snapshot_isolation(message: &str) -> Option<SnapshotIsolation> {
    if let Some(level) = snapshot_refusal(message) {
        return Some(SnapshotIsolation::new(level));
    }
    level_after(message, SNAPSHOT_PREDATES_MARKER).map(SnapshotIsolation::predating)
}

/// The isolation level that follows `marker` in `message`, up to the quote or the line's end
/// around it.
fn level_after<'m>(message: &'m str, marker: &str) -> Option<&'m str> {
    let (_, after) = message.split_once(marker)?;
    let level = after
        .split(['"', '\'', '\n'])
        .next()
        .unwrap_or(after)
        .trim();
    Some(level)
}

/// A fenced check that a transaction reading from a snapshot (PostgreSQL's `REPEATABLE READ` or
/// `SERIALIZABLE`) cannot make: the check with the commit, refused because any renewal of the
/// lease since the snapshot would fail it; or a check whose snapshot was taken before the lease
/// was acquired ([`predates_the_lease`](SnapshotIsolation::predates_the_lease)), which cannot
/// see the lease at all. Nothing was committed and the lease is not marked lost. (A snapshot
/// taken after the acquisition reads the same when the lease's row was lost since, by a
/// failover that lost the acquisition or a delete: from within the snapshot the two cannot be
/// told apart, so the lease is left to its next renewal, which fails and reports the loss.) Check at the
/// start of such a transaction instead ([`SqlStore::fence`](crate::SqlStore::fence) as its
/// first statement), or let the store's fenced transactions do it: they switch to the check
/// with the `BEGIN` by themselves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotIsolation {
    level: String,
    predates_the_lease: bool,
}

impl SnapshotIsolation {
    /// The refusal of a transaction at isolation level `level`, as PostgreSQL names it
    /// (`repeatable read`, `serializable`).
    pub fn new(level: impl Into<String>) -> Self {
        Self {
            level: level.into(),
            predates_the_lease: false,
        }
    }

    /// The check of a lease acquired after the snapshot of the transaction it ran in, at
    /// isolation level `level`.
    pub fn predating(level: impl Into<String>) -> Self {
        Self {
            level: level.into(),
            predates_the_lease: true,
        }
    }

    /// Whether the transaction's snapshot was taken before the lease was acquired (else the
    /// check with the commit was refused).
    pub fn predates_the_lease(&self) -> bool {
        self.predates_the_lease
    }

    /// The transaction's isolation level, as PostgreSQL names it.
    pub fn level(&self) -> &str {
        &self.level
    }
}

impl fmt::Display for SnapshotIsolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = self.level.to_uppercase();
        if self.predates_the_lease {
            write!(
                f,
                "the fenced check ran in a transaction at {level} whose snapshot does not show \
                 the lease: taken before the lease was acquired (acquire the lease before the \
                 transaction begins, or check at its start: `fence` as its first statement), or \
                 the lease's row was lost since (a failover that lost the acquisition, a delete), \
                 which the lease's next renewal tells"
            )
        } else {
            write!(
                f,
                "the fenced check with the commit needs READ COMMITTED, and this transaction runs \
                 at {level}: check at its start instead (`fence` as its first statement)"
            )
        }
    }
}

impl std::error::Error for SnapshotIsolation {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_level_is_read_from_the_servers_message() {
        assert_eq!(
            snapshot_refusal(
                "invalid input syntax for type integer: \"lease-sql: the check with the commit needs read committed, not serializable\""
            ),
            Some("serializable")
        );
        assert_eq!(
            snapshot_refusal(&format!("{SNAPSHOT_MARKER}repeatable read")),
            Some("repeatable read")
        );
        assert_eq!(snapshot_refusal("division by zero"), None);
        assert_eq!(
            snapshot_refusal(crate::NOT_HELD_MARKER),
            None,
            "the lease's own refusal is another"
        );
    }

    #[test]
    fn the_guard_carries_the_marker_and_needs_no_quoting() {
        assert!(snapshot_guard().contains(SNAPSHOT_MARKER));
        assert!(!SNAPSHOT_MARKER.contains(['\'', '"', '?', '$', '\\']));
        assert!(!SNAPSHOT_PREDATES_MARKER.contains(['\'', '"', '?', '$', '\\']));
    }

    #[test]
    fn each_refusal_is_read_as_its_own() {
        let refused =
            format!("invalid input syntax for type integer: \"{SNAPSHOT_MARKER}serializable\"");
        assert_eq!(
            snapshot_isolation(&refused),
            Some(SnapshotIsolation::new("serializable"))
        );
        let predates = format!(
            "invalid input syntax for type integer: \"{SNAPSHOT_PREDATES_MARKER}repeatable read\""
        );
        assert_eq!(
            snapshot_isolation(&predates),
            Some(SnapshotIsolation::predating("repeatable read"))
        );
        assert_eq!(
            snapshot_refusal(&predates),
            None,
            "a begin that meets it must not move its check"
        );
        assert_eq!(snapshot_isolation(crate::NOT_HELD_MARKER), None);
    }

    #[test]
    fn the_message_names_the_level_and_what_to_do() {
        let message = SnapshotIsolation::new("serializable").to_string();
        assert!(message.contains("SERIALIZABLE"), "{message}");
        assert!(message.contains("READ COMMITTED"), "{message}");
        assert!(message.contains("at its start"), "{message}");
        let message = SnapshotIsolation::predating("repeatable read").to_string();
        assert!(message.contains("REPEATABLE READ"), "{message}");
        assert!(
            message.contains("before the lease was acquired"),
            "{message}"
        );
        assert!(message.contains("acquire the lease before"), "{message}");
        // A fresh snapshot meets the same when the row was lost (a failover): both are named.
        assert!(message.contains("row was lost"), "{message}");
    }
}
