//! [`PreparedFence`]: PostgreSQL's fenced commit as a statement the server prepared once per
//! connection, so that the check sent with the `COMMIT` is neither parsed nor planned again.
//!
//! Why: the fenced commit goes out as one simple-protocol message (the check, then `COMMIT`),
//! and PostgreSQL plans a simple-protocol statement at every call. The check's text (an
//! `UPDATE` in a `WITH`, counted and cast) costs more to plan than to run: on loopback, the plan
//! alone took about as long as a round trip, so the one-message commit was slower than a check
//! sent first as a prepared statement. A statement prepared with SQL's `PREPARE` lives in the
//! session like the driver's own prepared statements, and `EXECUTE` runs its cached plan from a
//! simple-protocol message.
//!
//! How a transaction knows that its connection has the statement: it begins with
//! [`begin`](PreparedFence::begin), `BEGIN` and an `EXECUTE` of a second prepared statement,
//! prepared together with the check, in one message (the round trip the `BEGIN` costs anyway).
//! On a connection that has them, that is all; on one that has not (new, or reset by
//! `DISCARD ALL`), the `EXECUTE` fails before any of the caller's work, the transaction is
//! rolled back and [`prepare`](PreparedFence::prepare) makes them all, and the transaction
//! begins again. Nothing is kept on the client: the server's own list is the truth, whatever reset it.
//! The second statement is the guard of [`SnapshotIsolation`](crate::SnapshotIsolation): it also
//! fails, before any work, where the transaction reads from a snapshot, and the transaction then
//! begins again with the check.
//!
//! The check is prepared twice: as it is, for a transaction that begins with it, and with the
//! guard of [`TransactionEnded`](crate::TransactionEnded) as its first test, for the commit,
//! where it fails when the work ended the transaction (the guard then costs the commit no
//! statement of its own). The guard is also prepared alone, for the commit of a transaction that
//! began with the check. The statements a begin executes (the check, the probe) are prepared
//! after the ones the commits execute, so a connection whose begin found its statement has
//! them too, even where an earlier preparation stopped half-way (a timeout, a cancelled
//! future); only work that deallocates them itself takes them away between the begin and the
//! commit. (Behind a pooler that hands each transaction another server connection, each
//! `PREPARE` may land elsewhere and no order helps: there statements are sent as text,
//! lease-sqlx's `PgProtocol::SimpleInline`.)

use crate::fnv1a::fnv1a;
use crate::{
    CommitMessage, InlineError, Query, is_not_held, is_transaction_ended, snapshot_isolation,
};

/// PostgreSQL's fenced commit as statements prepared once per connection; see the module's
/// documentation. Built by [`Statements`](crate::Statements) for its table; `None` on MariaDB
/// and SQLite.
#[derive(Debug, Clone)]
pub struct PreparedFence {
    check_name: String,
    commit_name: String,
    ready_name: String,
    prepare: [String; 4],
    begin: String,
    execute: String,
    begin_checked: String,
    commit_after_check: CommitMessage,
}

impl PreparedFence {
    /// The statements for `check`, the fenced check (a statement of three parameters, name,
    /// holder and fence, that raises an error when the lease is gone), `at_commit`, the same
    /// check that first fails when the work ended the transaction
    /// ([`TransactionEnded`](crate::TransactionEnded)), `guard`, the probe, which fails where
    /// the check with the commit cannot run ([`SnapshotIsolation`](crate::SnapshotIsolation)),
    /// and `ended`, the guard of [`TransactionEnded`](crate::TransactionEnded) alone, for the
    /// commit of a transaction checked at its start. Their names carry a hash of the four
    /// texts, so stores on different tables, and versions of this crate with other texts, never
    /// take each other's.
    pub(crate) fn new(check: &str, at_commit: &str, guard: &str, ended: &str) -> Self {
        let check_name = format!(
            "lease_fence_{:016x}",
            fnv1a(&format!("{check}\n{at_commit}\n{guard}\n{ended}"))
        );
        let commit_name = format!("{check_name}_commit");
        let ended_name = format!("{check_name}_ended");
        let ready_name = format!("{check_name}_ready");
        Self {
            // The statements a begin executes (the check, the probe) come last: a connection that
            // has either has the ones its commit executes.
            prepare: [
                format!("PREPARE {commit_name} (text, text, int8) AS {at_commit}"),
                format!("PREPARE {ended_name} AS {ended}"),
                format!("PREPARE {check_name} (text, text, int8) AS {check}"),
                format!("PREPARE {ready_name} AS {guard}"),
            ],
            commit_after_check: CommitMessage::new(format!("EXECUTE {ended_name};\nCOMMIT"), 2),
            begin: format!("BEGIN;\nEXECUTE {ready_name}"),
            execute: format!("EXECUTE {commit_name}($1, $2, $3);\nCOMMIT"),
            begin_checked: format!("BEGIN;\nEXECUTE {check_name}($1, $2, $3)"),
            check_name,
            commit_name,
            ready_name,
        }
    }

