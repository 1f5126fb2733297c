//! The four kinds of background work of the design story, and how the demo runs each.

use std::time::Duration;

use super::clock::minutes;

/// How the instances share one kind of work.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Style {
    /// Every instance tries every round with `run_exclusive`: one runs it, the others skip it.
    PerRound {
        /// How long the work takes, in simulated time.
        work: Duration,
        /// Ticks on the clock's boundaries (on the hour), the same on every instance; otherwise
        /// every period from the instance's own start, like a plain interval timer.
        aligned: bool,
        /// `RunOptions::min_hold`: at most one run per hold, however short the work.
        min_hold: Duration,
    },
    /// Frequent work: the instances elect a leader, which runs every round while it holds the
    /// lease (one acquisition, then renewals, instead of an acquisition every few seconds).
    Leader,
}

/// One kind of work.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Job {
    pub(crate) name: &'static str,
    /// Run once per node (`uptime:node-1`) rather than once per cluster.
    pub(crate) per_node: bool,
    /// How often, in simulated time.
    pub(crate) period: Duration,
    pub(crate) style: Style,
}

impl Job {
    /// The lease this job takes on `node`.
    pub(crate) fn lease(&self, node: &str) -> String {
        if self.per_node {
            format!("{}:{node}", self.name)
        } else {
            self.name.to_owned()
        }
    }
}

/// The jobs of the story: an hourly sweep, alert evaluation every 30 s, mail security checks every
/// 15 minutes at most once per 14 minutes, and uptime checks every 10 s once per node.
pub(crate) const JOBS: [Job; 4] = [
    Job {
        name: "sweep",
        per_node: false,
        period: minutes(60),
        style: Style::PerRound {
            work: minutes(3),
            aligned: true,
            // None here, where the three-minute run outlasts the instances' spread in one
            // process. Copied into a service, keep the schedule's default hold: a short sweep on
            // machines whose clocks differ would otherwise run twice in a round.
            min_hold: Duration::ZERO,
        },
    },
    Job {
        name: "alerts",
        per_node: false,
        period: Duration::from_secs(30),
        style: Style::Leader,
    },
    Job {
        name: "mail-checks",
        per_node: false,
        period: minutes(15),
        style: Style::PerRound {
            work: minutes(1),
            aligned: false,
            // A little under the period, so the next period's run is not blocked by this one.
            min_hold: minutes(14),
        },
    },
    Job {
        name: "uptime",
        per_node: true,
        period: Duration::from_secs(10),
        style: Style::Leader,
    },
];
