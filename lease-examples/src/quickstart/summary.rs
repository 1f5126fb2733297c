//! [`Summary`]: what the demo did, and the check that no round ran twice.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use super::clock::Hms;
use super::ledger::Run;

/// A lease a killed instance held, taken by another instance once it lapsed; or one a gracefully
/// shut down instance handed back, taken at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Takeover {
    /// The lease.
    pub lease: String,
    /// The instance that was killed or shut down.
    pub from: &'static str,
    /// The instance that took it over.
    pub to: &'static str,
    /// The fence of the new holder.
    pub fence: u64,
    /// Real time from the kill or the shutdown to the takeover: after a kill up to one TTL (and
    /// a retry period); after a graceful shutdown one retry period at most.
    pub after: Duration,
    /// Simulated time of the takeover.
    pub at: Duration,
    /// The previous holder shut down gracefully rather than being killed.
    pub graceful: bool,
}

/// What happened to one lease's rounds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseRounds {
    /// Rounds run, by instance.
    pub run_by: BTreeMap<&'static str, u64>,
    /// Rounds an instance skipped because another held the lease (or led).
    pub skipped: u64,
    /// Rounds nobody ran between the first and the last run: the gap a crash costs.
    pub missed: u64,
}

impl LeaseRounds {
    /// Every round run, by any instance.
    pub fn run(&self) -> u64 {
        self.run_by.values().sum()
    }
}

/// The outcome of the demo: rounds run and skipped per lease, takeovers, and every violation of
/// "one instance at a time, once per round" found in the record.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Summary {
    /// Per lease name.
    pub leases: BTreeMap<String, LeaseRounds>,
    /// Leases a killed or shut down instance held that another instance took over.
    pub takeovers: Vec<Takeover>,
    /// Rounds that ran under more than one lease (two holders, or two acquisitions), as
    /// `lease round N: instance (fence), ...`. Two runs labelled with one round under one lease
    /// are one holder's two rounds, one of them late: a leader's round that starts late by
    /// nearly a period is labelled with the next, which then runs on time (on a loaded machine
    /// the demo's shortest period, 20 ms, is easily late by that much). They are no second
    /// holder, and not counted.
    pub double_runs: Vec<String>,
    /// Runs of one lease that overlapped in time on two instances.
    pub overlaps: Vec<String>,
    /// Runs whose fence was lower than an earlier run's of the same lease: a downstream system
    /// checking fences would have refused their writes.
    pub fence_regressions: Vec<String>,
    /// Store calls that failed on instances that were not killed.
    pub errors: Vec<String>,
    /// The lease TTL, in real time.
    pub ttl: Duration,
    /// The simulated time the demo ran for.
    pub length: Duration,
}

impl Summary {
    pub(crate) fn check(
        runs: &[Run],
        skipped: &BTreeMap<String, u64>,
        takeovers: Vec<Takeover>,
        errors: Vec<String>,
        ttl: Duration,
        length: Duration,
    ) -> Self {
        let mut by_lease: BTreeMap<&str, Vec<&Run>> = BTreeMap::new();
        for run in runs {
            by_lease.entry(&run.lease).or_default().push(run);
        }
        let mut summary = Self {
            leases: BTreeMap::new(),
            takeovers,
            double_runs: Vec::new(),
            overlaps: Vec::new(),
            fence_regressions: Vec::new(),
            errors,
            ttl,
            length,
        };
        for (lease, mut runs) in by_lease {
            runs.sort_by_key(|run| (run.start, run.round));
            let mut rounds = LeaseRounds {
                skipped: skipped.get(lease).copied().unwrap_or(0),
                ..LeaseRounds::default()
            };
            let mut per_round: BTreeMap<u64, Vec<(&str, u64)>> = BTreeMap::new();
            let mut highest_fence = 0;
            let mut busy_until: Option<(Duration, &str)> = None;
            for run in &runs {
                *rounds.run_by.entry(run.instance).or_default() += 1;
                per_round
                    .entry(run.round)
                    .or_default()
                    .push((run.instance, run.fence));
                if run.fence < highest_fence {
                    summary.fence_regressions.push(format!(
                        "{lease} round {}: {} ran with fence {} after fence {highest_fence}",
                        run.round + 1,
                        run.instance,
                        run.fence
                    ));
                }
                highest_fence = highest_fence.max(run.fence);
                if let Some((until, other)) = busy_until
                    && run.start < until
                    && other != run.instance
                {
                    summary.overlaps.push(format!(
                        "{lease}: {} started round {} at {} while {other} ran until {}",
                        run.instance,
                        run.round + 1,
                        Hms(run.start),
                        Hms(until)
                    ));
                }
                let end = run.end.unwrap_or(Duration::MAX);
                if busy_until.is_none_or(|(until, _)| end > until) {
                    busy_until = Some((end, run.instance));
                }
            }
            for (round, ran) in &per_round {
                if ran.iter().any(|&(_, fence)| fence != ran[0].1) {
                    let under: Vec<String> = ran
                        .iter()
                        .map(|(instance, fence)| format!("{instance} ({fence})"))
                        .collect();
                    summary.double_runs.push(format!(
                        "{lease} round {}: {}",
                        round + 1,
                        under.join(", ")
                    ));
                }
            }
            if let (Some(first), Some(last)) = (per_round.keys().next(), per_round.keys().last()) {
                rounds.missed = (last - first + 1) - per_round.len() as u64;
            }
            summary.leases.insert(lease.to_owned(), rounds);
        }
        summary
    }

