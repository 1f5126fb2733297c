//! [`Fence`]: the fencing token of one acquisition.

use std::fmt;

/// A fencing token: a number that strictly increases with every acquisition of a lease name,
/// across takeovers and releases, and stays the same while the holder renews.
///
/// Treat it as opaque: compare fences, never compute with them. (The SQL stores' fences follow
/// the database's clock in microseconds, so that they keep increasing when a pruned row is
/// created again or a failover loses the latest acquisitions; the memory store counts.)
///
/// Pass it along with every write the work makes downstream, and have the downstream system
/// reject a write whose fence is lower than the highest it has seen for that name: a holder that
/// lost its lease (a long pause, a network partition) then cannot overwrite the work of the
/// holder that took over.
///
/// ```
/// use lease_core::Fence;
///
/// let first = Fence::new(1);
/// let later = Fence::new(2);
/// assert!(later > first);
/// assert_eq!(later.get(), 2);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fence(u64);

impl Fence {
    /// A fence with the given value, as a store reads it back.
    pub const fn new(value: u64) -> Self {
        Self(value)
    }

    /// The value, for passing downstream.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Debug for Fence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fence({})", self.0)
    }
}

impl fmt::Display for Fence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl From<Fence> for u64 {
    fn from(fence: Fence) -> Self {
        fence.0
    }
}
