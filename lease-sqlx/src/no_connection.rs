//! [`NoConnection`]: the pool handed out no connection, so no statement went out.

use std::fmt;

/// The error of a pool that handed out no connection ([`acquire`](crate::acquire::acquire)):
/// no statement went out, so none lost its answer, whatever the error says (a refused
/// connection's I/O error reads, on its own, like a socket that broke under a statement). Read
/// as the sqlx error it holds for everything else: its kind, its words.
#[derive(Debug)]
pub(crate) struct NoConnection(pub(crate) sqlx::Error);

impl fmt::Display for NoConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for NoConnection {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// The sqlx error in `error`: the error itself, or the one a [`NoConnection`] holds.
pub(crate) fn sqlx_error<'e>(
    error: &'e (dyn std::error::Error + Send + Sync + 'static),
) -> Option<&'e sqlx::Error> {
    match error.downcast_ref::<NoConnection>() {
        Some(NoConnection(error)) => Some(error),
        None => error.downcast_ref::<sqlx::Error>(),
    }
}
