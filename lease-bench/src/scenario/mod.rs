//! The scenarios of the benchmark, one file each.

pub mod contended;
pub mod cycles;
pub mod fenced;
pub mod growth;
pub mod handover;
pub mod many;

use crate::args::Options;
use crate::servers::Servers;

/// A scenario of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// Acquire and release cycles on distinct names, beside the bare statements.
    Cycles,
    /// Failed attempts on one held name, beside the naive upsert, with WAL written.
    Contended,
    /// Many leases held on a pool of two connections: renewal rounds and memory.
    Many,
    /// Time from a release or a crash to the next holder.
    Handover,
    /// Transactions with and without the fenced check; renewal while one is open.
    Fenced,
    /// Cycles and renewals as the table grows with released rows.
    Growth,
}

impl Scenario {
    /// Every scenario, in report order.
    pub const ALL: [Self; 6] = [
        Self::Cycles,
        Self::Contended,
        Self::Many,
        Self::Handover,
        Self::Fenced,
        Self::Growth,
    ];

    /// Its name on the command line.
    pub fn key(self) -> &'static str {
        match self {
            Self::Cycles => "cycles",
            Self::Contended => "contended",
            Self::Many => "many",
            Self::Handover => "handover",
            Self::Fenced => "fenced",
            Self::Growth => "growth",
        }
    }

    /// The scenario named `text`.
    ///
    /// # Errors
    /// A message listing the names there are.
    pub fn parse(text: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|scenario| scenario.key() == text)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|s| s.key()).collect();
                format!("unknown scenario {text:?}; there are {}", names.join(", "))
            })
    }
}

/// What every scenario reads: the options and the servers.
pub struct Context<'a> {
    /// The command line.
    pub options: &'a Options,
    /// Where the databases are.
    pub servers: &'a Servers,
}