    /// The beginning of a transaction whose commit runs the prepared check
    /// ([`Statements::prepared_fence_then_commit`](crate::Statements::prepared_fence_then_commit)): `BEGIN`
    /// and an `EXECUTE` that fails, naming [`ready_name`](PreparedFence::ready_name), on a
    /// connection where the statements are not prepared. One simple-protocol message, without
    /// parameters.
    pub fn begin(&self) -> &str {
        &self.begin
    }

    /// What makes the statements: the `PREPARE`s of the check at the commit, of the guard of
    /// [`TransactionEnded`](crate::TransactionEnded), of the check and of the probe, in that
    /// order (the ones a begin executes last, so that a connection where a begin finds its
    /// statement has the ones its commit executes too), each a message of its own
    /// (a statement that already exists fails its `PREPARE` alone; see
    /// [`already_exists`](PreparedFence::already_exists)), without parameters.
    pub fn prepare(&self) -> &[String] {
        &self.prepare
    }

    /// Whether the database's `message` says that a `PREPARE` of
    /// [`prepare`](PreparedFence::prepare) found its statement there already: it names the
    /// statement, in whatever language the server writes its messages in (`lc_messages`, which
    /// a client cannot always change), the only failure of a `PREPARE` that does.
    pub fn already_exists(&self, message: &str) -> bool {
        message.contains(&self.check_name)
    }

    /// The name of the statement [`begin`](PreparedFence::begin) executes.
    pub fn ready_name(&self) -> &str {
        &self.ready_name
    }

    /// The name of the prepared check; the check at the commit, the guard and the probe are
    /// named after it (`_commit`, `_ended`, `_ready`).
    pub fn check_name(&self) -> &str {
        &self.check_name
    }

    /// The commit of a transaction that began with the prepared check
    /// ([`Statements::prepared_begin_then_fence`](crate::Statements::prepared_begin_then_fence)):
    /// the `EXECUTE` of the guard of [`TransactionEnded`](crate::TransactionEnded), which also
    /// fails in a transaction a failed statement aborted, and `COMMIT`, in one message; what
    /// [`Statements::commit_after_check`](crate::Statements::commit_after_check) is on a
    /// connection without the prepared statements.
    pub fn commit_after_check(&self) -> &CommitMessage {
        &self.commit_after_check
    }

    /// The name of the prepared check at the commit, which
    /// [`Statements::prepared_fence_then_commit`](crate::Statements::prepared_fence_then_commit)
    /// executes.
    pub fn commit_name(&self) -> &str {
        &self.commit_name
    }

    /// Whether the database's `message` says that [`begin`](PreparedFence::begin) (or a
    /// transaction that begins with the check) found the statements missing: it names one of
    /// them, in whatever language the server writes its messages in (`prepared statement "…"
    /// does not exist`, `vorbereitete Anweisung »…« existiert nicht`: `lc_messages`, which a
    /// client cannot always change), and it is not one of the check's own refusals, which
    /// name the lease (whose name may hold the statement's).
    pub fn is_missing(&self, message: &str) -> bool {
        message.contains(&self.check_name)
            && !is_not_held(message)
            && !is_transaction_ended(message)
            && snapshot_isolation(message).is_none()
    }

    /// The `EXECUTE` of the check at the commit and `COMMIT` in one self-contained text,
    /// `fence`'s parameters written in as literals ([`Query::inline_postgres`]).
    ///
    /// # Errors
    /// When a text parameter cannot be a literal (a NUL character, which a lease name never
    /// holds).
    pub(crate) fn commit(&self, fence: &Query<'_>) -> Result<CommitMessage, InlineError> {
        let sql = Query {
            sql: std::borrow::Cow::Borrowed(&self.execute),
            params: fence.params.clone(),
        }
        .inline_postgres()?;
        Ok(CommitMessage::new(sql, 2))
    }

    /// `BEGIN` and the check's `EXECUTE`, `fence`'s parameters written in as literals: a
    /// transaction checked at its start, which fails before any work where the connection
    /// lacks the statement.
    ///
    /// # Errors
    /// As [`commit`](PreparedFence::commit).
    pub(crate) fn begin_checked(&self, fence: &Query<'_>) -> Result<String, InlineError> {
        Query {
            sql: std::borrow::Cow::Borrowed(&self.begin_checked),
            params: fence.params.clone(),
        }
        .inline_postgres()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NOT_HELD_MARKER, Param};

