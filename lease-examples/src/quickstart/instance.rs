//! [`Instance`]: one simulated instance of the service, running every job on its own client and
//! its own connection pool.

use std::sync::Arc;
use std::time::Duration;

use lease_core::runtime::TokioRuntime;
use lease_core::{BoxError, Leader, LeaseClient, RunOptions, RunOutcome, Ttl};
use lease_sqlx::sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use lease_sqlx::{SqliteLeaseStore, sqlite_connect_options};
use tokio::task::JoinSet;

use super::clock::SimClock;
use super::jobs::{JOBS, Job, Style};
use super::killable::Killable;
use super::ledger::Ledger;

/// One instance: a pool on the shared SQLite file, a lease client, and a task per job.
pub(crate) struct Instance {
    pub(crate) name: &'static str,
    store: Killable<SqliteLeaseStore>,
    tasks: JoinSet<()>,
}

/// What every instance shares.
pub(crate) struct Demo {
    /// The SQLite file.
    pub(crate) database: SqliteConnectOptions,
    pub(crate) ttl: Ttl,
    pub(crate) clock: SimClock,
    pub(crate) ledger: Arc<Ledger>,
    /// The end of the demo, in simulated time.
    pub(crate) end: Duration,
}

/// What every job loop of one instance shares.
#[derive(Clone)]
struct Ctx {
    instance: &'static str,
    client: LeaseClient,
    clock: SimClock,
    ledger: Arc<Ledger>,
    /// Simulated time the instance started, and the end of the demo.
    started: Duration,
    end: Duration,
}

impl Instance {
    /// Starts the instance: connects, then starts every job. Its schedules count from
    /// `started`, in simulated time.
    pub(crate) async fn start(
        name: &'static str,
        node: &'static str,
        started: Duration,
        demo: &Demo,
    ) -> Result<Self, BoxError> {
        let store = SqliteLeaseStore::new(
            SqlitePoolOptions::new()
                .max_connections(2)
                .connect_with(sqlite_connect_options(demo.database.clone()))
                .await?,
        );
        let store = Killable::new(store);
        let client = LeaseClient::builder(store.clone(), TokioRuntime)
            .ttl(demo.ttl)
            .build()?;
        let ctx = Ctx {
            instance: name,
            client,
            clock: demo.clock,
            ledger: Arc::clone(&demo.ledger),
            started,
            end: demo.end,
        };
        let mut tasks = JoinSet::new();
        for job in JOBS {
            let lease = job.lease(node);
            match job.style {
                Style::PerRound { .. } => {
                    tasks.spawn(per_round(ctx.clone(), job, lease));
                }
                Style::Leader => {
                    let leader = ctx.client.campaign(lease.as_str())?;
                    tasks.spawn(lead(ctx.clone(), job, lease, leader));
                }
            }
        }
        Ok(Self { name, store, tasks })
    }

    /// Kills the instance the way a crash would: nothing it sends reaches the database any
    /// more, then its tasks stop mid-step. Nothing is released.
    pub(crate) async fn kill(mut self) {
        self.store.kill();
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
        self.store.inner().pool().close().await;
    }

    /// Waits for the instance's jobs to reach the end of the demo; they give their leases
    /// back on the way out.
    pub(crate) async fn finish(mut self) {
        while let Some(joined) = self.tasks.join_next().await {
            if let Err(error) = joined {
                eprintln!("a job of instance {} failed: {error}", self.name);
            }
        }
        self.store.inner().pool().close().await;
    }
}

/// The first round at or after `from`.
fn first_round(from: Duration, period: Duration) -> u32 {
    from.as_nanos().div_ceil(period.as_nanos()) as u32
}

/// A per-round job: every round, try to take the lease; run the work or skip the round.
async fn per_round(ctx: Ctx, job: Job, lease: String) {
    let Style::PerRound {
        work,
        aligned,
        min_hold,
    } = job.style
    else {
        return;
    };
    let options = RunOptions::default().min_hold(ctx.clock.real(min_hold));
    let mut k = if aligned {
        first_round(ctx.started, job.period)
    } else {
        0
    };
    loop {
        let at = if aligned {
            job.period * k
        } else {
            ctx.started + job.period * k
        };
        if at >= ctx.end {
            break;
        }
        ctx.clock.sleep_until(at).await;
        // An interval timer's round is the period it falls in: what "once per period" counts.
        let round = if aligned {
            u64::from(k)
        } else {
            (ctx.clock.now().as_nanos() / job.period.as_nanos()) as u64
        };
        let (ledger, lease_name, clock, instance) = (
            Arc::clone(&ctx.ledger),
            lease.clone(),
            ctx.clock,
            ctx.instance,
        );
        let outcome = ctx
            .client
            .run_exclusive_with(lease.as_str(), options, move |handle| async move {
                let index = ledger.started(&lease_name, round, instance, handle.fence().get());
                clock.sleep(work).await;
                ledger.finished(index);
            })
            .await;
        match outcome {
            Ok(None) => ctx.ledger.skipped(&lease, round, ctx.instance),
            Ok(Some(RunOutcome::Finished(()))) => {}
            Ok(Some(other)) => ctx
                .ledger
                .say(format!("{lease} on {}: {other:?}", ctx.instance)),
            Err(error) => ctx.ledger.failed(&lease, ctx.instance, &error),
        }
        k += 1;
    }
}

/// A leader job: every round, the instance that leads runs it; the others skip it.
async fn lead(ctx: Ctx, job: Job, lease: String, leader: Leader) {
    let mut k = first_round(ctx.started, job.period);
    loop {
        let at = job.period * k;
        if at >= ctx.end {
            break;
        }
        ctx.clock.sleep_until(at).await;
        match leader.fence() {
            Some(fence) => ctx
                .ledger
                .led(&lease, u64::from(k), ctx.instance, fence.get()),
            None => ctx.ledger.followed(&lease),
        }
        k += 1;
    }
    leader.resign().await;
}
