//! [`IntoLeaseName`]: what the client's calls accept as a lease name.

use crate::{Error, LeaseName};

/// Anything that names a lease: `&str`, `String` or [`LeaseName`]. Text is validated on use.
pub trait IntoLeaseName {
    /// The validated name.
    ///
    /// # Errors
    /// [`Error::InvalidName`] for text that is not a valid name.
    fn into_lease_name(self) -> Result<LeaseName, Error>;
}

impl IntoLeaseName for LeaseName {
    fn into_lease_name(self) -> Result<LeaseName, Error> {
        Ok(self)
    }
}

impl IntoLeaseName for &LeaseName {
    fn into_lease_name(self) -> Result<LeaseName, Error> {
        Ok(self.clone())
    }
}

impl IntoLeaseName for &str {
    fn into_lease_name(self) -> Result<LeaseName, Error> {
        LeaseName::new(self)
    }
}

impl IntoLeaseName for String {
    fn into_lease_name(self) -> Result<LeaseName, Error> {
        LeaseName::new(self)
    }
}

impl IntoLeaseName for &String {
    fn into_lease_name(self) -> Result<LeaseName, Error> {
        LeaseName::new(self)
    }
}
