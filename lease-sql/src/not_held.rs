//! How the fenced commit's check says that the lease is gone: it raises an error whose message
//! carries [`NOT_HELD_MARKER`], which [`is_not_held`] recognises in the database's message.

/// The text the check of [`Statements::fence_then_commit`](crate::Statements::fence_then_commit)
/// puts in the error it raises when the lease is gone (PostgreSQL: in a failed cast's message;
/// MariaDB: as the `SIGNAL`'s message text). It holds no quote, `?` or `$`, so that it sits
/// inside the statements' text as it is.
pub const NOT_HELD_MARKER: &str = "lease-sql: the lease is no longer held";

/// Whether the database's `message` is the fenced commit's check saying that the lease is gone.
pub fn is_not_held(message: &str) -> bool {
    message.contains(NOT_HELD_MARKER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_is_found_in_each_servers_message() {
        assert!(is_not_held(
            "invalid input syntax for type integer: \"lease-sql: the lease is no longer held\""
        ));
        assert!(is_not_held("lease-sql: the lease is no longer held"));
        assert!(!is_not_held("division by zero"));
    }

    #[test]
    fn the_marker_needs_no_quoting() {
        assert!(!NOT_HELD_MARKER.contains(['\'', '"', '?', '$', '\\']));
    }
}
