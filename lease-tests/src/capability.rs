//! [`Capability`]: what a backend declares its stores offer, so that a case which finds it
//! missing fails instead of reporting itself not applicable.

use std::fmt;

/// Something a backend's stores offer beyond the contract every store keeps, which some cases
/// need. A backend declares what it offers with [`TestBackend::offers`](crate::TestBackend::offers).
///
/// A case that needs a capability the backend does not offer reports itself not applicable
/// ([`Verdict::NotApplicable`](crate::Verdict::NotApplicable)): the memory store has no pool and
/// no fenced check. One the backend declares, yet does not get, fails: a wrapper backend that
/// stops forwarding [`TestBackend::fenced`](crate::TestBackend::fenced), or a driver that stops
/// answering a stream of releases, is then caught by the suite (even with
/// `LEASE_TEST_REQUIRE_ALL=1` unset) instead of passing every case it no longer runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Capability {
    /// [`LeaseStore::release_events`](lease_core::LeaseStore::release_events) answers a stream
    /// (the memory store; PostgreSQL with notifications on): the cases about pushed releases
    /// run, and a store that answers `None` fails them, as a wrapper that forgets to forward
    /// the call does.
    PushedReleases,
    /// [`TestBackend::pooled`](crate::TestBackend::pooled) answers a store over a pool of a
    /// known size: the cases that no connection stays taken run.
    Pool,
    /// [`TestBackend::fenced`](crate::TestBackend::fenced) answers fenced writes on the store's
    /// database: the fenced-write cases run.
    FencedWrites,
    /// [`TestBackend::unreachable`](crate::TestBackend::unreachable) answers a store that
    /// cannot reach its database: the outage case runs.
    Unreachable,
    /// The unreachable store's errors are transient
    /// ([`Error::is_transient`](lease_core::Error::is_transient)): a server that cannot be
    /// reached may answer if asked again, so campaigns and waits ride the outage out instead of
    /// ending. Not for SQLite, whose "unreachable" store is a file that cannot be opened, which
    /// asking again does not mend.
    TransientWhenUnreachable,
}

impl Capability {
    /// Whether a SQL store's backend offers this, as the drivers' own harnesses declare it: a
    /// pool, fenced writes and an unreachable store always; pushed releases where its stores
    /// notify (`pushes_releases`: PostgreSQL with notifications on); transient errors when
    /// unreachable where its `dialect` is a server's (not SQLite's, whose unreachable store is a
    /// file that cannot be opened). A capability added later must be decided here too (the
    /// match has no catch-all).
    pub fn offered_by_sql(self, pushes_releases: bool, dialect: lease_sql::Dialect) -> bool {
        match self {
            Self::Pool | Self::FencedWrites | Self::Unreachable => true,
            Self::PushedReleases => pushes_releases,
            Self::TransientWhenUnreachable => dialect != lease_sql::Dialect::Sqlite,
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::PushedReleases => "pushed releases",
            Self::Pool => "a connection pool",
            Self::FencedWrites => "fenced writes",
            Self::Unreachable => "an unreachable store",
            Self::TransientWhenUnreachable => "transient errors when unreachable",
        })
    }
}
