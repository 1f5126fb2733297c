//! Reliability scenarios for the lease stores (test-only, not published).
//!
//! Each scenario is a test file in `tests/`: faults injected through
//! [`lease_tests::proxy::FaultProxy`], servers restarted and connections killed on private
//! servers, pools exhausted, processes paused, wall clocks skewed, histories of many processes
//! checked with [`lease_tests::history`], inputs fuzzed and privileges cut to the least. This
//! library holds what they share: the databases and their private servers ([`db`]), a store
//! factory per driver so a scenario is written once ([`factory`]), the conformance harness over
//! a factory ([`backend`]), a store that counts the calls reaching it ([`counting`]), a store that answers counter
//! fences, the failover scenarios' negative control ([`counter_fences`]), fenced and unfenced writes to a
//! protected table and their checker ([`fenced`]), worker processes killed and reaped when dropped
//! ([`reaped`]), the
//! counts every scenario prints ([`report`]), and the worker that the multi-process scenarios
//! start ([`worker`]), with the contending processes of the topology scenarios ([`contenders`]). RELIABILITY.md at the root of the workspace lists every scenario, what it
//! proves, and its latest counts.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod admin;
pub mod backend;
pub mod contenders;
pub mod counter_fences;
pub mod counting;
pub mod db;
pub mod diesel;
pub mod factory;
pub mod fenced;
pub mod reaped;
pub mod report;
pub mod scenario;
pub mod worker;

/// The driver a scenario's stores go through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    /// lease-sqlx.
    Sqlx,
    /// lease-diesel, on deadpool pools.
    Diesel,
}

impl Driver {
    /// Its name on the worker's command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sqlx => "sqlx",
            Self::Diesel => "diesel",
        }
    }

    /// The driver named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Sqlx, Self::Diesel]
            .into_iter()
            .find(|driver| driver.as_str() == name)
    }
}
