//! [`ErrorChain`]: an error and its causes on one line, each said once.

use std::error::Error as StdError;
use std::fmt;

/// An error and its [`source`](StdError::source)s on one line, joined by `: `, as a person
/// reads them in a log or a terminal: `lease store failed to list: relation "leases" does not
/// exist (SQLSTATE 42P01)`. A cause whose text the line already ends with (a wrapper that
/// repeats its source's text in its own) is said once. At most 16 causes are followed.
///
/// ```
/// use lease_core::{Error, ErrorChain, Operation};
///
/// let io = std::io::Error::other("connection refused");
/// let error = Error::store(Operation::List, None, io);
/// assert_eq!(
///     ErrorChain(&error).to_string(),
///     "lease store failed to list: connection refused"
/// );
/// ```
#[derive(Clone, Copy)]
pub struct ErrorChain<'a>(pub &'a (dyn StdError + 'a));

impl ErrorChain<'_> {
    /// The most causes followed: a chain longer than this is cut, never followed forever.
    pub const MAX_CAUSES: usize = 16;
}

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut line = self.0.to_string();
        let mut cause = self.0.source();
        for _ in 0..Self::MAX_CAUSES {
            let Some(error) = cause else { break };
            let text = error.to_string();
            if !text.is_empty() && !line.ends_with(&text) {
                line.push_str(": ");
                line.push_str(&text);
            }
            cause = error.source();
        }
        f.write_str(&line)
    }
}

impl fmt::Debug for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error whose text repeats its source's, as sqlx's database errors do.
    #[derive(Debug)]
    struct Repeating(std::io::Error);

    impl fmt::Display for Repeating {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "error returned from database: {}", self.0)
        }
    }

    impl StdError for Repeating {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn says_each_cause_once() {
        let error = crate::Error::store(
            crate::Operation::Acquire,
            None,
            Repeating(std::io::Error::other("column fence does not exist")),
        );
        assert_eq!(
            ErrorChain(&error).to_string(),
            "lease store failed to acquire: error returned from database: column fence does not exist"
        );
        let plain = std::io::Error::other("refused");
        assert_eq!(ErrorChain(&plain).to_string(), "refused");
    }
}
