//! [`FencedConnection`]: the pooled connection a fenced transaction runs on, closed rather than
//! given back when the transaction's future is dropped before it ended.

use sqlx::Database;
use sqlx::pool::PoolConnection;

/// The connection [`fenced_with`](crate::fenced_with) took from the pool.
///
/// sqlx rolls back a dropped `Transaction`, but not a begin dropped in flight: until the
/// server has answered the `BEGIN` (here a message that also runs the check, and may wait for
/// the lease's row lock), sqlx counts no transaction on the connection, and its pool only pings
/// a connection it takes back. The server's transaction would then stay open on a pooled
/// connection, holding the lease's row lock, and the next statement the pool gives that
/// connection to would run inside it. So a fenced transaction's future dropped before it ended
/// closes its connection instead: the server ends the transaction with the session.
pub(crate) struct FencedConnection<DB: Database> {
    connection: PoolConnection<DB>,
    ended: bool,
}

impl<DB: Database> FencedConnection<DB> {
    /// `connection`, to be closed on drop until [`ended`](FencedConnection::ended) says the
    /// transaction ended.
    pub(crate) fn new(connection: PoolConnection<DB>) -> Self {
        Self {
            connection,
            ended: false,
        }
    }

    /// The connection, to run the transaction on.
    pub(crate) fn connection(&mut self) -> &mut DB::Connection {
        &mut self.connection
    }

    /// The transaction ended (committed, rolled back, or its connection known broken): the
    /// connection may go back to the pool.
    pub(crate) fn ended(&mut self) {
        self.ended = true;
    }

    /// Closes the connection when dropped, whatever ended.
    pub(crate) fn close_on_drop(&mut self) {
        self.connection.close_on_drop();
    }
}

impl<DB: Database> Drop for FencedConnection<DB> {
    fn drop(&mut self) {
        if !self.ended {
            self.connection.close_on_drop();
        }
    }
}
