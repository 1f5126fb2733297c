//! The quickstart demo: three instances share one SQLite file and run the four kinds of
//! background work of the design story on schedules, on a compressed clock; one is killed midway
//! and another takes over its leases once they lapse; later another is restarted gracefully, as
//! a deploy does, and its leases are taken over within half a second.
//!
//! `cargo run --example quickstart` runs [`run`] with the default [`Settings`] and prints to
//! standard output.

mod clock;
mod instance;
mod jobs;
pub(crate) mod killable;
mod ledger;
mod summary;
mod tempdir;

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use lease_core::{BoxError, Ttl};
use lease_sqlx::sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use lease_sqlx::{SqliteLeaseStore, sqlite_connect_options};

use self::clock::{Hms, SimClock, minutes};
use self::instance::{Connected, Demo, Instance};
use self::jobs::{JOBS, Style};
use self::ledger::Ledger;
use self::tempdir::TempDir;

pub use self::summary::{LeaseRounds, Summary, Takeover};

/// The instances: two share node-1 (so only one of them may run node-1's uptime checks), one
/// runs on node-2. They start a simulated minute apart, as instances of a deployment do.
const INSTANCES: [(&str, &str); 3] = [("a", "node-1"), ("b", "node-1"), ("c", "node-2")];

/// The instance that replaces the one restarted gracefully, on the same node.
const REPLACEMENT: &str = "d";

/// How long after the clock starts its 0:00 comes, in real time: time for the first instance's
/// schedules to start. A round that falls before 0:00 records nothing, and its minimum hold
/// (shorter than its period) ends before 0:00.
const START_LEAD: Duration = Duration::from_millis(250);

/// The shortest and the longest a simulated minute may take ([`Settings::minute`]): a minute
/// of no time would make every simulated time infinite, and the demo, which runs in real time,
/// should end the same day.
pub const MINUTE_BOUNDS: (Duration, Duration) = (Duration::from_millis(1), Duration::from_secs(60));

/// How long a graceful shutdown lets running rounds finish, in simulated time: longer than any
/// job's work.
const GRACE: Duration = minutes(5);

/// How fast the demo runs, when the instance is killed, and when another is restarted.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Settings {
    /// How long one simulated minute takes. Default: 250 ms, so an hour passes in 15 s.
    pub minute: Duration,
    /// The lease TTL, in real time: it guards against real latency, so it is not compressed.
    /// Default: 2 s (8 simulated minutes at the default speed).
    pub ttl: Ttl,
    /// How long the demo runs, in simulated time. Default: 100 minutes.
    pub length: Duration,
    /// When the instance leading the alert evaluation is killed, in simulated time. Default:
    /// minute 50.
    pub kill_at: Duration,
    /// When the instance leading the alert evaluation then (the one that took over after the
    /// kill) is shut down gracefully and replaced, in simulated time. Default: minute 75.
    pub restart_at: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            minute: Duration::from_millis(250),
            ttl: Ttl::from_secs(2).expect("2 s is a valid TTL"),
            length: minutes(100),
            kill_at: minutes(50),
            restart_at: minutes(75),
        }
    }
}

impl Settings {
    /// The default settings with one simulated minute taking `minute`: the same story, faster
    /// or slower.
    pub fn with_minute(minute: Duration) -> Self {
        Self {
            minute,
            ..Self::default()
        }
    }
}

