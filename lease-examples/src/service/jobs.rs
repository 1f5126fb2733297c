//! The four jobs of the design story, each a few lines on a schedule.

use std::time::Duration;

use lease_core::{BoxError, LeaseClient, LeaseName, Schedule, Scheduled};

use super::say;

/// One job: its lease and how often it runs.
#[derive(Debug, Clone, Copy)]
pub struct Job {
    /// The lease, or its prefix for a job per node (`uptime:<node>`).
    pub name: &'static str,
    /// How often it runs.
    pub period: Duration,
}

const fn minutes(m: u64) -> Duration {
    Duration::from_secs(m * 60)
}

/// The hourly sweep, alert evaluation every 30 s, mail checks every 15 minutes at most once per
/// 14 minutes, uptime checks every 10 s once per node.
pub const JOBS: [Job; 4] = [
    Job {
        name: "sweep",
        period: minutes(60),
    },
    Job {
        name: "alerts",
        period: Duration::from_secs(30),
    },
    Job {
        name: "mail-checks",
        period: minutes(15),
    },
    Job {
        name: "uptime",
        period: Duration::from_secs(10),
    },
];

/// The lease of `node`'s uptime checks, `uptime:<node>`, checked.
///
/// # Errors
/// When it is no valid lease name (a node's name of more than 248 bytes).
pub(super) fn uptime_name(node: &str) -> Result<LeaseName, BoxError> {
    // `uptime:` alone is a valid name, shared by every node whose name is empty (`NODE=` from
    // an unset variable): the checks would run on one of them only, and nothing would say so.
    if node.trim().is_empty() {
        return Err(
            "the node's name is empty (NODE set to nothing?): every such node would \
                    share one uptime lease; set NODE, or unset it for the host name"
                .into(),
        );
    }
    let [.., uptime] = JOBS;
    Ok(LeaseName::new(format!("{}:{node}", uptime.name))?)
}

/// Schedules every job on `client`; they run until the handles are dropped or the client shuts
/// down.
pub(super) fn start(
    client: &LeaseClient,
    uptime_name: LeaseName,
) -> Result<Vec<Scheduled>, BoxError> {
    let [sweep, alerts, mail, uptime] = JOBS;
    Ok(vec![
        // On the hour, on whichever instance wins the round.
        client.schedule(
            sweep.name,
            Schedule::every(sweep.period)?
                .aligned()
                .jitter(Duration::from_secs(30)),
            |lease| async move { say(format_args!("sweep: swept with fence {}", lease.fence())) },
        )?,
        // Every 30 s on the elected leader: one acquisition, then renewals.
        client.schedule_on_leader(
            alerts.name,
            Schedule::every(alerts.period)?,
            |lease| async move {
                say(format_args!(
                    "alerts: evaluated with fence {}",
                    lease.fence()
                ));
            },
        )?,
        // Every 15 minutes from start, at most once per 14 minutes across the instances.
        client.schedule(
            mail.name,
            Schedule::every(mail.period)?.min_hold(minutes(14)),
            |lease| async move {
                say(format_args!(
                    "mail-checks: checked with fence {}",
                    lease.fence()
                ));
            },
        )?,
        // Every 10 s, once per node.
        client.schedule_on_leader(
            uptime_name,
            Schedule::every(uptime.period)?,
            move |_| async {},
        )?,
    ])
}
