//! The [`StoreErrorKind`] of a sqlx error: its database's code read by lease-sql's tables, or
//! sqlx's own failures (pool, I/O, protocol).

use lease_core::StoreErrorKind;

use crate::SqlxDatabase;
use crate::no_connection::{NoConnection, sqlx_error};

/// What `error`, answered by a statement on `DB`, means to whoever would try again.
pub(crate) fn error_kind<DB: SqlxDatabase>(
    error: &(dyn std::error::Error + Send + Sync + 'static),
) -> StoreErrorKind {
    let Some(error) = sqlx_error(error) else {
        // lease-sql's own answers (a parameter it cannot inline, a row it cannot read).
        return StoreErrorKind::Permanent;
    };
    match error {
        sqlx::Error::Database(database) => DB::database_error_kind(database.as_ref()),
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::BeginFailed => StoreErrorKind::Transient,
        // A closed pool never opens again (`PoolClosed`, as everything else): retrying waits
        // for nothing.
        _ => StoreErrorKind::Permanent,
    }
}

/// Whether `error`, a database error with a code, says by it that the session ended with the
/// statement in flight (`SqlxDatabase::database_error_ends_session`); `Some(false)` when the
/// pool handed out no connection ([`NoConnection`]: its timeout, a closed pool, a server that
/// refused the connection), so that nothing was sent; `None` for any other error.
pub(crate) fn code_ends_session<DB: SqlxDatabase>(
    error: &(dyn std::error::Error + Send + Sync + 'static),
) -> Option<bool> {
    if error.is::<NoConnection>() {
        // The pool handed out no connection: no statement went out.
        return Some(false);
    }
    match error.downcast_ref::<sqlx::Error>() {
        Some(sqlx::Error::Database(database)) => DB::database_error_ends_session(database.as_ref()),
        _ => None,
    }
}
