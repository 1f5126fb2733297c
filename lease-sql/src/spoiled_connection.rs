//! [`spoiled_connection`]: whether a fenced transaction's connection may go back to its pool
//! after the transaction failed.

use lease_core::{Error, StoreErrorKind};

use crate::{Dialect, TransactionEnded};

/// Why the connection of a fenced transaction on `dialect` that failed with `error` must not be
/// used again (its pool should close it), or `None` when it may go back to its pool:
///
/// - the server refused a statement as read-only (a standby, a demoted primary, a MariaDB
///   server set `read_only`): the pool's next connection should reach whatever server the URL
///   names now;
/// - on PostgreSQL and MariaDB, the work ended the transaction itself ([`TransactionEnded`]):
///   the session may then hold what no rollback releases, such as the table locks of MariaDB's
///   `LOCK TABLES` (which commits the transaction first, and whose locks outlive it) or a
///   setting the work made for the session once its transaction had ended, so the store's next
///   statement on it could fail, and other sessions wait for its locks. Not on SQLite, whose
///   transaction ends so only by SQLite's own rollback or the work's `COMMIT` or `ROLLBACK`,
///   which leave nothing behind: its connection goes back to the pool once it is outside any
///   transaction (an in-memory database lives only as long as its connections).
pub fn spoiled_connection(dialect: Dialect, error: &Error) -> Option<&'static str> {
    if error.store_error_kind() == Some(StoreErrorKind::ReadOnly) {
        Some("the server is read-only")
    } else if dialect != Dialect::Sqlite && TransactionEnded::caused(error) {
        Some("the work ended its transaction itself, and its session may hold locks")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use lease_core::Operation;

    use super::*;

    fn failed(kind: StoreErrorKind, source: impl Into<lease_core::BoxError>) -> Error {
        Error::store_of_kind(Operation::Fence, None, kind, source)
    }

    #[test]
    fn a_read_only_server_spoils_its_connection_everywhere() {
        for dialect in [Dialect::Postgres, Dialect::MySql, Dialect::Sqlite] {
            let refused = failed(StoreErrorKind::ReadOnly, "read-only");
            assert!(
                spoiled_connection(dialect, &refused).is_some(),
                "{dialect:?}"
            );
        }
    }

    #[test]
    fn an_ended_transaction_spoils_a_servers_connection_not_sqlites() {
        let ended = failed(StoreErrorKind::OutcomeUnknown, TransactionEnded);
        assert!(spoiled_connection(Dialect::Postgres, &ended).is_some());
        assert!(spoiled_connection(Dialect::MySql, &ended).is_some());
        assert_eq!(spoiled_connection(Dialect::Sqlite, &ended), None);
        // Any other failure leaves the connection to its pool.
        let lost = failed(StoreErrorKind::OutcomeUnknown, "connection reset");
        assert_eq!(spoiled_connection(Dialect::MySql, &lost), None);
    }
}
