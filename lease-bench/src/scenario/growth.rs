//! Scenario 6: whether the rate holds as the table grows. Acquire and release cycles (at 1 and
//! 16 tasks) and renewals of ten leases in one `renew_many` call, on a table that holds none,
//! then 10,000, then 100,000 released rows, added with SQL as if earlier leases had come and
//! gone, with autovacuum off for the table, so that it is never analyzed: the planner knows
//! only its size, as with a table that grew since its last ANALYZE.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lease_core::runtime::TokioRuntime;
use lease_core::{BoxError, HolderId, LeaseClient, LeaseName, LeaseStore, Ttl};

use crate::backend::{self, Backend, PoolSettings};
use crate::report::{Report, Table};
use crate::scenario::Context;
use crate::scenario::cycles::{self, Variant};
use crate::stats;

/// Released rows in the table at each step.
const SIZES: [usize; 3] = [0, 10_000, 100_000];
const SMOKE_SIZES: [usize; 2] = [0, 1_000];
/// Leases renewed by each `renew_many` call.
const RENEWED: usize = 10;

/// Measures `backend` and adds its table to `report`.
///
/// # Errors
/// When the backend cannot be reached or a statement fails.
pub async fn run(
    context: &Context<'_>,
    backend: Backend,
    report: &mut Report,
) -> Result<(), BoxError> {
    let options = context.options;
    let target = backend::open(backend, context.servers, PoolSettings::default_of(16)).await?;
    if !target.raw.add_released_rows(0, 0).await? {
        eprintln!(
            "lease-bench: growth on {}: not applicable (released rows are written here for PostgreSQL only)",
            backend.key()
        );
        target.finish().await;
        return Ok(());
    }
    let client = LeaseClient::new(Arc::clone(&target.store), TokioRuntime);
    let ttl = Ttl::from_secs(60)?;
    let holder = HolderId::generate();
    let mut pairs = Vec::new();
    for i in 0..RENEWED {
        let name = LeaseName::new(format!("growth-{i}"))?;
        if target
            .store
            .try_acquire(&name, &holder, ttl)
            .await?
            .is_none()
        {
            return Err(format!("{name} was held by somebody else").into());
        }
        pairs.push((name, holder.clone()));
    }
    let mut table = Table::new(
        format!("Growth of the table: {}", backend.key()),
        &[
            "released rows",
            "cycles/s, 1 task",
            "cycles/s, 16 tasks",
            "16 tasks / empty",
            "renew_many/s",
            "renew_many p50",
            "renew_many / empty",
        ],
    );
    let sizes: &[usize] = if options.smoke { &SMOKE_SIZES } else { &SIZES };
    let warm_up = options.measure.min(Duration::from_millis(500));
    cycles::measure(&client, &target, Variant::Library, 16, warm_up).await?;
    let mut rows_now = 0;
    let mut empty: Option<(f64, f64)> = None;
    for &size in sizes {
        target
            .raw
            .add_released_rows(rows_now, size - rows_now)
            .await?;
        rows_now = size;
        let mut one = Vec::new();
        let mut sixteen = Vec::new();
        let mut renewals = Vec::new();
        let mut latencies = Vec::new();
        for _ in 0..options.repetitions {
            one.push(
                cycles::measure(&client, &target, Variant::Library, 1, options.measure)
                    .await?
                    .rate,
            );
            sixteen.push(
                cycles::measure(&client, &target, Variant::Library, 16, options.measure)
                    .await?
                    .rate,
            );
            let (rate, times) =
                renew_many(target.store.as_ref(), &pairs, ttl, options.measure).await?;
            renewals.push(rate);
            latencies.extend(times);
        }
        let median = |values: &[f64]| stats::median(values).unwrap_or(0.0);
        let (sixteen, renewals) = (median(&sixteen), median(&renewals));
        let (empty_sixteen, empty_renewals) = *empty.get_or_insert((sixteen, renewals));
        table.row(vec![
            stats::whole(size as f64),
            stats::whole(median(&one)),
            stats::whole(sixteen),
            stats::ratio_to(sixteen, empty_sixteen),
            stats::whole(renewals),
            stats::percentile(&mut latencies, 50.0).map_or("-".to_owned(), stats::ms),
            stats::ratio_to(renewals, empty_renewals),
        ]);
    }
    table.note(format!(
        "{} repetitions of {:.1} s each at each size; rates are medians. Cycles: `LeaseClient::try_acquire` and `LeaseGuard::release` on a name of each task's own, a pool of 16 connections. `renew_many`: one task renewing the same {RENEWED} held leases in one call, again and again.",
        options.repetitions,
        options.measure.as_secs_f64()
    ));
    table.note("The sizes are measured one after another, not side by side: the rows of a step stay for the next, so the steps cannot be interleaved as the other scenarios' sides are. The ratios to the empty table therefore carry whatever drift in the machine's speed came between the steps, as well as the table's growth; a ratio is `-` where nothing finished on the empty table.");
    table.note("The released rows (no holder, fence 1) are inserted with SQL after the store's setup; autovacuum is off for the table and nothing analyzes it, so the planner knows only its size in pages: what a table that grew since its last ANALYZE gets.");
    for (name, holder) in &pairs {
        target.store.release(name, holder, Duration::ZERO).await?;
    }
    drop(client);
    target.finish().await;
    report.add(table);
    Ok(())
}

/// `renew_many` of `pairs`, again and again for `length`: calls per second and each call's time.
async fn renew_many(
    store: &dyn LeaseStore,
    pairs: &[(LeaseName, HolderId)],
    ttl: Ttl,
    length: Duration,
) -> Result<(f64, Vec<Duration>), BoxError> {
    let started = Instant::now();
    let mut times = Vec::new();
    while started.elapsed() < length {
        let began = Instant::now();
        let renewed = store.renew_many(pairs, ttl).await?;
        times.push(began.elapsed());
        if renewed.iter().any(|renewed| !renewed) {
            return Err("a held lease was not renewed".into());
        }
    }
    Ok((times.len() as f64 / started.elapsed().as_secs_f64(), times))
}
