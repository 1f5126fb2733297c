//! Scenario 5: fenced writes. Transactions of one insert into a small protected table per
//! second: plain, with the store's fenced check as their first statement, and through the
//! drivers' `fenced` functions (on PostgreSQL and MariaDB: the check with the commit, in one
//! message), on the same pool in the same run, at 1 and 16 tasks, each task holding a lease of
//! its own; and what a fenced transaction held open costs the holder's renewal of that lease
//! from another connection (checked first, it waits for the row lock, so about as long as the
//! transaction stays open; checked at the commit, it does not wait).

use std::sync::Arc;
use std::time::{Duration, Instant};

use lease_core::runtime::TokioRuntime;
use lease_core::{BoxError, LeaseClient, LeaseGuard, Ttl};
use tokio::sync::oneshot;

use crate::backend::{self, Backend, PoolSettings};
use crate::protected::{Fencing, Hold, Protected};
use crate::report::{Report, Table};
use crate::scenario::Context;
use crate::{rotation, stats, tasks};

/// Concurrent tasks measured.
const TASKS: [usize; 2] = [1, 16];
/// The pool size: one connection per task at the most concurrent.
const POOL_SIZE: u32 = 16;
/// How long the fenced transaction stays open while the holder renews.
const HOLDS: [Duration; 2] = [Duration::from_millis(50), Duration::from_millis(200)];
/// Renewals timed per hold and repetition.
const RENEWALS: usize = 5;
/// The transactions measured side by side.
const FENCINGS: [Fencing; 4] = [
    Fencing::Plain,
    Fencing::AtStart,
    Fencing::Fenced,
    Fencing::FencedAtBegin,
];

/// What one measurement saw.
struct Sample {
    rate: f64,
    latencies: Vec<Duration>,
}

