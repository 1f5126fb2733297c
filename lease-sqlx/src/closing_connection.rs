//! [`ClosingConnection`]: a pooled connection closed rather than given back when what runs on it
//! is dropped before it ended: a fenced transaction, a script, a store statement.

use sqlx::Database;
use sqlx::pool::PoolConnection;

/// A connection taken from the pool for something that may leave a transaction open on the
/// server where sqlx does not see one: closed when dropped, unless
/// [`ended`](ClosingConnection::ended) said it ended.
///
/// sqlx rolls back a dropped `Transaction`, but not a begin dropped in flight: until the
/// server has answered the `BEGIN` (in [`fenced_with`](crate::fenced_with), a message that also
/// runs the check, and may wait for the lease's row lock), sqlx counts no transaction on the
/// connection, and its pool only pings a connection it takes back. Nor does it see the
/// transaction of a script ([`Execute::batch`](lease_sql::Execute::batch): SQLite's rebuild of a
/// table, `SAVEPOINT` to `RELEASE`, holding the database's write lock), which stops where
/// its future was dropped. The server's transaction would then stay open on a pooled
/// connection, holding its locks, and the next statement the pool gives that connection to
/// would run inside it. So such a future dropped before it ended closes its connection instead:
/// the server ends the transaction with the session.
///
/// The store's own statements go through it too. One cut by the store timeout on a server gone
/// silent (a host lost in a failover, a partition that drops packets) would go back to the pool
/// with its statement unanswered, and the pool's ping on release waits for that answer without
/// a bound (TCP's retransmission, some fifteen minutes, or for good where the statement's bytes
/// were acknowledged), holding its place in the pool: a few such cuts and every call fails for
/// want of a connection, `Pool::close` included. Closed, it frees its place within sqlx's close
/// timeout (5 s).
pub(crate) struct ClosingConnection<DB: Database> {
    connection: PoolConnection<DB>,
    ended: bool,
}

impl<DB: Database> ClosingConnection<DB> {
    /// `connection`, to be closed on drop until [`ended`](ClosingConnection::ended) says what
    /// ran on it ended.
    pub(crate) fn new(connection: PoolConnection<DB>) -> Self {
        Self {
            connection,
            ended: false,
        }
    }

    /// The connection, to run on.
    pub(crate) fn connection(&mut self) -> &mut DB::Connection {
        &mut self.connection
    }

    /// What ran on it ended (committed, rolled back, or its connection known broken): the
    /// connection may go back to the pool.
    pub(crate) fn ended(&mut self) {
        self.ended = true;
    }

    /// Closes the connection when dropped, whatever ended.
    pub(crate) fn close_on_drop(&mut self) {
        self.connection.close_on_drop();
    }
}

impl<DB: Database> Drop for ClosingConnection<DB> {
    fn drop(&mut self) {
        if !self.ended {
            self.connection.close_on_drop();
        }
    }
}
