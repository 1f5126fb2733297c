//! [`LeaseInfo`]: what an operator sees of one lease.

use std::time::{Duration, SystemTime};

use crate::{Fence, HolderId, LeaseName};

/// One lease as the store sees it: who holds it, since when, until when, and its fence.
///
/// Every time is the store's own (the database's `now()`), including
/// [`observed_at`](LeaseInfo::observed_at), the store's time when the row was read, so
/// [`expires_in`](LeaseInfo::expires_in) is right even when this machine's clock is not.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseInfo {
    /// The lease.
    pub name: LeaseName,
    /// The holder of the latest acquisition.
    pub holder: HolderId,
    /// The fence of the latest acquisition.
    pub fence: Fence,
    /// When the latest acquisition took the lease.
    pub taken_at: SystemTime,
    /// When the lease expires unless renewed. In the past for a lease whose holder stopped
    /// renewing without releasing it (a crash); anybody may take it over.
    pub expires_at: SystemTime,
    /// The store's time when this was read.
    pub observed_at: SystemTime,
}

impl LeaseInfo {
    /// Assembles the information a store read.
    pub fn new(
        name: LeaseName,
        holder: HolderId,
        fence: Fence,
        taken_at: SystemTime,
        expires_at: SystemTime,
        observed_at: SystemTime,
    ) -> Self {
        Self {
            name,
            holder,
            fence,
            taken_at,
            expires_at,
            observed_at,
        }
    }

    /// Whether the lease had expired when it was read.
    pub fn is_expired(&self) -> bool {
        self.expires_at <= self.observed_at
    }

    /// How long the lease had left when it was read; zero once expired.
    pub fn expires_in(&self) -> Duration {
        self.expires_at
            .duration_since(self.observed_at)
            .unwrap_or(Duration::ZERO)
    }
}
