//! [`Template`]: a statement's text and which value fills each placeholder.

use crate::{Param, PreparedFence};

/// A value a statement takes, named so that each dialect can put its placeholders in whatever
/// order its SQL needs and repeat one where it has no numbered placeholders (MariaDB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arg {
    /// The lease name.
    Name,
    /// The holder id.
    Holder,
    /// The TTL, the minimum hold or the prune's bound, in microseconds.
    Micros,
}

/// A statement's text and, in binding order, the values of its placeholders.
#[derive(Debug, Clone)]
pub(crate) struct Template {
    pub(crate) sql: String,
    pub(crate) args: &'static [Arg],
}

impl Template {
    pub(crate) fn new(sql: String, args: &'static [Arg]) -> Self {
        Self { sql, args }
    }

    pub(crate) fn params<'a>(&self, name: &'a str, holder: &'a str, micros: i64) -> Vec<Param<'a>> {
        self.args
            .iter()
            .map(|arg| match arg {
                Arg::Name => Param::text(name),
                Arg::Holder => Param::text(holder),
                Arg::Micros => Param::Int(micros),
            })
            .collect()
    }
}

/// The text of every statement of one dialect for one table.
#[derive(Debug, Clone)]
pub(crate) struct DialectSql {
    pub(crate) create_table: String,
    pub(crate) try_acquire: Template,
    pub(crate) renew: Template,
    pub(crate) release: Template,
    pub(crate) inspect: Template,
    pub(crate) list: String,
    /// The fenced check; parameters name, holder, fence on every dialect.
    pub(crate) fence: String,
    /// The fenced check made to raise an error (carrying [`NOT_HELD_MARKER`](crate::NOT_HELD_MARKER))
    /// when the lease is gone, for a simple-protocol message with its parameters inline (name,
    /// holder, fence): before `COMMIT` at a transaction's end, or after `BEGIN` at its start.
    /// `None` where the dialect needs no such message (SQLite, in process: two calls cost no
    /// round trip).
    pub(crate) fence_raising: Option<String>,
    /// Why the fenced check matched no row, asked in the same transaction: it fails, naming
    /// [`SNAPSHOT_PREDATES_MARKER`](crate::SNAPSHOT_PREDATES_MARKER), when the transaction's
    /// snapshot was taken before the lease was acquired, and answers otherwise (the lease is
    /// gone); parameters name, fence. `None` where the check reads the latest row at every
    /// isolation level (MariaDB) or takes the write lock first (SQLite).
    pub(crate) unmatched_fence: Option<String>,
    /// `fence_then_commit` as statements the server prepares once per connection (PostgreSQL,
    /// where a simple-protocol statement is planned at every call); `None` elsewhere.
    pub(crate) prepared_fence: Option<PreparedFence>,
    /// A statement that fails where the check with the commit cannot tell a lease held from one
    /// gone ([`SnapshotIsolation`](crate::SnapshotIsolation): PostgreSQL under a snapshot), run
    /// first in the messages that check with the commit or begin such a transaction; `None`
    /// where every isolation level will do.
    pub(crate) snapshot_guard: Option<String>,
    /// The statement that goes first in a message that checks with the commit through the
    /// check's text: on PostgreSQL one that fails, naming
    /// [`TRANSACTION_ENDED_MARKER`](crate::TRANSACTION_ENDED_MARKER), in a message that no
    /// longer runs in the fenced transaction (the work ended it), and otherwise as
    /// `snapshot_guard` does. `None` where the check carries the first test itself (MariaDB's
    /// compound statement) and needs no second (SQLite checks at the start).
    pub(crate) commit_guard: Option<String>,
    /// [`Statements::commit_after_check`](crate::Statements::commit_after_check): the `COMMIT`
    /// of a fenced transaction checked at its start, where a plain one is not enough.
    pub(crate) commit_after_check: Option<crate::CommitMessage>,
    /// [`Statements::ended_probe`](crate::Statements::ended_probe): a statement that tells
    /// whether the work ended the fenced transaction, sent as a message of its own.
    pub(crate) ended_probe: crate::EndedProbe,
    /// Deleting the rows free for longer than a bound; parameter: the bound in microseconds.
    pub(crate) prune: Template,
}
