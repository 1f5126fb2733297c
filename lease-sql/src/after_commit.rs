//! [`AfterCommit`]: what [`SqlStore::commit_fenced`](crate::SqlStore::commit_fenced) leaves the
//! connection in once it has committed.

/// What the connection is left in after a fenced commit, for the driver's transaction object
/// that wraps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterCommit {
    /// No transaction: for a driver whose transaction object can be told that the transaction
    /// has ended.
    Idle,
    /// A new, empty transaction (`BEGIN`, in the same message as the commit): for a driver
    /// whose transaction object will end a transaction itself and cannot be told otherwise.
    /// sqlx's `Transaction`, dropped, queues a `ROLLBACK` that goes out with the connection's
    /// next message (the pool's check when it takes the connection back): no round trip of
    /// its own, and no warning from the server about a transaction that is not there (but
    /// where the `BEGIN` itself failed after the commit: see
    /// [`CommitMessage`](crate::CommitMessage)).
    Begin,
}

impl AfterCommit {
    /// The statements that follow the `COMMIT` in the same message.
    pub(crate) fn suffix(self) -> &'static str {
        match self {
            Self::Idle => "",
            Self::Begin => ";\nBEGIN",
        }
    }
}
