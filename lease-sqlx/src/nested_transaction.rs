//! [`NestedTransaction`]: a fenced commit asked of a transaction inside another.

use std::fmt;

/// A store error's source when [`commit_fenced`](crate::commit_fenced) was given a nested
/// transaction (a savepoint, from `tx.begin()`): the message's `COMMIT` would have committed
/// the transaction around it too, so nothing was sent. The nested transaction is rolled back
/// as it is dropped; the outer one stays open, its writes uncommitted. Fence the outermost
/// transaction instead: check with [`SqlStore::fence`](lease_sql::SqlStore::fence) inside the
/// nested one, and commit the outermost with `commit_fenced`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NestedTransaction {
    pub(crate) depth: usize,
}

impl NestedTransaction {
    /// How deep the transaction was: 2 for a savepoint inside the outermost transaction.
    pub fn depth(&self) -> usize {
        self.depth
    }
}

impl fmt::Display for NestedTransaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a fenced commit ends the outermost transaction, and this one is nested (depth {}): \
             its COMMIT would commit the transaction around it",
            self.depth
        )
    }
}

impl std::error::Error for NestedTransaction {}
