//! Scenario 1: acquire and release cycles per second on distinct names, at 1, 4 and 16
//! concurrent tasks, beside the same statements through the same pool without the library and
//! beside session advisory locks on that pool; with and without the pool's check at checkout.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lease_core::runtime::TokioRuntime;
use lease_core::{BoxError, HolderId, LeaseClient, LeaseName, Ttl};

use crate::backend::{self, Backend, PoolSettings, Target};
use crate::report::{ChartPoint, Report, Table};
use crate::scenario::Context;
use crate::{rotation, stats, tasks};

/// Concurrent tasks measured.
const TASKS: [usize; 3] = [1, 4, 16];
/// The pool size: one connection per task at the most concurrent.
const POOL_SIZE: u32 = 16;

/// What one cycle runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// `LeaseClient::try_acquire` then `LeaseGuard::release`.
    Library,
    /// The same two statements through the same pool.
    Bare,
    /// The same two statements prepared once per connection, where `Bare` does not prepare
    /// them (diesel's `sql_query`).
    Prepared,
    /// A session advisory lock taken and released on a pooled connection.
    Advisory,
}

/// What one measurement saw.
pub struct Sample {
    /// Cycles per second.
    pub rate: f64,
    /// The time of every cycle.
    pub latencies: Vec<Duration>,
}

/// Measures `backend` and adds its table to `report`.
///
/// # Errors
/// When the backend cannot be reached or a cycle fails.
pub async fn run(
    context: &Context<'_>,
    backend: Backend,
    report: &mut Report,
) -> Result<(), BoxError> {
    let options = context.options;
    let mut table = Table::new(
        format!("Acquire and release cycles: {}", backend.key()),
        &[
            "pool check",
            "tasks",
            "library cycles/s",
            "bare cycles/s",
            "library / bare",
            "bare prepared cycles/s",
            "library / bare prepared",
            "library p50",
            "library p99",
            "bare p50",
            "bare p99",
            "advisory cycles/s",
        ],
    );
    let pings: &[bool] = if backend.has_pool() {
        &[true, false]
    } else {
        &[false]
    };
    // The same sides with the check and without it: the backend decides them.
    let mut unbalanced = None;
    for &ping in pings {
        let settings = PoolSettings {
            size: POOL_SIZE,
            ping,
            notifications: false,
        };
        let target = backend::open(backend, context.servers, settings).await?;
        let client = LeaseClient::new(Arc::clone(&target.store), TokioRuntime);
        let has_advisory = target.raw.advisory_cycle("probe").await?.is_some();
        let has_prepared = target.raw.has_prepared();
        let sides: Vec<Variant> = [
            Variant::Library,
            Variant::Bare,
            Variant::Prepared,
            Variant::Advisory,
        ]
        .into_iter()
        .filter(|&variant| {
            (variant != Variant::Advisory || has_advisory)
                && (variant != Variant::Prepared || has_prepared)
        })
        .collect();
        unbalanced = rotation::unbalanced(sides.len(), options.repetitions);
        // Opens every connection and prepares every statement before anything is timed.
        let warm_up = options.measure.min(Duration::from_millis(500));
        for &variant in &sides {
            measure(&client, &target, variant, 16, warm_up).await?;
        }
        for tasks in TASKS {
            let mut samples: Vec<Vec<Sample>> = sides.iter().map(|_| Vec::new()).collect();
            for repetition in 0..options.repetitions {
                // Interleaved, so a burst of load elsewhere hits every side alike, and rotated,
                // so no side always goes first.
                for side in rotation::order(sides.len(), repetition) {
                    samples[side].push(
                        measure(&client, &target, sides[side], tasks, options.measure).await?,
                    );
                }
            }
            let mut of = |variant: Variant| {
                sides
                    .iter()
                    .position(|&side| side == variant)
                    .map_or_else(Vec::new, |side| std::mem::take(&mut samples[side]))
            };
            let (library, bare, prepared, advisory) = (
                of(Variant::Library),
                of(Variant::Bare),
                of(Variant::Prepared),
                of(Variant::Advisory),
            );
            let ratios: Vec<f64> = library
                .iter()
                .zip(&bare)
                .map(|(l, b)| l.rate / b.rate)
                .collect();
            let prepared_ratios: Vec<f64> = library
                .iter()
                .zip(&prepared)
                .map(|(l, p)| l.rate / p.rate)
                .collect();
            let rate = |samples: &[Sample]| {
                stats::median(&samples.iter().map(|s| s.rate).collect::<Vec<_>>())
            };
            let latencies = |samples: Vec<Sample>| -> (String, String) {
                let mut all: Vec<Duration> =
                    samples.into_iter().flat_map(|s| s.latencies).collect();
                let p50 = stats::percentile(&mut all, 50.0).map_or("-".to_owned(), stats::ms);
                let p99 = stats::percentile(&mut all, 99.0).map_or("-".to_owned(), stats::ms);
                (p50, p99)
            };
            let (library_rate, bare_rate) =
                (rate(&library).unwrap_or(0.0), rate(&bare).unwrap_or(0.0));
            let advisory_rate = rate(&advisory);
            let prepared_rate = rate(&prepared);
            let (library_p50, library_p99) = latencies(library);
            let (bare_p50, bare_p99) = latencies(bare);
            table.row(vec![
                if backend.has_pool() {
                    if ping {
                        "on (default)".into()
                    } else {
                        "off".into()
                    }
                } else {
                    "-".into()
                },
                tasks.to_string(),
                stats::whole(library_rate),
                stats::whole(bare_rate),
                stats::median(&ratios).map_or("-".to_owned(), stats::ratio),
                prepared_rate.map_or("-".to_owned(), stats::whole),
                stats::median(&prepared_ratios).map_or("-".to_owned(), stats::ratio),
                library_p50,
                library_p99,
                bare_p50,
                bare_p99,
                advisory_rate.map_or("-".to_owned(), stats::whole),
            ]);
            if !ping {
                report.chart.push(ChartPoint {
                    backend: backend.key().to_owned(),
                    tasks,
                    library: library_rate,
                    // The like-for-like baseline: diesel's prepared statements where it has
                    // them (its plain `sql_query` prepares nothing, which no library would).
                    bare: prepared_rate.unwrap_or(bare_rate),
                });
            }
        }
        drop(client);
        target.finish().await;
    }
    table.note(format!(
        "{} repetitions of {:.1} s each, interleaved, the order rotated at each repetition; rates are medians, `library / bare` the median of the per-repetition ratios, latencies over every cycle of every repetition.",
        options.repetitions,
        options.measure.as_secs_f64()
    ));
    if let Some(note) = unbalanced {
        table.note(note);
    }
    table.note(format!(
        "A pool of {POOL_SIZE} connections; each task cycles on a name of its own. `bare` sends the library's own statements (lease-sql's text and parameters) through the same pool without `LeaseClient`{}.",
        if backend == Backend::Memory { " (for memory: the store's methods called directly)" } else { "" }
    ));
    if matches!(
        backend,
        Backend::DieselPostgres | Backend::DieselMariaDb | Backend::DieselSqlite
    ) {
        table.note("`bare` goes through `diesel::sql_query`, which diesel never caches: it is prepared (on PostgreSQL: parsed and planned, one more round trip) at every call, while the library prepares each statement once per connection. `bare prepared` sends the same text and parameters as a query fragment diesel caches by its text, as the library does: the like-for-like baseline.");
    }
    if backend.has_pool() {
        table.note("`pool check`: sqlx's `test_before_acquire` (a ping at every checkout, on by default) or deadpool's `RecyclingMethod::Verified` (a `SELECT 1` at every checkout, diesel-async's default); `off` is `test_before_acquire(false)` or `RecyclingMethod::Fast`.");
    }
    report.add(table);
    Ok(())
}

