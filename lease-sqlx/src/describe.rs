//! What a database answered in a sqlx error, as a person reads it.

/// The database's message and SQLSTATE of a `sqlx::Error::Database`, without sqlx's "error
/// returned from database:" and the PostgreSQL error's "at line N" (the line of the server's C
/// source that raised it); `None` for sqlx's own failures, whose text is already plain.
pub(crate) fn describe(error: &(dyn std::error::Error + Send + Sync + 'static)) -> Option<String> {
    match crate::no_connection::sqlx_error(error)? {
        sqlx::Error::Database(database) => Some(match database.code() {
            Some(code) => format!("{} (SQLSTATE {code})", database.message()),
            None => database.message().to_owned(),
        }),
        _ => None,
    }
}

/// The database's own message in a `sqlx::Error::Database`; `None` for sqlx's own failures.
pub(crate) fn database_message<'e>(
    error: &'e (dyn std::error::Error + Send + Sync + 'static),
) -> Option<&'e str> {
    match crate::no_connection::sqlx_error(error)? {
        sqlx::Error::Database(database) => Some(database.message()),
        _ => None,
    }
}
