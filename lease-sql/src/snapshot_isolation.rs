//! [`SnapshotIsolation`]: PostgreSQL's refusal to check a lease with the commit of a transaction
//! that reads from one snapshot (`REPEATABLE READ`, `SERIALIZABLE`).
//!
//! Why: the check with the commit updates the lease's row at the transaction's end. Under
//! `READ COMMITTED` that update sees the row's latest version. Under a snapshot it finds the
//! version of the transaction's first statement: when a renewal committed since (in a
//! transaction longer than the renewal interval, always), the update fails with a serialization
//! failure, and the transaction's work is lost for a lease still held. So on PostgreSQL the
//! messages that check with the commit (and the ones that begin such a transaction) first run
//! the guard's statement, which raises an error carrying [`SNAPSHOT_MARKER`] and the
//! level under a snapshot. A fenced transaction of the store's own then checks at its start,
//! where the check is the transaction's first statement and so sees the latest row; a
//! transaction of the caller's gets [`SnapshotIsolation`], and nothing is marked lost.
//!
//! MariaDB's `UPDATE` reads the latest version of the row whatever the isolation level, and
//! SQLite checks at the start: neither has the guard.

use std::fmt;

/// The text the guard's error carries, followed by the transaction's isolation level. It holds
/// no quote, `?` or `$`, so that it sits inside the statements' text as it is.
pub const SNAPSHOT_MARKER: &str = "lease-sql: the check with the commit needs read committed, not ";

/// PostgreSQL's guard: one statement that answers `1` under `READ COMMITTED` and otherwise
/// fails, its cast's message naming [`SNAPSHOT_MARKER`] and the level. The level is not a
/// constant, so the planner cannot fold the `ELSE` branch into an error of its own.
pub(crate) fn snapshot_guard() -> String {
    format!(
        "SELECT CAST(CASE WHEN current_setting('transaction_isolation') = 'read committed' THEN '1' \
         ELSE '{SNAPSHOT_MARKER}' || current_setting('transaction_isolation') END AS int)"
    )
}

/// The isolation level named in the database's `message` when it is the guard's
/// refusal; `None` for every other message.
pub fn snapshot_refusal(message: &str) -> Option<&str> {
    let (_, after) = message.split_once(SNAPSHOT_MARKER)?;
    let level = after
        .split(['"', '\'', '\n'])
        .next()
        .unwrap_or(after)
        .trim();
    Some(level)
}

/// A fenced check with the commit refused because the transaction runs under a snapshot
/// (PostgreSQL's `REPEATABLE READ` or `SERIALIZABLE`), where any renewal of the lease since the
/// transaction's snapshot would fail it. Nothing was committed and the lease is not marked
/// lost. Check at the start of such a transaction instead
/// ([`SqlStore::fence`](crate::SqlStore::fence) as its first statement), or let the store's
/// fenced transactions do it: they switch to the check with the `BEGIN` by themselves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotIsolation {
    level: String,
}

impl SnapshotIsolation {
    /// The refusal of a transaction at isolation level `level`, as PostgreSQL names it
    /// (`repeatable read`, `serializable`).
    pub fn new(level: impl Into<String>) -> Self {
        Self {
            level: level.into(),
        }
    }

    /// The transaction's isolation level, as PostgreSQL names it.
    pub fn level(&self) -> &str {
        &self.level
    }
}

impl fmt::Display for SnapshotIsolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the fenced check with the commit needs READ COMMITTED, and this transaction runs at \
             {}: check at its start instead (`fence` as its first statement)",
            self.level.to_uppercase()
        )
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
    }

    #[test]
    fn the_message_names_the_level_and_what_to_do() {
        let message = SnapshotIsolation::new("serializable").to_string();
        assert!(message.contains("SERIALIZABLE"), "{message}");
        assert!(message.contains("READ COMMITTED"), "{message}");
        assert!(message.contains("at its start"), "{message}");
    }
}
