//! [`NoConnection`]: the pool handed out no connection, so no statement went out.

use std::fmt;

/// A store error's source when the pool handed out no connection for the statement: no
/// statement went out, so none lost its answer, whatever sqlx's error says (a refused
/// connection's I/O error reads, on its own, like a socket that broke under a statement). It
/// says what sqlx said ([`error`](NoConnection::error), also its
/// [`source`](std::error::Error::source)): the pool's timeout, a closed pool, or the reason a
/// connection made on its own failed (the server's refusal, a wrong password), and is read as
/// that error for its kind.
#[derive(Debug)]
pub struct NoConnection(pub(crate) sqlx::Error);

impl NoConnection {
    /// What sqlx answered.
    pub fn error(&self) -> &sqlx::Error {
        &self.0
    }
}

impl fmt::Display for NoConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Its text is sqlx's (said once in an `ErrorChain`), its source sqlx's error.
impl std::error::Error for NoConnection {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
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
