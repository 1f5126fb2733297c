//! Schedules through the store: two instances on one aligned schedule run each round once
//! between them, with increasing fences, and stopping hands the lease back; two instances on one
//! leader's schedule run every round on the one elected, under one term's fence.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lease_core::{
    HolderId, LeaseClient, LeaseInfo, LeaseStore, Schedule, ScheduleStats, Scheduled,
};

use super::grant_witness::GrantWitness;
use super::{client_of, name};
use crate::failure::ensure;
use crate::{CaseFailure, CaseResult, Context, TestBackend, Verdict};

/// How often the rounds fall.
const PERIOD: Duration = Duration::from_millis(400);
/// How many periods the case watches.
const PERIODS: u32 = 6;
/// Each round's lease is kept this long after it was taken, so an instance whose tick comes
/// late on a busy machine (by up to this long) still finds this round's lease taken.
const HOLD: Duration = Duration::from_millis(350);
/// How much shorter than [`HOLD`] two leases' `taken_at` may read apart: a store that keeps
/// times in milliseconds rounds each.
const HOLD_ROUNDING: Duration = Duration::from_millis(2);
/// How often the leader's rounds fall.
const LEADER_PERIOD: Duration = Duration::from_millis(200);
/// How many of the leader's periods the case watches.
const LEADER_PERIODS: u32 = 8;

/// Adds one run to `runs`.
fn record<T>(runs: &Mutex<Vec<T>>, run: T) {
    runs.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(run);
}

/// How long [`watch`] lets schedules run: `length`, and then on, one `period` at a time and
/// `length` more at the most, until `at_least` runs are recorded (on a busy machine an election
/// or a slow round may cost the first rounds).
#[derive(Debug, Clone, Copy)]
struct Watch {
    length: Duration,
    period: Duration,
    at_least: usize,
}

/// Lets `scheduled` run as `watch` says, stops them, and answers their statistics, the runs
/// they recorded, both read before the stop (while the schedules stop one after the other, the
/// one stopped first gives its lease back and a later one may rightly take it and run a round),
/// and how many periods they ran.
async fn watch<B: TestBackend, T: Clone>(
    ctx: &Context<B>,
    scheduled: Vec<Scheduled>,
    runs: &Mutex<Vec<T>>,
    watch: Watch,
) -> (Vec<ScheduleStats>, Vec<T>, u32) {
    let recorded = || {
        runs.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    };
    ctx.sleep(watch.length).await;
    let mut periods = watch.length.div_duration_f64(watch.period).round() as u32;
    let mut extended = Duration::ZERO;
    while recorded().len() < watch.at_least && extended < watch.length {
        ctx.sleep(watch.period).await;
        extended += watch.period;
        periods += 1;
    }
    let stats = scheduled.iter().map(Scheduled::stats).collect();
    let runs = recorded();
    for handle in scheduled {
        handle.stop().await;
    }
    (stats, runs, periods)
}

fn client<S: LeaseStore, B: TestBackend>(
    store: S,
    ctx: &Context<B>,
) -> Result<LeaseClient, CaseFailure> {
    let secs = Duration::from_secs;
    client_of(ctx, store, secs(10), secs(2), secs(3))
}

