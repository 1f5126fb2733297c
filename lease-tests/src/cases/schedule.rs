//! Schedules through the store: two instances on one aligned schedule run each round once
//! between them, with increasing fences, and stopping hands the lease back.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lease_core::{LeaseClient, LeaseInfo, LeaseStore, Runtime, Schedule, Ttl};

use super::name;
use crate::failure::ensure;
use crate::{CaseFailure, CaseResult, Context, TestBackend, Verdict};

/// How often the rounds fall.
const PERIOD: Duration = Duration::from_millis(400);
/// How many periods the case watches.
const PERIODS: u32 = 6;
/// Each round's lease is kept this long after it was taken, so an instance whose tick comes
/// late on a busy machine still finds this round's lease taken.
const HOLD: Duration = Duration::from_millis(200);

fn client<S: LeaseStore, B: TestBackend>(
    store: S,
    ctx: &Context<B>,
) -> Result<LeaseClient, CaseFailure> {
    Ok(LeaseClient::builder(store, ctx.runtime().clone())
        .ttl(Ttl::from_secs(10)?)
        .renew_every(Duration::from_secs(2))
        .store_timeout(Duration::from_secs(3))
        .build()?)
}

/// Two clients on one store schedule `sweep` on the same aligned schedule (every 400 ms, a
/// minimum hold of 200 ms) for six periods. Every run has a higher fence than the one before,
/// no two runs fall within 200 ms of each other (two runs of one round would), the schedules'
/// counts agree with the runs, and once both are stopped the lease is free.
pub async fn schedule_runs_each_round_on_one_instance<B: TestBackend>(
    ctx: &Context<B>,
) -> CaseResult {
    let store = ctx.store().await?;
    let runs: Arc<Mutex<Vec<(Instant, u64)>>> = Arc::default();
    let schedule = Schedule::every(PERIOD)?.aligned().min_hold(HOLD);
    let mut scheduled = Vec::new();
    for _ in 0..2 {
        let client = client(Arc::clone(&store), ctx)?;
        let (runs, runtime) = (Arc::clone(&runs), ctx.runtime().clone());
        scheduled.push(client.schedule("sweep", schedule, move |lease| {
            runs.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push((runtime.now(), lease.fence().get()));
            async {}
        })?);
    }
    ctx.sleep(PERIOD * PERIODS).await;
    let stats: Vec<_> = scheduled.iter().map(|s| s.stats()).collect();
    for handle in scheduled {
        handle.stop().await;
    }
    let runs = runs
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    ensure!(
        runs.len() >= (PERIODS as usize) - 2,
        "{} runs in {PERIODS} periods: {runs:?} ({stats:?})",
        runs.len()
    );
    for pair in runs.windows(2) {
        let (first, second) = (pair[0], pair[1]);
        ensure!(
            second.0.duration_since(first.0) >= HOLD,
            "two runs {:?} apart, fences {} and {}: one round ran twice ({runs:?})",
            second.0.duration_since(first.0),
            first.1,
            second.1
        );
        ensure!(
            second.1 > first.1,
            "fence {} after fence {}: {runs:?}",
            second.1,
            first.1
        );
    }
    let ran: u64 = stats.iter().map(|s| s.ran).sum();
    ensure!(
        ran <= runs.len() as u64 && ran + 2 >= runs.len() as u64,
        "the schedules counted {ran} runs of {}: {stats:?}",
        runs.len()
    );
    ensure!(
        stats.iter().all(|s| s.failed == 0 && s.lost == 0),
        "rounds failed or lost their lease: {stats:?}"
    );
    // The last run's lease was given back with its hold: free once that is over.
    ctx.sleep(HOLD).await;
    let left = store.inspect(&name("sweep")).await?;
    ensure!(
        left.as_ref().is_none_or(LeaseInfo::is_expired),
        "sweep still held {HOLD:?} after both schedules stopped: {left:?}"
    );
    Ok(Verdict::Passed)
}
