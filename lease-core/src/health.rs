//! [`Health`]: whether a client keeps its leases, for a readiness probe.

use std::time::Duration;

/// Whether a [`LeaseClient`](crate::LeaseClient) keeps its leases; from
/// [`LeaseClient::health`](crate::LeaseClient::health).
///
/// A lease is *overdue* when its last successful renewal (or its acquisition) was sent more
/// than one renewal period plus one store timeout ago: a renewal that should have succeeded by
/// then did not. With the defaults (TTL 2 min, renewal every 30 s, store timeout 30 s, safety
/// margin 12 s) that is a minute after the last success, 48 s before the lease's local
/// deadline: time for a load balancer to take the instance out before it loses its leases.
/// It is half-way between the renewal's due time and the deadline instead, where that comes
/// first (a TTL of 60 s renewed every 30 s with a store timeout of 30 s set by hand would
/// otherwise reach the deadline), so the lease is overdue before it is lost.
///
/// A lease whose deadline has passed is lost and no longer counted: during an outage that
/// outlasts the deadlines, a client reads unhealthy from the first overdue renewal until its
/// leases are lost, then healthy again with nothing held (it keeps nothing it could lose). A
/// probe that must stay unready while the store is unreachable asks the store too, or reads
/// the failed calls of [`LeaseClient::stats`](crate::LeaseClient::stats).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), lease_core::Error> {
/// use lease_core::{LeaseClient, MemoryStore, runtime::TokioRuntime};
///
/// let client = LeaseClient::new(MemoryStore::new(), TokioRuntime);
/// let _guard = client.try_acquire("sweep").await?;
/// let health = client.health();
/// assert!(health.is_healthy());
/// assert_eq!((health.held, health.overdue), (1, 0));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Health {
    /// Leases held.
    pub held: usize,
    /// Held leases whose renewal is overdue.
    pub overdue: usize,
    /// The shortest time any held lease has left before its local deadline; `None` when none
    /// is held.
    pub soonest_deadline: Option<Duration>,
    /// The client's shutdown has begun: it takes no new leases.
    pub shutting_down: bool,
}

impl Health {
    /// Healthy: no held lease is overdue and the client is not shutting down.
    pub fn is_healthy(&self) -> bool {
        self.overdue == 0 && !self.shutting_down
    }
}