/// Two clients on one store schedule `sweep` on the same aligned schedule (every 400 ms, a
/// minimum hold of 350 ms) for six periods, in which six or seven of the wall clock's
/// boundaries fall. Between them they run it at most once per round: every run reads the row,
/// which names its own lease, and in fence order each lease was taken at least the minimum hold
/// after the one before, by the store's clock (one round run twice breaks that, however the
/// instances' ticks fell); four to seven runs, the rounds the schedules report missed counting
/// toward the four, and two at least, for which the watch goes on up to six more periods (with
/// fewer, no two runs are compared). Each run has a fence of its own, the schedules' counts
/// agree with the runs, and once both are stopped the lease is free.
///
/// # Errors
/// A [`CaseFailure`] when too few runs happen or some round runs twice (a run finds another
/// lease named, two leases taken within the minimum hold, or more runs than boundaries), two runs share a fence, the
/// schedules' counts disagree with the runs, a round failed or lost its lease, or `sweep` is still
/// held once the last round's minimum hold has passed, and, [as any case](crate::cases#errors),
/// when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, its two schedules stop as
/// dropped [`Scheduled`] handles do (a round already running finishes), and `sweep` is free once
/// the last round's minimum hold of 350 ms has passed.
pub async fn schedule_runs_each_round_on_one_instance<B: TestBackend>(
    ctx: &Context<B>,
) -> CaseResult {
    let store = ctx.store().await?;
    let runs: Arc<Mutex<Vec<AlignedRun>>> = Arc::default();
    let schedule = Schedule::every(PERIOD)?.aligned().min_hold(HOLD);
    let mut scheduled = Vec::new();
    for _ in 0..2 {
        let client = client(Arc::clone(&store), ctx)?;
        let (runs, store) = (Arc::clone(&runs), Arc::clone(&store));
        scheduled.push(client.schedule("sweep", schedule, move |lease| {
            let (runs, store) = (Arc::clone(&runs), Arc::clone(&store));
            async move {
                let row = store.inspect(lease.name()).await.map_err(|e| e.to_string());
                record(
                    &runs,
                    AlignedRun {
                        fence: lease.fence().get(),
                        holder: lease.holder().clone(),
                        row,
                    },
                );
            }
        })?);
    }
    // Two runs at least, or the checks that no round ran twice compare nothing: the watch goes
    // on past its six periods, up to six more, until it has seen two.
    let (stats, runs, periods) = watch(
        ctx,
        scheduled,
        &runs,
        Watch {
            length: PERIOD * PERIODS,
            period: PERIOD,
            at_least: 2,
        },
    )
    .await;
    // Each run read the row while it ran: the store named its lease, and, in fence order, each
    // lease was taken at least the minimum hold after the one before, by the store's own clock
    // (a release with a hold keeps the lease until `taken_at` plus the hold). Two runs of one
    // round break the second, whenever the instances' ticks and answers came.
    let mut taken = Vec::new();
    for run in &runs {
        match &run.row {
            Ok(Some(row)) if row.holder == run.holder && row.fence.get() == run.fence => {
                taken.push((run.fence, row.taken_at));
            }
            other => {
                return Err(CaseFailure::new(format!(
                    "a round ran while the store named another lease ({other:?} for fence {}): some round ran twice ({stats:?})",
                    run.fence
                )));
            }
        }
    }
    taken.sort_unstable();
    for pair in taken.windows(2) {
        let ((first, first_at), (next, next_at)) = (pair[0], pair[1]);
        let apart = next_at.duration_since(first_at).unwrap_or_default();
        ensure!(
            apart + HOLD_ROUNDING >= HOLD,
            "the leases of fences {first} and {next} were taken {apart:?} apart by the store's clock, within the minimum hold of {HOLD:?}: some round ran twice ({taken:?})"
        );
    }
    ensure!(
        runs.len() >= 2,
        "{} runs in {periods} periods between two instances: too few to tell whether a round ran twice ({stats:?})",
        runs.len()
    );
    // Counted, not timed: on a busy machine a run's answer can reach its instance late, so the
    // local times of two rounds' runs can fall close together while the store kept them apart.
    // There, too, an acquisition can take longer than a period: the rounds that fell meanwhile
    // are counted as missed, and count toward the least number here: those both instances
    // missed (a round one of them missed, the other one may have run).
    let rounds = PERIODS as usize;
    let missed = stats.iter().map(|s| s.missed).min().unwrap_or(0);
    ensure!(
        runs.len() + missed as usize + 2 >= rounds,
        "{} runs in {rounds} periods: {runs:?} ({stats:?})",
        runs.len()
    );
    // Six periods hold seven boundaries when the first falls just after the schedules start and
    // the last just before they stop; the minimum hold keeps any two runs 350 ms apart.
    ensure!(
        runs.len() <= rounds + 1,
        "{} runs in {rounds} periods between two instances: some round ran twice ({runs:?}, {stats:?})",
        runs.len()
    );
    let mut fences: Vec<u64> = runs.iter().map(|run| run.fence).collect();
    fences.sort_unstable();
    fences.dedup();
    ensure!(
        fences.len() == runs.len(),
        "two runs with one fence: {runs:?}"
    );
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

/// Two clients on one store schedule `rollup` on their leader (every 200 ms) for eight periods.
/// The store never grants the lease while another holder's is certainly unexpired (every grant
/// is watched, so a second leader is caught even when it was elected before any round). Every
/// round runs while the store names the runner's lease as the holder (each run reads the
/// row); one of them is elected and runs the rounds, all under its one term's lease (one fence),
/// and the other skips them: four to nine runs between them (the election may cost the first
/// rounds, and the rounds the schedules report missed count toward the four; rounds run on both
/// instances would make about sixteen), and two at least, for which the watch goes on up to
/// eight more periods (one more run than periods watched, at most). Once both are stopped,
/// leadership is given back: the lease is free within a second.
///
/// # Errors
/// A [`CaseFailure`] when the store grants the lease while another holder's is unexpired, a round
/// runs while the store names another holder, the rounds run on both instances or under more than
/// one fence, too few or too many run, a round failed or lost its lease, or `rollup` is still held
/// a second after both schedules stopped, and, [as any case](crate::cases#errors), when a call it
/// needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, its two schedules stop as
/// dropped [`Scheduled`] handles do, and the elected instance's campaign resigns, giving `rollup`
/// back.
pub async fn schedule_on_leader_runs_each_round_on_the_leader<B: TestBackend>(
    ctx: &Context<B>,
) -> CaseResult {
    let store = Arc::new(GrantWitness::new(ctx.store().await?, ctx.runtime().clone()));
    let runs: Arc<Mutex<Vec<LeaderRun>>> = Arc::default();
    let schedule = Schedule::every(LEADER_PERIOD)?;
    let mut scheduled = Vec::new();
    for instance in 0..2 {
        let client = client(Arc::clone(&store), ctx)?;
        let (runs, store) = (Arc::clone(&runs), Arc::clone(&store));
        scheduled.push(client.schedule_on_leader("rollup", schedule, move |lease| {
            let (runs, store) = (Arc::clone(&runs), Arc::clone(&store));
            async move {
                let row = store.inspect(lease.name()).await;
                let named = row.is_ok_and(|row| {
                    row.is_some_and(|row| row.holder == *lease.holder() && !row.is_expired())
                });
                record(
                    &runs,
                    LeaderRun {
                        instance,
                        fence: lease.fence().get(),
                        named,
                    },
                );
            }
        })?);
    }
    // Two runs at least, or the checks of who led and under which term compare nothing: the
    // watch goes on past its eight periods, up to eight more, until it has seen two.
    let (stats, runs, periods) = watch(
        ctx,
        scheduled,
        &runs,
        Watch {
            length: LEADER_PERIOD * LEADER_PERIODS,
            period: LEADER_PERIOD,
            at_least: 2,
        },
    )
    .await;
    let overlaps = store.overlaps();
    ensure!(
        overlaps.is_empty(),
        "two instances led at once: the store granted the leadership while another holder's lease was unexpired ({overlaps:?}; runs {runs:?})"
    );
    ensure!(
        runs.iter().all(|run| run.named),
        "a round ran while the store named another holder: two instances led at once ({runs:?}, {stats:?})"
    );
    ensure!(
        runs.len() >= 2,
        "{} runs in {periods} periods on the leader: too few to tell who led ({stats:?})",
        runs.len()
    );
    let leaders: BTreeSet<usize> = runs.iter().map(|run| run.instance).collect();
    ensure!(
        leaders.len() <= 1,
        "two instances led at once and both ran the rounds: {runs:?} ({stats:?})"
    );
    let terms: BTreeSet<u64> = runs.iter().map(|run| run.fence).collect();
    ensure!(
        terms.len() <= 1,
        "the leader's rounds ran under {} fences; nothing failed, so one term should hold: {runs:?}",
        terms.len()
    );
    // A round whose `inspect` took longer than a period (a busy machine) makes the rounds that
    // fell meanwhile missed; they count toward the least number, of the first eight periods.
    // At most one round per period watched.
    let missed: u64 = stats.iter().map(|s| s.missed).sum();
    ensure!(
        (runs.len() + missed as usize) * 2 >= LEADER_PERIODS as usize
            && runs.len() <= periods as usize + 1,
        "{} runs in {periods} periods on the leader: {runs:?} ({stats:?})",
        runs.len()
    );
    ensure!(
        stats.iter().all(|s| s.failed == 0 && s.lost == 0),
        "rounds failed or lost their lease: {stats:?}"
    );
    // A campaign's attempt still in flight when its schedule stopped gives its lease back as it
    // answers: free within a second, where a campaign that kept it would hold it for its TTL.
    let mut left = store.inspect(&name("rollup")).await?;
    for _ in 0..20 {
        if left.as_ref().is_none_or(LeaseInfo::is_expired) {
            break;
        }
        ctx.sleep(Duration::from_millis(50)).await;
        left = store.inspect(&name("rollup")).await?;
    }
    ensure!(
        left.as_ref().is_none_or(LeaseInfo::is_expired),
        "rollup still held a second after both schedules stopped: leadership was not given back ({left:?})"
    );
    Ok(Verdict::Passed)
}

/// One round of the aligned schedule, as its run saw it.
#[derive(Debug, Clone)]
struct AlignedRun {
    /// The fence of the lease it ran under.
    fence: u64,
    /// Its holder.
    holder: HolderId,
    /// The row the store answered while it ran.
    row: Result<Option<LeaseInfo>, String>,
}

/// One round of the leader's schedule, as its run saw it.
#[derive(Debug, Clone, Copy)]
struct LeaderRun {
    /// Which of the two clients ran it.
    instance: usize,
    /// The fence of the lease it ran under.
    fence: u64,
    /// Whether the store named that lease as the holder while it ran.
    named: bool,
}
