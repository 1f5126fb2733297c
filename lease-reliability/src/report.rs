//! [`Counts`]: what every scenario prints, and the check that it found no violation.

use std::fmt;
use std::io::Write;

/// Operations run, faults injected and violations found by one run of one scenario on one
/// backend.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// The scenario, such as `partition-cut`.
    pub scenario: String,
    /// The backend, such as `postgres/sqlx`.
    pub backend: String,
    /// Store operations, critical sections or steps the scenario ran.
    pub operations: u64,
    /// Faults injected: proxy commands, restarts, kills, pauses, skews.
    pub faults: u64,
    /// Broken guarantees found, each described in `details`.
    pub violations: u64,
    /// What each violation was.
    pub details: Vec<String>,
}

impl Counts {
    /// Empty counts for `scenario` on `backend`.
    pub fn new(scenario: impl Into<String>, backend: impl Into<String>) -> Self {
        Self {
            scenario: scenario.into(),
            backend: backend.into(),
            ..Self::default()
        }
    }

    /// Records a broken guarantee.
    pub fn violation(&mut self, what: impl Into<String>) {
        self.violations += 1;
        self.details.push(what.into());
    }

    /// Records a violation unless `holds`.
    pub fn expect(&mut self, holds: bool, what: impl FnOnce() -> String) {
        if !holds {
            self.violation(what());
        }
    }

    /// Prints the counts as one `RELIABILITY` line on standard error, then fails when a
    /// violation was found. The line is written to the stream itself rather than through
    /// `eprintln!`, which the test harness captures: every run shows it, passing or not.
    ///
    /// # Panics
    /// When any violation was found, listing them.
    pub fn conclude(&self) {
        conclude_all(&[self]);
    }
}

/// [`Counts::conclude`] for several runs of one test: prints every `RELIABILITY` line first,
/// so that a violation in one does not hide the counts of the others, then fails when any of
/// them found a violation, listing them all.
///
/// # Panics
/// When any violation was found.
pub fn conclude_all(runs: &[&Counts]) {
    let mut stderr = std::io::stderr();
    for counts in runs {
        let _ = writeln!(stderr, "{counts}");
    }
    let broken: Vec<String> = runs
        .iter()
        .filter(|counts| counts.violations > 0)
        .map(|counts| {
            format!(
                "{} {}: {} violation(s):\n{}",
                counts.scenario,
                counts.backend,
                counts.violations,
                counts.details.join("\n")
            )
        })
        .collect();
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "RELIABILITY {} {}: operations={} faults={} violations={}",
            self.scenario, self.backend, self.operations, self.faults, self.violations
        )
    }
}
