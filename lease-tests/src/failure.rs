//! [`CaseFailure`] and [`Verdict`]: what a case reports, so a broken store is a value to assert
//! on, not a panic to catch.

use std::fmt;

use lease_core::BoxError;

/// What a case found when the store kept every rule it checks.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// The store kept every rule the case checks.
    Passed,
    /// The case does not apply to this backend (a pool case on a store without a pool), and why.
    NotApplicable(String),
    /// The backend cannot run here (no server, no URL), and why. Under
    /// `LEASE_TEST_REQUIRE_ALL=1` this is a failure instead.
    Skipped(String),
}

/// The outcome of one case: a [`Verdict`], or the rule the store broke.
pub type CaseResult = Result<Verdict, CaseFailure>;

/// A rule the store broke, or an error that kept the case from finishing, in words that name
/// what was expected and what happened.
#[derive(Debug)]
pub struct CaseFailure {
    message: String,
}

impl CaseFailure {
    /// A failure described by `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// The description.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for CaseFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CaseFailure {}

/// Writes an error with every source in its chain, because a store's own error (the driver's
/// message) is usually the part that explains a failure.
fn with_sources(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

impl From<lease_core::Error> for CaseFailure {
    fn from(error: lease_core::Error) -> Self {
        Self::new(format!("unexpected error: {}", with_sources(&error)))
    }
}

impl From<BoxError> for CaseFailure {
    fn from(error: BoxError) -> Self {
        Self::new(format!("the backend failed: {}", with_sources(&*error)))
    }
}

/// Fails the case with a formatted message unless the condition holds.
macro_rules! ensure {
    ($condition:expr, $($message:tt)+) => {
        if !$condition {
            return Err($crate::CaseFailure::new(format!($($message)+)));
        }
    };
}

/// Fails the case unless both sides are equal, showing both and what was checked.
macro_rules! ensure_eq {
    ($left:expr, $right:expr, $($message:tt)+) => {
        match (&$left, &$right) {
            (left, right) => {
                if left != right {
                    return Err($crate::CaseFailure::new(format!(
                        "{}: expected {:?}, got {:?}",
                        format!($($message)+),
                        right,
                        left
                    )));
                }
            }
        }
    };
}

pub(crate) use {ensure, ensure_eq};

#[cfg(test)]
mod tests {
    use super::*;
    use lease_core::{LeaseName, Operation};

    #[test]
    fn store_errors_keep_the_driver_message() {
        let name = LeaseName::new("sweep").unwrap();
        let error = lease_core::Error::store(Operation::Renew, Some(&name), "connection refused");
        let failure = CaseFailure::from(error);
        assert_eq!(
            failure.message(),
            "unexpected error: lease store failed to renew lease \"sweep\": connection refused"
        );
    }

    fn checks(value: u32) -> Result<(), CaseFailure> {
        ensure!(value > 1, "value {value} is too small");
        ensure_eq!(value, 3, "value");
        Ok(())
    }

    #[test]
    fn ensure_macros_describe_what_went_wrong() {
        assert_eq!(checks(1).unwrap_err().message(), "value 1 is too small");
        assert_eq!(checks(2).unwrap_err().message(), "value: expected 3, got 2");
        assert!(checks(3).is_ok());
    }
}