/// Runs the demo, printing every event to `out` as it happens and the summary at the end, and
/// returns the summary. The SQLite file lives in a temporary directory removed at the end.
///
/// # Errors
/// When the settings are out of order or [`Settings::minute`] is outside [`MINUTE_BOUNDS`],
/// or when the SQLite file cannot be created or opened.
pub async fn run(
    settings: Settings,
    out: impl Write + Send + 'static,
) -> Result<Summary, BoxError> {
    if settings.kill_at >= settings.restart_at || settings.restart_at >= settings.length {
        return Err("the kill must come before the restart, and both before the end".into());
    }
    let (fastest, slowest) = MINUTE_BOUNDS;
    if settings.minute < fastest || settings.minute > slowest {
        return Err(format!(
            "a simulated minute must take from {fastest:?} to {slowest:?} of real time"
        )
        .into());
    }
    let dir = TempDir::new("lease-quickstart")?;
    let database = SqliteConnectOptions::new()
        .filename(dir.path().join("leases.db"))
        .create_if_missing(true);
    let setup = SqliteLeaseStore::new(
        SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(sqlite_connect_options(database.clone()))
            .await?,
    );
    setup.setup().await?;
    setup.pool().close().await;

    // The first instance connects before the clock starts, and the clock's 0:00 comes a while
    // after it schedules its jobs, so that their first rounds fall at 0:00 even when the
    // schedules' tasks start late on a loaded machine. The rounds of the short periods that
    // fall before 0:00 are not the story's: they run, but record nothing.
    let first = Connected::connect(INSTANCES[0].0, &database, settings.ttl).await?;
    let clock = SimClock::start(settings.minute, START_LEAD);
    let ledger = Arc::new(Ledger::new(clock, Box::new(out)));
    header(&ledger, &settings, &clock, &dir);

    let demo = Demo {
        database,
        ttl: settings.ttl,
        clock,
        ledger: Arc::clone(&ledger),
    };
    let mut instances = vec![first.schedule(INSTANCES[0].1, Duration::ZERO, &demo)?];
    for (i, (name, node)) in INSTANCES.into_iter().enumerate().skip(1) {
        let started = minutes(i as u64);
        clock.sleep_until(started).await;
        instances.push(Instance::start(name, node, started, &demo).await?);
    }

    clock.sleep_until(settings.kill_at).await;
    // Kill the instance that leads the alert evaluation, so its takeover shows.
    let victim = ledger.leader_of("alerts").unwrap_or(INSTANCES[0].0);
    if let Some(i) = instances
        .iter()
        .position(|instance| instance.name == victim)
    {
        instances.swap_remove(i).kill().await;
        ledger.killed(victim);
    }

    clock.sleep_until(settings.restart_at).await;
    // Restart the alert leader gracefully, as a deploy does: its leases are taken over at once
    // by its replacement, or at another instance's next campaign retry, not a TTL later.
    let restarted = ledger
        .leader_of("alerts")
        .and_then(|leader| instances.iter().position(|i| i.name == leader))
        .unwrap_or(0);
    let instance = instances.swap_remove(restarted);
    let node = INSTANCES
        .iter()
        .find(|(name, _)| *name == instance.name)
        .map_or("node-1", |(_, node)| node);
    ledger.shutting_down(instance.name);
    instance.shut_down(clock.real(GRACE)).await;
    instances.push(Instance::start(REPLACEMENT, node, settings.restart_at, &demo).await?);

    clock.sleep_until(settings.length).await;
    ledger.say("\nthe end: every instance shuts down gracefully");
    for instance in instances {
        instance.shut_down(clock.real(GRACE)).await;
    }
    let summary = ledger.summary(settings.ttl.get(), settings.length);
    ledger.say(format!("\n{summary}"));
    ledger.say(if summary.is_clean() {
        "every round ran on one instance at most: no double runs"
    } else {
        "DOUBLE RUNS FOUND: some round ran on two instances"
    });
    Ok(summary)
}

fn header(ledger: &Ledger, settings: &Settings, clock: &SimClock, dir: &TempDir) {
    let ttl = settings.ttl.get();
    ledger.say(format!(
        "lease quickstart: three instances share one SQLite file in {}",
        dir.path().display()
    ));
    ledger.say(format!(
        "  instances: {}",
        INSTANCES
            .map(|(name, node)| format!("{name} on {node}"))
            .join(", ")
    ));
    ledger.say(format!(
        "  clock: 1 simulated minute = {} ms; {} of simulated time in {:.0} s",
        settings.minute.as_millis(),
        Hms(settings.length),
        clock.real(settings.length).as_secs_f64()
    ));
    ledger.say(format!(
        "  lease TTL: {:.1} s of real time ({} simulated), renewed every {:.1} s",
        ttl.as_secs_f64(),
        Hms(clock.simulated(ttl)),
        ttl.as_secs_f64() / 4.0
    ));
    for job in JOBS {
        let how = match job.style {
            Style::PerRound { min_hold, .. } if !min_hold.is_zero() => format!(
                "every instance tries each round; at most once per minimum hold ({})",
                Hms(min_hold)
            ),
            Style::PerRound { .. } => "every instance tries each round; one runs it".to_owned(),
            Style::Leader => "the instances elect a leader, which runs every round".to_owned(),
        };
        ledger.say(format!(
            "  {:<12} every {}{}: {how}",
            job.name,
            Hms(job.period),
            if job.per_node { ", once per node" } else { "" }
        ));
    }
    ledger.say(format!(
        "  at {} the alert leader is killed without releasing anything",
        Hms(settings.kill_at)
    ));
    ledger.say(format!(
        "  at {} the alert leader then is shut down gracefully and replaced by instance {REPLACEMENT}\n",
        Hms(settings.restart_at)
    ));
}
