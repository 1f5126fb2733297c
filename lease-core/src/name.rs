//! [`LeaseName`]: the validated name of one kind of work.

use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

use crate::error::{Error, NameError};

/// The name of a lease: one per kind of work, such as `"sweep"` or `"uptime:node-a"`.
///
/// A valid name is non-empty, at most [`LeaseName::MAX_LEN`] bytes of UTF-8 and contains no NUL
/// character (PostgreSQL text cannot hold one). Anything else is stored verbatim: quotes,
/// SQL keywords and emoji round-trip unchanged, because every store binds names as parameters.
///
/// Cloning is cheap: the text is shared.
///
/// ```
/// use lease_core::LeaseName;
///
/// let name = LeaseName::new("mail-checks")?;
/// assert_eq!(name.as_str(), "mail-checks");
/// assert!(LeaseName::new("").is_err());
/// assert_eq!(LeaseName::per_node("uptime", "node-a")?.as_str(), "uptime:node-a");
/// # Ok::<(), lease_core::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseName(Arc<str>);

impl LeaseName {
    /// The longest name, in bytes of UTF-8.
    pub const MAX_LEN: usize = 255;

    /// Validates `name`.
    ///
    /// # Errors
    /// [`Error::InvalidName`] when the name is empty, longer than [`LeaseName::MAX_LEN`] bytes or
    /// contains a NUL character.
    pub fn new(name: impl AsRef<str>) -> Result<Self, Error> {
        let name = name.as_ref();
        let reason = if name.is_empty() {
            Some(NameError::Empty)
        } else if name.len() > Self::MAX_LEN {
            Some(NameError::TooLong { len: name.len() })
        } else if name.contains('\0') {
            Some(NameError::ContainsNul)
        } else {
            None
        };
        match reason {
            Some(reason) => Err(Error::InvalidName {
                name: name.to_owned(),
                reason,
            }),
            None => Ok(Self(Arc::from(name))),
        }
    }

    /// The name of work that runs once per node rather than once per cluster:
    /// `"{job}:{node}"`, for example `uptime:node-a`.
    ///
    /// # Errors
    /// [`Error::InvalidName`] when the combined name is not valid.
    pub fn per_node(job: &str, node: &str) -> Result<Self, Error> {
        Self::new(format!("{job}:{node}"))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for LeaseName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for LeaseName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for LeaseName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for LeaseName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl TryFrom<&str> for LeaseName {
    type Error = Error;

    fn try_from(name: &str) -> Result<Self, Error> {
        Self::new(name)
    }
}

impl TryFrom<String> for LeaseName {
    type Error = Error;

    fn try_from(name: String) -> Result<Self, Error> {
        Self::new(name)
    }
}

impl TryFrom<&String> for LeaseName {
    type Error = Error;

    fn try_from(name: &String) -> Result<Self, Error> {
        Self::new(name)
    }
}

impl From<&LeaseName> for LeaseName {
    fn from(name: &LeaseName) -> Self {
        name.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_anything_but_empty_long_or_nul() {
        for ok in [
            "a",
            "sweep",
            "it's \"quoted\"",
            "'; DROP TABLE leases; --",
            "🔒 lease",
        ] {
            assert_eq!(LeaseName::new(ok).unwrap().as_str(), ok);
        }
        let longest = "é".repeat(127) + "x";
        assert_eq!(longest.len(), 255);
        assert!(LeaseName::new(&longest).is_ok());
    }

    #[test]
    fn rejects_each_invalid_name_with_its_reason() {
        let cases = [
            (String::new(), NameError::Empty),
            ("x".repeat(256), NameError::TooLong { len: 256 }),
            ("a\0b".to_owned(), NameError::ContainsNul),
        ];
        for (name, expected) in cases {
            match LeaseName::new(&name) {
                Err(Error::InvalidName { name: got, reason }) => {
                    assert_eq!(got, name);
                    assert_eq!(reason, expected);
                }
                other => panic!("{name:?} gave {other:?}"),
            }
        }
    }
}