/// Measures `backend` and adds its tables to `report`.
///
/// # Errors
/// When the backend cannot be reached or a transaction fails.
pub async fn run(
    context: &Context<'_>,
    backend: Backend,
    report: &mut Report,
) -> Result<(), BoxError> {
    let options = context.options;
    let target = backend::open(
        backend,
        context.servers,
        PoolSettings::default_of(POOL_SIZE),
    )
    .await?;
    let Some(protected) = target.protected.clone() else {
        eprintln!(
            "lease-bench: fenced on {}: not applicable (no transactions to fence)",
            backend.key()
        );
        target.finish().await;
        return Ok(());
    };
    protected.create().await?;
    // Long enough that the client renews none of the leases while the scenario runs: a
    // renewal waits for the lease rows the fenced transactions lock, which would slow those
    // alone.
    let ttl = Ttl::from_secs(3_600)?;
    let client = LeaseClient::builder(Arc::clone(&target.store), TokioRuntime)
        .ttl(ttl)
        .build()?;
    let mut guards = Vec::new();
    for task in 0..POOL_SIZE {
        let guard = client
            .try_acquire(format!("fenced-{task}"))
            .await?
            .ok_or("a fresh lease was held")?;
        guards.push(Arc::new(guard));
    }

    let mut rates = Table::new(
        format!("Fenced writes: {}", backend.key()),
        &[
            "tasks",
            "plain tx/s",
            "check first tx/s",
            "check first / plain",
            "`fenced()` tx/s",
            "`fenced()` / plain",
            "at begin tx/s",
            "at begin / plain",
            "plain p50",
            "check first p50",
            "`fenced()` p50",
            "at begin p50",
            "at begin p99",
        ],
    );
    let warm_up = options.measure.min(Duration::from_millis(500));
    for fencing in FENCINGS {
        measure(&protected, &guards, fencing, 16, warm_up).await?;
    }
    for tasks in TASKS {
        let mut samples: [Vec<Sample>; 4] = Default::default();
        for repetition in 0..options.repetitions {
            // Interleaved, so a burst of load elsewhere hits every side alike, and rotated, so
            // no side always goes first.
            for side in rotation::order(FENCINGS.len(), repetition) {
                samples[side].push(
                    measure(&protected, &guards, FENCINGS[side], tasks, options.measure).await?,
                );
            }
        }
        let [plain, first, fenced, begun] = samples;
        let ratio = |side: &[Sample]| {
            let ratios: Vec<f64> = side
                .iter()
                .zip(&plain)
                .map(|(s, p)| s.rate / p.rate)
                .collect();
            stats::median(&ratios).map_or("-".to_owned(), stats::ratio)
        };
        let (first_ratio, fenced_ratio, begun_ratio) =
            (ratio(&first), ratio(&fenced), ratio(&begun));
        let rate = |samples: &[Sample]| {
            stats::whole(
                stats::median(&samples.iter().map(|s| s.rate).collect::<Vec<_>>()).unwrap_or(0.0),
            )
        };
        let (plain_rate, first_rate, fenced_rate, begun_rate) =
            (rate(&plain), rate(&first), rate(&fenced), rate(&begun));
        let (plain_p50, _) = percentiles(plain);
        let (first_p50, _) = percentiles(first);
        let (fenced_p50, _) = percentiles(fenced);
        let (begun_p50, begun_p99) = percentiles(begun);
        rates.row(vec![
            tasks.to_string(),
            plain_rate,
            first_rate,
            first_ratio,
            fenced_rate,
            fenced_ratio,
            begun_rate,
            begun_ratio,
            plain_p50,
            first_p50,
            fenced_p50,
            begun_p50,
            begun_p99,
        ]);
    }
    rates.note(format!(
        "{} repetitions of {:.1} s each, interleaved, the order rotated at each repetition; rates are medians, ratios the median of the per-repetition ratios.",
        options.repetitions,
        options.measure.as_secs_f64()
    ));
    if let Some(note) = rotation::unbalanced(FENCINGS.len(), options.repetitions) {
        rates.note(note);
    }
    rates.note(format!(
        "A pool of {POOL_SIZE} connections (the drivers' default check at checkout); each task holds a lease of its own. `plain`: begin, one insert of a bound integer into a one-column table, commit; `check first`: the same with `store.fence(&mut *tx, &guard)` first (`conn.transaction(...)` through diesel-async); `fenced()`: the same insert through `lease_sqlx::fenced` / `lease_diesel::fenced`, which on PostgreSQL and MariaDB send the check with the commit in one message (on PostgreSQL the `EXECUTE` of a check the connection prepared) and on SQLite check first; `at begin`: through `fenced_with(.., CheckAt::Begin, ..)`, which sends the check with the `BEGIN` in one message (SQLite: checks first)."
    ));

    let mut renewals = Table::new(
        format!(
            "Renewal while a fenced transaction is open: {}",
            backend.key()
        ),
        &[
            "open for",
            "check first: renewal p50",
            "longest",
            "`fenced()`: renewal p50",
            "longest",
            "at begin: renewal p50",
            "longest",
            "samples",
        ],
    );
    let renewals_per_hold = if options.smoke { 1 } else { RENEWALS };
    let guard = &guards[0];
    // Every connection of the pool prepares the renewal statement before one is timed: sent
    // from as many tasks at once as the pool has connections.
    let warm_up = (0..POOL_SIZE).map(|_| {
        let (store, guard) = (Arc::clone(&target.store), Arc::clone(guard));
        async move { Ok(store.renew(guard.name(), guard.holder(), ttl).await?) }
    });
    tasks::all(warm_up).await?;
    let mut holds = vec![Duration::ZERO];
    holds.extend(HOLDS);
    let fencings = [Fencing::AtStart, Fencing::Fenced, Fencing::FencedAtBegin];
    for open in holds {
        let mut row = vec![if open.is_zero() {
            "no transaction open".to_owned()
        } else {
            stats::ms(open)
        }];
        // The three interleaved, the order rotated at each renewal, as the rates' sides are.
        let mut times: [Vec<Duration>; 3] = Default::default();
        for turn in 0..options.repetitions * renewals_per_hold {
            for step in 0..fencings.len() {
                let side = (turn + step) % fencings.len();
                let took =
                    renewal(&target.store, &protected, guard, ttl, fencings[side], open).await?;
                times[side].push(took);
            }
        }
        let samples = times[0].len();
        for mut times in times {
            row.push(stats::percentile(&mut times, 50.0).map_or("-".to_owned(), stats::ms));
            row.push(stats::percentile(&mut times, 100.0).map_or("-".to_owned(), stats::ms));
        }
        row.push(samples.to_string());
        renewals.row(row);
    }
    renewals.note("The holder's renewal statement (`LeaseStore::renew`), prepared on every connection of the pool first, the three columns interleaved with their order rotated at each renewal; from another connection of the same pool, sent once the transaction is open (after its check, when it checks first) and timed until it answers; the transaction inserts and commits after `open for`. Checked first, the renewal waits for the row lock the check took, so about as long as the transaction stays open; through `fenced()` on PostgreSQL and MariaDB the row is locked only at the commit, so it does not wait (on SQLite `fenced()` checks first); checked at the begin, it waits as when checked first.");

    for guard in guards {
        if let Ok(guard) = Arc::try_unwrap(guard) {
            guard.release().await?;
        }
    }
    drop(client);
    target.finish().await;
    report.add(rates);
    report.add(renewals);
    Ok(())
}

