//! [`StoreErrorKind`]: what a store's failure means to whoever would try again.

use std::fmt;

/// What a store's failure means to whoever would try again: whether the same statement may
/// succeed if sent again, and why. Carried by [`Error::Store`](crate::Error::Store) and read
/// with [`Error::store_error_kind`](crate::Error::store_error_kind); the SQL stores classify
/// every driver error by its SQLSTATE or error number.
///
/// [`Error::is_transient`](crate::Error::is_transient) is true for every kind but
/// [`Permanent`](Self::Permanent) and [`OutcomeUnknown`](Self::OutcomeUnknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// The server accepts no writes: a standby, a primary that a switchover demoted, a server
    /// put in read-only mode (PostgreSQL SQLSTATE 25006 or a server in recovery, MariaDB error
    /// 1290). The SQL stores close the connection that answered instead of giving it back to the
    /// pool, so the pool's next connection goes to whatever server the URL now names: after a
    /// failover, the new primary. Their own statements are sent again on the pool's next
    /// connection, while it holds idle ones and twice with none idle, so this kind
    /// reaches a caller when a new connection is refused too (the switchover is not over), or
    /// from a fenced transaction, which is never sent again.
    ReadOnly,
    /// The database rolled the statement back because a concurrent transaction wrote the same
    /// row: a serialization failure (SQLSTATE 40001), a deadlock (40P01, MariaDB 1213), which is
    /// also how a Galera cluster reports a write that lost certification to a write on another
    /// node. Sending the statement again is right; the SQL stores do it once themselves.
    Conflict,
    /// The store could not be reached or did not answer in time: a refused or broken
    /// connection, a pool with no free connection, the store timeout, a server shutting down or
    /// out of connections. It may answer if asked again.
    Transient,
    /// Asking again will not help: permission denied, a missing or mismatched table, a
    /// statement the server rejects.
    Permanent,
    /// The statement went out but its answer never came back (the connection broke, or was
    /// closed by a server shutting down, while the answer was on its way): whether it took
    /// effect is unknown. The SQL stores report it for the commit of a fenced transaction
    /// (`Operation::Fence`), where it means that the transaction's writes may have committed,
    /// the lease held, or not at all. Do not simply run the work again: find out first, from
    /// what the work writes (an idempotency key, a row the transaction inserts), or make the
    /// work safe to run twice. Not transient, so that a retry loop that asks
    /// [`Error::is_transient`](crate::Error::is_transient) does not run the work a second time.
    /// They report it for an acquisition too (`Operation::Acquire`): the lease may be taken
    /// for the holder it was sent for. A [`LeaseClient`](crate::LeaseClient) releases it for
    /// that holder and answers its caller a `Transient` error instead; a caller of the store
    /// itself releases it so, or leaves it to lapse after its TTL.
    OutcomeUnknown,
}

impl StoreErrorKind {
    /// Whether the same call may succeed if made again: every kind but
    /// [`Permanent`](Self::Permanent) and [`OutcomeUnknown`](Self::OutcomeUnknown) (a call
    /// made again could do twice what the first one may have done).
    pub const fn is_transient(self) -> bool {
        !matches!(self, Self::Permanent | Self::OutcomeUnknown)
    }
}

impl fmt::Display for StoreErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ReadOnly => "the server is read-only",
            Self::Conflict => "a concurrent transaction conflicted",
            Self::Transient => "the store was unavailable",
            Self::Permanent => "the store rejected the statement",
            Self::OutcomeUnknown => "the answer was lost: whether it took effect is unknown",
        })
    }
}