/// Runs `tasks` tasks cycling for `length`.
pub async fn measure(
    client: &LeaseClient,
    target: &Target,
    variant: Variant,
    tasks: usize,
    length: Duration,
) -> Result<Sample, BoxError> {
    let started = Instant::now();
    let deadline = started + length;
    let ttl = client.config().ttl;
    let mut cyclers = Vec::with_capacity(tasks);
    for task in 0..tasks {
        let client = client.clone();
        let raw = Arc::clone(&target.raw);
        let name = LeaseName::new(format!("cycle-{task}"))?;
        cyclers.push(async move {
            let holder = HolderId::generate();
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let began = Instant::now();
                cycle(&client, raw.as_ref(), variant, &name, &holder, ttl).await?;
                latencies.push(began.elapsed());
            }
            Ok::<_, BoxError>(latencies)
        });
    }
    let latencies: Vec<Duration> = tasks::all(cyclers).await?.into_iter().flatten().collect();
    let elapsed = started.elapsed().as_secs_f64();
    Ok(Sample {
        rate: latencies.len() as f64 / elapsed,
        latencies,
    })
}

async fn cycle(
    client: &LeaseClient,
    raw: &dyn crate::raw::Raw,
    variant: Variant,
    name: &LeaseName,
    holder: &HolderId,
    ttl: Ttl,
) -> Result<(), BoxError> {
    match variant {
        Variant::Library => {
            let guard = client
                .try_acquire(name)
                .await?
                .ok_or_else(|| format!("{name} was held by somebody else"))?;
            guard.release().await?;
        }
        Variant::Bare => {
            if !raw.try_acquire(name, holder, ttl).await? {
                return Err(format!("{name} was held by somebody else").into());
            }
            if !raw.release(name, holder).await? {
                return Err(format!("{name} was not released").into());
            }
        }
        Variant::Prepared => {
            if raw.prepared_try_acquire(name, holder, ttl).await? != Some(true) {
                return Err(format!("{name} was held by somebody else").into());
            }
            if raw.prepared_release(name, holder).await? != Some(true) {
                return Err(format!("{name} was not released").into());
            }
        }
        Variant::Advisory => {
            if raw.advisory_cycle(name.as_str()).await? != Some(true) {
                return Err(format!("advisory lock {name} was held by somebody else").into());
            }
        }
    }
    Ok(())
}
