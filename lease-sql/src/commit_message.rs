//! [`CommitMessage`]: the message that ends a fenced transaction, and how many statements it
//! holds, so that a failure after its `COMMIT` is told from one before it.

use crate::AfterCommit;

/// Statements that end a fenced transaction, sent as one simple-protocol message, the last of
/// them its `COMMIT`, with their number.
///
/// Why the number: a message that goes on after its `COMMIT` ([`AfterCommit::Begin`]) can fail
/// after the commit succeeded. PostgreSQL holds off a cancel (`pg_cancel_backend`, a statement
/// timeout) that arrives while it writes the commit, and raises it at the start of the
/// message's next statement; MariaDB may stop a multi-statement message killed in its `COMMIT`
/// at the next statement. The answer is then an error, though the transaction committed. The
/// driver tells how many of the message's statements completed before the one that failed
/// ([`ExecuteOn::batch_counted_on`](crate::ExecuteOn::batch_counted_on)); as many as this
/// message holds means the `COMMIT` was among them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitMessage {
    sql: String,
    statements: usize,
}

impl CommitMessage {
    /// `sql`, `statements` statements whose last is the `COMMIT`. A compound statement counts
    /// as one where it returns no result set, as the server then answers it once (MariaDB's
    /// checks do not).
    pub(crate) fn new(sql: String, statements: usize) -> Self {
        Self { sql, statements }
    }

    /// A `COMMIT` alone.
    pub(crate) fn commit() -> Self {
        Self::new("COMMIT".to_owned(), 1)
    }

    /// The message's text, without parameters.
    pub fn sql(&self) -> &str {
        &self.sql
    }

    /// How many statements the message holds, the `COMMIT` the last of them.
    pub fn statements(&self) -> usize {
        self.statements
    }

    /// The text with what `then` puts after the `COMMIT`, as it goes out.
    pub(crate) fn followed_by(&self, then: AfterCommit) -> String {
        format!("{}{}", self.sql, then.suffix())
    }

    /// Whether a message [`followed_by`](CommitMessage::followed_by) something, of which
    /// `completed` statements completed before one failed, had committed: every statement of
    /// this message, the `COMMIT` included, had.
    pub(crate) fn committed_before(&self, completed: usize) -> bool {
        completed >= self.statements
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_once_every_statement_through_the_commit_completed() {
        let message = CommitMessage::new("SELECT 1;\nCOMMIT".to_owned(), 2);
        assert_eq!(
            message.followed_by(AfterCommit::Begin),
            "SELECT 1;\nCOMMIT;\nBEGIN"
        );
        assert_eq!(message.followed_by(AfterCommit::Idle), "SELECT 1;\nCOMMIT");
        assert!(!message.committed_before(0), "the check failed");
        assert!(!message.committed_before(1), "the commit failed");
        assert!(
            message.committed_before(2),
            "what followed the commit failed"
        );
        assert!(CommitMessage::commit().committed_before(1));
        assert!(!CommitMessage::commit().committed_before(0));
    }
}
