//! [`Instance`]: one simulated instance of the service, running every job on a schedule of its
//! own client, on its own connection pool.

use std::sync::Arc;
use std::time::Duration;

use lease_core::runtime::TokioRuntime;
use lease_core::{BoxError, LeaseClient, LeaseHandle, Schedule, Scheduled, Ttl};
use lease_sqlx::sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use lease_sqlx::{SqliteLeaseStore, sqlite_connect_options};

use super::clock::SimClock;
use super::jobs::{JOBS, Job, Style};
use super::killable::Killable;
use super::ledger::Ledger;

/// One instance: a pool on the shared SQLite file, a lease client, and a schedule per job.
pub(crate) struct Instance {
    pub(crate) name: &'static str,
    store: Killable<SqliteLeaseStore>,
    client: LeaseClient,
    schedules: Vec<(String, Scheduled)>,
    ledger: Arc<Ledger>,
}

/// What every instance shares.
pub(crate) struct Demo {
    /// The SQLite file.
    pub(crate) database: SqliteConnectOptions,
    pub(crate) ttl: Ttl,
    pub(crate) clock: SimClock,
    pub(crate) ledger: Arc<Ledger>,
}

/// What every round of one job on one instance needs.
#[derive(Clone)]
struct Round {
    instance: &'static str,
    lease: Arc<str>,
    job: Job,
    clock: SimClock,
    ledger: Arc<Ledger>,
    store: Killable<SqliteLeaseStore>,
}

impl Round {
    /// Which round of its schedule the job runs now.
    fn number(&self) -> u64 {
        match self.job.style {
            // An interval timer's round is the period it falls in: what "once per period" counts.
            Style::PerRound { aligned: false, .. } => {
                (self.clock.now().as_nanos() / self.job.period.as_nanos()) as u64
            }
            _ => self.clock.current_round(self.job.period),
        }
    }

    /// Whether this round comes before the story's 0:00: the first instance's schedules start a
    /// moment early, and the rounds of the short periods fall meanwhile. A round due at 0:00
    /// may start a hair early (the schedule reads the wall clock, the demo the monotonic one),
    /// so only one more than a tenth of the period early is before it.
    fn is_before_start(&self) -> bool {
        self.clock.until_start() > self.clock.real(self.job.period) / 10
    }

    /// A per-round job's work: recorded, then the job's simulated time. Nothing before 0:00.
    fn run(&self, lease: &LeaseHandle, work: Duration) -> impl Future<Output = ()> + use<> {
        let index = (!self.is_before_start()).then(|| {
            self.ledger.started(
                &self.lease,
                self.number(),
                self.instance,
                lease.fence().get(),
            )
        });
        let this = self.clone();
        async move {
            let Some(index) = index else {
                return;
            };
            this.clock.sleep(work).await;
            // A killed instance's work goes on in memory, but nothing it does counts any more.
            if !this.store.is_killed() {
                this.ledger.finished(index);
            }
        }
    }

    /// A leader job's round on the instance that leads. Nothing before 0:00.
    fn lead(&self, lease: &LeaseHandle) {
        if !self.store.is_killed() && !self.is_before_start() {
            self.ledger.led(
                &self.lease,
                self.number(),
                self.instance,
                lease.fence().get(),
            );
        }
    }
}

/// An instance connected to the database, its jobs not scheduled yet.
pub(crate) struct Connected {
    name: &'static str,
    store: Killable<SqliteLeaseStore>,
    client: LeaseClient,
}

impl Connected {
    /// Connects instance `name` to the SQLite file.
    pub(crate) async fn connect(
        name: &'static str,
        database: &SqliteConnectOptions,
        ttl: Ttl,
    ) -> Result<Self, BoxError> {
        let store = SqliteLeaseStore::new(
            SqlitePoolOptions::new()
                .max_connections(2)
                .connect_with(sqlite_connect_options(database.clone()))
                .await?,
        );
        let store = Killable::new(store);
        let client = LeaseClient::builder(store.clone(), TokioRuntime)
            .ttl(ttl)
            .build()?;
        Ok(Self {
            name,
            store,
            client,
        })
    }

    /// Schedules every job of the instance on `node`, which counts its own intervals from
    /// `started` (simulated time).
    pub(crate) fn schedule(
        self,
        node: &'static str,
        started: Duration,
        demo: &Demo,
    ) -> Result<Instance, BoxError> {
        let Self {
            name,
            store,
            client,
        } = self;
        let clock = demo.clock;
        let mut schedules = Vec::new();
        for job in JOBS {
            let lease = job.lease(node);
            let period = clock.real(job.period);
            let round = Round {
                instance: name,
                lease: lease.as_str().into(),
                job,
                clock,
                ledger: Arc::clone(&demo.ledger),
                store: store.clone(),
            };
            // Rounds on the demo's own clock: its 0:00 is a boundary of every period.
            let aligned = Schedule::every(period)?.offset(clock.boundary_offset(period));
            let scheduled = match job.style {
                Style::PerRound {
                    work,
                    aligned: on_the_clock,
                    min_hold,
                } => {
                    let schedule = if on_the_clock {
                        aligned
                    } else {
                        // Every period from the instance's own start, like a plain interval.
                        Schedule::every(period)?
                            .offset(clock.boundary_offset(period) + clock.real(started))
                    };
                    let schedule = schedule.min_hold(clock.real(min_hold));
                    client.schedule(lease.as_str(), schedule, move |lease| {
                        round.run(&lease, work)
                    })?
                }
                Style::Leader => {
                    client.schedule_on_leader(lease.as_str(), aligned, move |lease| {
                        round.lead(&lease);
                        async {}
                    })?
                }
            };
            schedules.push((lease, scheduled));
        }
        Ok(Instance {
            name,
            store,
            client,
            schedules,
            ledger: Arc::clone(&demo.ledger),
        })
    }
}

impl Instance {
    /// Starts instance `name` on `node` now, at simulated time `started`: connects, then
    /// schedules every job.
    pub(crate) async fn start(
        name: &'static str,
        node: &'static str,
        started: Duration,
        demo: &Demo,
    ) -> Result<Self, BoxError> {
        Connected::connect(name, &demo.database, demo.ttl)
            .await?
            .schedule(node, started, demo)
    }

    /// Kills the instance the way a crash would: nothing it sends reaches the database any
    /// more, and its schedules stop mid-step. Nothing is released.
    pub(crate) async fn kill(self) {
        self.store.kill();
        drop(self.schedules);
        drop(self.client);
        self.store.inner().pool().close().await;
    }

    /// Shuts the instance down gracefully, as a deploy does on SIGTERM: its schedules stop,
    /// running rounds finish within `grace`, and every lease it holds is handed back, so the
    /// other instances take them at once.
    pub(crate) async fn shut_down(self, grace: Duration) {
        let report = self.client.shutdown(grace).await;
        for (lease, scheduled) in &self.schedules {
            let stats = scheduled.stats();
            self.ledger.skipped(lease, self.name, stats.skipped);
            self.ledger.failed(lease, self.name, stats.failed);
        }
        self.ledger.shut_down(self.name, &report);
        self.store.inner().pool().close().await;
    }
}
