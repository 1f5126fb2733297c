//! [`PoolState`]: what a pool has open, for `Debug`, tests and operators.

/// How many connections a pool has open, and how many of them nobody is using.
///
/// A lease store borrows a connection for one statement and gives it back, so between
/// statements every connection it used is idle again, however many leases it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolState {
    /// Connections open, idle or in use.
    pub size: u32,
    /// Connections open and not in use.
    pub idle: u32,
}