    /// Whether every round ran on one instance at most, with fences that never went back.
    pub fn is_clean(&self) -> bool {
        self.double_runs.is_empty() && self.overlaps.is_empty() && self.fence_regressions.is_empty()
    }

    /// Every round run, over every lease.
    pub fn rounds_run(&self) -> u64 {
        self.leases.values().map(LeaseRounds::run).sum()
    }

    /// Every round skipped, over every lease.
    pub fn rounds_skipped(&self) -> u64 {
        self.leases.values().map(|lease| lease.skipped).sum()
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "summary after {} of simulated time:", Hms(self.length))?;
        writeln!(
            f,
            "  {:<15} {:>5}  {:<22} {:>7} {:>7}",
            "lease", "run", "by instance", "skipped", "missed"
        )?;
        for (lease, rounds) in &self.leases {
            let by: Vec<String> = rounds
                .run_by
                .iter()
                .map(|(instance, n)| format!("{instance} {n}"))
                .collect();
            writeln!(
                f,
                "  {lease:<15} {:>5}  {:<22} {:>7} {:>7}",
                rounds.run(),
                by.join(", "),
                rounds.skipped,
                rounds.missed
            )?;
        }
        writeln!(
            f,
            "  rounds run: {}, rounds skipped: {}",
            self.rounds_run(),
            self.rounds_skipped()
        )?;
        writeln!(
            f,
            "  (skipped: the lease was held, or another instance led; missed: nobody ran the round)"
        )?;
        writeln!(f, "  takeovers: {}", self.takeovers.len())?;
        for t in &self.takeovers {
            writeln!(
                f,
                "    {:<15} {} -> {} with fence {}, {:.1} s after the {} (TTL {:.1} s)",
                t.lease,
                t.from,
                t.to,
                t.fence,
                t.after.as_secs_f64(),
                if t.graceful {
                    "graceful shutdown"
                } else {
                    "kill"
                },
                self.ttl.as_secs_f64()
            )?;
        }
        writeln!(f, "  double runs: {}", self.double_runs.len())?;
        for (what, found) in [
            ("double run", &self.double_runs),
            ("overlap", &self.overlaps),
            ("fence went back", &self.fence_regressions),
            ("store error", &self.errors),
        ] {
            for line in found {
                writeln!(f, "    {what}: {line}")?;
            }
        }
        if !self.overlaps.is_empty() || !self.fence_regressions.is_empty() {
            writeln!(
                f,
                "  overlapping runs: {}, fences gone back: {}",
                self.overlaps.len(),
                self.fence_regressions.len()
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(lease: &str, round: u64, instance: &'static str, fence: u64, start: u64) -> Run {
        Run {
            lease: lease.to_owned(),
            round,
            instance,
            fence,
            start: Duration::from_secs(start),
            end: Some(Duration::from_secs(start + 10)),
        }
    }

    fn check(runs: &[Run]) -> Summary {
        Summary::check(
            runs,
            &BTreeMap::new(),
            Vec::new(),
            Vec::new(),
            Duration::from_secs(2),
            Duration::from_secs(600),
        )
    }

    #[test]
    fn a_clean_record_passes_and_counts_missed_rounds() {
        let summary = check(&[
            run("sweep", 0, "a", 1, 0),
            run("sweep", 1, "a", 2, 60),
            run("sweep", 4, "b", 3, 240),
        ]);
        assert!(summary.is_clean(), "{summary}");
        let sweep = &summary.leases["sweep"];
        assert_eq!(sweep.run(), 3);
        assert_eq!(sweep.missed, 2);
        assert!(summary.to_string().contains("double runs: 0"));
    }

    #[test]
    fn finds_double_runs_overlaps_and_fences_going_back() {
        let summary = check(&[run("alerts", 0, "a", 2, 0), run("alerts", 0, "b", 1, 5)]);
        assert!(!summary.is_clean());
        assert_eq!(summary.double_runs, ["alerts round 1: a (2), b (1)"]);
        assert_eq!(summary.overlaps.len(), 1, "{summary}");
        assert_eq!(summary.fence_regressions.len(), 1, "{summary}");
        assert!(summary.to_string().contains("double runs: 1"));
    }

    #[test]
    fn one_round_under_two_leases_of_one_instance_is_a_double_run() {
        let summary = check(&[run("sweep", 3, "a", 1, 0), run("sweep", 3, "a", 2, 20)]);
        assert_eq!(summary.double_runs, ["sweep round 4: a (1), a (2)"]);
        assert!(!summary.is_clean());
    }

    #[test]
    fn a_late_round_of_one_term_is_no_double_run() {
        // The leader's round 52 started late by nearly a period and was labelled 53, as was
        // round 53, on time: one term's lease (one fence), one holder.
        let summary = check(&[
            run("uptime", 51, "c", 7, 0),
            run("uptime", 52, "c", 7, 11),
            run("uptime", 52, "c", 7, 12),
            run("uptime", 53, "c", 7, 23),
        ]);
        assert!(summary.is_clean(), "{summary}");
        assert_eq!(summary.leases["uptime"].run(), 4);
    }
}
