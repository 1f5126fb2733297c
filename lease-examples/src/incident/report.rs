//! [`Report`]: both halves of the incident, side by side.

use std::fmt;
use std::time::Duration;

use super::{JOBS, POOL_SIZE, READINESS_BOUND};

/// How the readiness probe's write went.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Write {
    /// Every write committed; the slowest took this long.
    Committed {
        /// How many writes were made (one per renewal period while the jobs were held).
        count: u32,
        /// The slowest of them.
        slowest: Duration,
    },
    /// The write did not get a connection, or did not commit, in time.
    Failed {
        /// How long it waited.
        after: Duration,
        /// The error it ended with.
        error: String,
    },
}

/// One half of the incident: the four jobs held one way, then the readiness write.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Side {
    /// How many of the four jobs the instance held.
    pub held: usize,
    /// Connections of the pool in use (not idle) just before the readiness write; for leases,
    /// the most seen before any of the writes.
    pub in_use: u32,
    /// The readiness write.
    pub write: Write,
    /// For leases: how long they were held with live renewal, every one still held at the end.
    pub held_for: Option<Duration>,
    /// For advisory locks: what an operator saw in `pg_locks` joined with `pg_stat_activity`,
    /// one entry per advisory lock of this instance (`pid state`).
    pub pg_locks: Vec<String>,
}

impl Side {
    /// Whether the readiness write committed.
    pub fn committed(&self) -> bool {
        matches!(self.write, Write::Committed { .. })
    }
}

/// Both halves of the incident.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Report {
    /// Four session advisory locks on four pooled connections.
    pub advisory: Side,
    /// Four leases in a table, renewed while held.
    pub leases: Side,
}

impl Report {
    /// Whether the incident reproduced as the story tells it: the write fails behind advisory
    /// locks and commits with leases, all four jobs held both times.
    pub fn reproduced(&self) -> bool {
        self.advisory.held == JOBS.len()
            && !self.advisory.committed()
            && self.leases.held == JOBS.len()
            && self.leases.committed()
    }
}

fn write_cell(write: &Write) -> String {
    match write {
        Write::Committed { count, slowest } => format!(
            "committed ({count} of {count}, slowest {} ms)",
            slowest.as_millis()
        ),
        Write::Failed { after, .. } => format!("FAILED after {:.1} s", after.as_secs_f64()),
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (a, l) = (&self.advisory, &self.leases);
        let rows = [
            (
                "jobs held".to_owned(),
                format!("{} of {}", a.held, JOBS.len()),
                format!("{} of {}", l.held, JOBS.len()),
            ),
            (
                "connections in use".to_owned(),
                format!("{} of {POOL_SIZE}, pinned by the locks", a.in_use),
                format!("{} of {POOL_SIZE} between statements", l.in_use),
            ),
            (
                format!("readiness write ({} s bound)", READINESS_BOUND.as_secs()),
                write_cell(&a.write),
                write_cell(&l.write),
            ),
            (
                "instance".to_owned(),
                if a.committed() {
                    "serving"
                } else {
                    "503, out of rotation"
                }
                .to_owned(),
                if l.committed() {
                    "serving"
                } else {
                    "503, out of rotation"
                }
                .to_owned(),
            ),
        ];
        writeln!(
            f,
            "one instance, a pool of {POOL_SIZE} connections, its four jobs held ({})\n",
            JOBS.join(", ")
        )?;
        writeln!(
            f,
            "{:<30}{:<40}leases in a table",
            "", "session advisory locks"
        )?;
        for (what, advisory, leases) in rows {
            writeln!(f, "{what:<30}{advisory:<40}{leases}")?;
        }
        if let Write::Failed { error, .. } = &a.write {
            writeln!(f, "\nadvisory locks: the write failed with: {error}")?;
        }
        if let Write::Failed { error, .. } = &l.write {
            writeln!(f, "\nleases: the write failed with: {error}")?;
        }
        writeln!(
            f,
            "\npg_locks, as the operator saw it: {} advisory locks, held by backends in state: {}",
            a.pg_locks.len(),
            a.pg_locks.join(", ")
        )?;
        if let Some(held_for) = l.held_for {
            writeln!(
                f,
                "leases: all four stayed held for {:.1} s, renewed in the background, each renewal one \
                 statement on a borrowed connection",
                held_for.as_secs_f64()
            )?;
        }
        Ok(())
    }
}
