//! [`DatabaseError`]: what the database answered, as a person reads it.

use std::fmt;

use lease_core::BoxError;

/// What the database answered to a statement, as a person reads it: its own message and code,
/// without what the driver adds around them (sqlx's "error returned from database:", and on
/// PostgreSQL the line of the server's C source that raised it). [`SqlStore`](crate::SqlStore)
/// makes it the source of an [`Error::Store`](lease_core::Error::Store) wherever the executor
/// can [`describe`](crate::Execute::describe) the driver's error.
///
/// It has no [`source`](std::error::Error::source): the driver's error says the same again,
/// and a printed chain of causes would repeat it. Reach it with
/// [`driver`](DatabaseError::driver).
pub struct DatabaseError {
    message: String,
    driver: BoxError,
}

impl DatabaseError {
    /// `message`, described from the driver's `driver` error.
    pub fn new(message: String, driver: BoxError) -> Self {
        Self { message, driver }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The driver's own error, to downcast (`sqlx::Error`, `diesel::result::Error`).
    pub fn driver(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.driver
    }
}

impl fmt::Display for DatabaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for DatabaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DatabaseError")
            .field("message", &self.message)
            .field("driver", &self.driver)
            .finish()
    }
}

impl std::error::Error for DatabaseError {}