fn percentiles(samples: Vec<Sample>) -> (String, String) {
    let mut all: Vec<Duration> = samples.into_iter().flat_map(|s| s.latencies).collect();
    let p50 = stats::percentile(&mut all, 50.0).map_or("-".to_owned(), stats::ms);
    let p99 = stats::percentile(&mut all, 99.0).map_or("-".to_owned(), stats::ms);
    (p50, p99)
}

/// Runs `tasks` tasks writing transactions for `length`, each with its own lease.
async fn measure(
    protected: &Arc<dyn Protected>,
    guards: &[Arc<LeaseGuard>],
    fencing: Fencing,
    tasks: usize,
    length: Duration,
) -> Result<Sample, BoxError> {
    let started = Instant::now();
    let deadline = started + length;
    let writers = (0..tasks).map(|task| {
        let protected = Arc::clone(protected);
        let guard = Arc::clone(&guards[task % guards.len()]);
        async move {
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let began = Instant::now();
                protected.insert(guard.as_ref(), fencing, None).await?;
                latencies.push(began.elapsed());
            }
            Ok::<_, BoxError>(latencies)
        }
    });
    let latencies: Vec<Duration> = tasks::all(writers).await?.into_iter().flatten().collect();
    Ok(Sample {
        rate: latencies.len() as f64 / started.elapsed().as_secs_f64(),
        latencies,
    })
}

/// One renewal of `guard`'s lease while a transaction fenced as `fencing` says stays open for
/// `open` (or, for zero, with no transaction at all): how long the renewal took.
async fn renewal(
    store: &Arc<dyn lease_core::LeaseStore>,
    protected: &Arc<dyn Protected>,
    guard: &Arc<LeaseGuard>,
    ttl: Ttl,
    fencing: Fencing,
    open: Duration,
) -> Result<Duration, BoxError> {
    if open.is_zero() {
        let began = Instant::now();
        if !store.renew(guard.name(), guard.holder(), ttl).await? {
            return Err(format!("{} was not renewed", guard.name()).into());
        }
        return Ok(began.elapsed());
    }
    let (checked, was_checked) = oneshot::channel();
    let transaction = {
        let protected = Arc::clone(protected);
        let guard = Arc::clone(guard);
        tokio::spawn(async move {
            protected
                .insert(guard.as_ref(), fencing, Some(Hold { open, checked }))
                .await
        })
    };
    if was_checked.await.is_err() {
        transaction.await??;
        return Err("the fenced transaction ended before its check".into());
    }
    let began = Instant::now();
    let renewed = store.renew(guard.name(), guard.holder(), ttl).await?;
    let took = began.elapsed();
    transaction.await??;
    if !renewed {
        return Err(format!("{} was not renewed", guard.name()).into());
    }
    Ok(took)
}
