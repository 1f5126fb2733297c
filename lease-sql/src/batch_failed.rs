//! [`BatchFailed`]: a multi-statement message that failed, and how far it got.

use lease_core::BoxError;

/// A message of several statements that failed
/// ([`ExecuteOn::batch_counted_on`](crate::ExecuteOn::batch_counted_on)): the driver's error,
/// and how many of the message's statements had completed before the one that failed.
#[derive(Debug)]
pub struct BatchFailed {
    /// The driver's error, as [`ExecuteOn::batch_on`](crate::ExecuteOn::batch_on) answers it.
    pub error: BoxError,
    /// How many statements completed (each answered on its own: PostgreSQL's
    /// `CommandComplete`, MariaDB's OK packet or the end of a result set, SQLite's last step)
    /// before the failure; `None` where the driver does not tell.
    pub completed: Option<usize>,
}