    #[test]
    fn names_follow_the_checks_text() {
        let check = "SELECT $1::text, $2::text, $3::int8";
        let a = PreparedFence::new(check, "SELECT 2", "SELECT 1", "SELECT 5");
        let b = PreparedFence::new(
            "SELECT $1::text, $2::text, $3::int8 -- other table",
            "SELECT 2",
            "SELECT 1",
            "SELECT 5",
        );
        let c = PreparedFence::new(check, "SELECT 2", "SELECT 3", "SELECT 5");
        let d = PreparedFence::new(check, "SELECT 4", "SELECT 1", "SELECT 5");
        assert_ne!(a.check_name(), b.check_name());
        assert_ne!(
            a.check_name(),
            c.check_name(),
            "another guard, another name"
        );
        assert_ne!(
            a.check_name(),
            d.check_name(),
            "another check at the commit, another name"
        );
        assert_eq!(
            a.check_name(),
            PreparedFence::new(check, "SELECT 2", "SELECT 1", "SELECT 5").check_name()
        );
        assert!(
            a.check_name().len() <= 63,
            "PostgreSQL truncates longer names"
        );
        assert!(a.ready_name().starts_with(a.check_name()));
        assert!(a.commit_name().starts_with(a.check_name()));
        assert!(
            a.prepare()
                .iter()
                .all(|prepare| prepare.contains(a.check_name())),
            "every statement is told by the check's name"
        );
        let position = |name: &str| {
            let prepare = format!("PREPARE {name} ");
            a.prepare()
                .iter()
                .position(|statement| statement.starts_with(&prepare))
                .unwrap()
        };
        let ended = format!("{}_ended", a.check_name());
        for begins in [a.check_name(), a.ready_name()] {
            for commits in [a.commit_name(), &ended] {
                assert!(
                    position(begins) > position(commits),
                    "{begins} is prepared after {commits}, which a commit after it executes"
                );
            }
        }
    }

    #[test]
    fn the_commit_executes_the_check_with_literals() {
        let fence = PreparedFence::new("SELECT 1", "SELECT 1", "SELECT 3", "SELECT 5");
        let check = Query {
            sql: std::borrow::Cow::Borrowed("unused"),
            params: vec![Param::text("jobs'1"), Param::text("h"), Param::Int(7)],
        };
        let commit = fence.commit(&check).unwrap();
        assert_eq!(commit.statements(), 2);
        assert_eq!(
            commit.sql(),
            format!(
                "EXECUTE {}(E'jobs''1', E'h', (7));\nCOMMIT",
                fence.commit_name()
            )
        );
    }

    #[test]
    fn a_missing_statement_is_told_by_its_name() {
        let fence = PreparedFence::new("SELECT 1", "SELECT 1", "SELECT 3", "SELECT 5");
        let message = format!(
            "prepared statement \"{}\" does not exist",
            fence.ready_name()
        );
        assert!(fence.is_missing(&message));
        let check = format!(
            "prepared statement \"{}\" does not exist",
            fence.check_name()
        );
        assert!(fence.is_missing(&check));
        assert!(!fence.is_missing("prepared statement \"sqlx_s_1\" does not exist"));
        assert!(!fence.is_missing("division by zero"));
        // A server that writes its messages in another language (`lc_messages`).
        let german = format!(
            "vorbereitete Anweisung »{}« existiert nicht",
            fence.ready_name()
        );
        assert!(fence.is_missing(&german));
        // The check's refusal naming a lease whose name holds the statement's is a refusal.
        let refusal = format!(
            "invalid input syntax for type integer: \"{NOT_HELD_MARKER}: {}\"",
            fence.check_name()
        );
        assert!(!fence.is_missing(&refusal));
    }

    #[test]
    fn an_existing_statement_is_told_by_its_name() {
        let fence = PreparedFence::new("SELECT 1", "SELECT 1", "SELECT 3", "SELECT 5");
        for message in [
            format!(
                "prepared statement \"{}\" already exists",
                fence.check_name()
            ),
            format!(
                "vorbereitete Anweisung »{}_ready« existiert bereits",
                fence.check_name()
            ),
        ] {
            assert!(fence.already_exists(&message), "{message}");
        }
        assert!(!fence.already_exists("syntax error at or near \"EXECUTE\""));
    }
}
