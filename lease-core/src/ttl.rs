//! [`Ttl`]: how long a lease lasts without renewal.

use std::fmt;
use std::time::Duration;

use crate::Error;

/// How long a lease lasts after it is taken or renewed, counted on the store's clock.
///
/// Whole milliseconds between [`Ttl::MIN`] (1 ms) and [`Ttl::MAX`] (365 days); finer parts are
/// dropped, so the holder and the store agree on the exact same length. The default is two
/// minutes, which bounds what a crashed holder costs: the next round starts at most one TTL late.
///
/// ```
/// use std::time::Duration;
/// use lease_core::Ttl;
///
/// let ttl = Ttl::new(Duration::from_secs(30))?;
/// assert_eq!(ttl.as_millis(), 30_000);
/// assert!(Ttl::new(Duration::ZERO).is_err());
/// # Ok::<(), lease_core::Error>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ttl(u64);

impl Ttl {
    /// The shortest TTL: one millisecond.
    pub const MIN: Ttl = Ttl(1);
    /// The longest TTL: 365 days, well inside what every store's interval arithmetic can hold.
    pub const MAX: Ttl = Ttl(365 * 24 * 60 * 60 * 1000);
    /// The default TTL: two minutes.
    pub const DEFAULT: Ttl = Ttl(2 * 60 * 1000);

    /// Validates `ttl`.
    ///
    /// # Errors
    /// [`Error::InvalidTtl`] when `ttl` is shorter than [`Ttl::MIN`] or longer than [`Ttl::MAX`].
    pub fn new(ttl: Duration) -> Result<Self, Error> {
        let millis = ttl.as_millis();
        if millis < u128::from(Self::MIN.0) || millis > u128::from(Self::MAX.0) {
            return Err(Error::InvalidTtl { requested: ttl });
        }
        // In range, so it fits.
        Ok(Self(millis as u64))
    }

    /// A TTL of `secs` seconds.
    ///
    /// # Errors
    /// [`Error::InvalidTtl`] as for [`Ttl::new`].
    pub fn from_secs(secs: u64) -> Result<Self, Error> {
        Self::new(Duration::from_secs(secs))
    }

    /// A TTL of `millis` milliseconds.
    ///
    /// # Errors
    /// [`Error::InvalidTtl`] as for [`Ttl::new`].
    pub fn from_millis(millis: u64) -> Result<Self, Error> {
        Self::new(Duration::from_millis(millis))
    }

    /// The TTL as a duration.
    pub const fn get(self) -> Duration {
        Duration::from_millis(self.0)
    }

    /// The TTL in whole milliseconds, as stores bind it.
    pub const fn as_millis(self) -> u64 {
        self.0
    }
}

impl Default for Ttl {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl fmt::Debug for Ttl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.get(), f)
    }
}

impl TryFrom<Duration> for Ttl {
    type Error = Error;

    fn try_from(ttl: Duration) -> Result<Self, Error> {
        Self::new(ttl)
    }
}

impl From<Ttl> for Duration {
    fn from(ttl: Ttl) -> Self {
        ttl.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_inclusive_and_typed() {
        assert_eq!(Ttl::new(Duration::from_millis(1)).unwrap(), Ttl::MIN);
        assert_eq!(Ttl::new(Ttl::MAX.get()).unwrap(), Ttl::MAX);
        for bad in [
            Duration::ZERO,
            Duration::from_micros(999),
            Ttl::MAX.get() + Duration::from_millis(1),
            Duration::MAX,
        ] {
            assert!(
                matches!(Ttl::new(bad), Err(Error::InvalidTtl { requested }) if requested == bad),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn drops_sub_millisecond_parts() {
        let ttl = Ttl::new(Duration::from_micros(1_999)).unwrap();
        assert_eq!(ttl.get(), Duration::from_millis(1));
        assert_eq!(Ttl::default().get(), Duration::from_secs(120));
    }
}
