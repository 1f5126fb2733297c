//! [`spoiled_connection`]: whether a fenced transaction's connection may go back to its pool
//! after the transaction failed.

use lease_core::{Error, StoreErrorKind};

use crate::TransactionEnded;

/// Why the connection of a fenced transaction that failed with `error` must not be used again
/// (its pool should close it), or `None` when it may go back to its pool:
///
/// - the server refused a statement as read-only (a standby, a demoted primary, a MariaDB
///   server set `read_only`): the pool's next connection should reach whatever server the URL
///   names now;
/// - the work ended the transaction itself ([`TransactionEnded`]): the session may then hold
///   what no rollback releases, such as the table locks of MariaDB's `LOCK TABLES` (which
///   commits the transaction first, and whose locks outlive it) or a global read lock, so the
///   store's next statement on it would fail, and other sessions wait for its locks.
pub fn spoiled_connection(error: &Error) -> Option<&'static str> {
    if error.store_error_kind() == Some(StoreErrorKind::ReadOnly) {
        Some("the server is read-only")
    } else if std::error::Error::source(error).is_some_and(|source| source.is::<TransactionEnded>())
    {
        Some("the work ended its transaction itself, and its session may hold locks")
    } else {
        None
    }
}
