//! Scenario 2: 16 tasks hammering one held name. Failed attempts per second through the
//! library, its statement bare, and the seed's naive upsert; on a private PostgreSQL, the WAL
//! bytes each failed attempt writes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lease_core::runtime::TokioRuntime;
use lease_core::{BoxError, HolderId, LeaseClient, LeaseName, LeaseStore, Ttl};
use lease_sql::Dialect;

use crate::backend::{self, Backend, PoolSettings, Target};
use crate::report::{Report, Table};
use crate::scenario::Context;
use crate::wal::Wal;
use crate::{rotation, stats, tasks};

/// Tasks hammering the name: the scenario's 16, and one alone, where nothing shares a WAL flush.
const TASKS: [usize; 2] = [16, 1];
/// The pool: a connection per task.
const POOL_SIZE: u32 = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Library,
    Bare,
    Naive,
}

impl Variant {
    fn label(self) -> &'static str {
        match self {
            Self::Library => "library (`LeaseClient::try_acquire`)",
            Self::Bare => "bare library statement",
            Self::Naive => "naive upsert (the seed's)",
        }
    }
}

struct Sample {
    rate: f64,
    latencies: Vec<Duration>,
    wal_per_attempt: Option<f64>,
}

/// Measures `backend` and adds its table to `report`.
///
/// # Errors
/// When the backend cannot be reached, or an attempt fails or wins.
pub async fn run(
    context: &Context<'_>,
    backend: Backend,
    report: &mut Report,
) -> Result<(), BoxError> {
    let options = context.options;
    let settings = PoolSettings {
        size: POOL_SIZE,
        ping: false,
        notifications: false,
    };
    let target = backend::open(backend, context.servers, settings).await?;
    let client = LeaseClient::new(Arc::clone(&target.store), TokioRuntime);
    let name = LeaseName::new("contended")?;
    let ttl = Ttl::from_secs(3600)?;
    target
        .store
        .try_acquire(&name, &HolderId::generate(), ttl)
        .await?
        .ok_or("the contended lease was already held")?;
    let has_naive = target
        .raw
        .naive_try_acquire(&name, &HolderId::generate(), ttl)
        .await?
        .is_some();
    let wal = if backend.dialect() == Some(Dialect::Postgres) && context.servers.postgres_private {
        Some(Wal::connect(&context.servers.postgres_url()?).await?)
    } else {
        None
    };
    let mut variants = vec![Variant::Library, Variant::Bare];
    if has_naive {
        variants.push(Variant::Naive);
    }
    let warm_up = options.measure.min(Duration::from_millis(500));
    for &variant in &variants {
        measure(&client, &target, variant, &name, TASKS[0], warm_up, None).await?;
    }
    let baseline = if has_naive { variants.len() - 1 } else { 1 };
    let mut table = Table::new(
        format!("Contended acquire on one held name: {}", backend.key()),
        &[
            "tasks",
            "attempts",
            "failed attempts/s",
            if has_naive { "vs naive" } else { "vs bare" },
            "p50",
            "p99",
            "WAL bytes per failed attempt",
        ],
    );
    for tasks in TASKS {
        let mut samples: Vec<Vec<Sample>> = variants.iter().map(|_| Vec::new()).collect();
        for repetition in 0..options.repetitions {
            // Rotated, so no side always goes first.
            for i in rotation::order(variants.len(), repetition) {
                let variant = variants[i];
                let sample = measure(
                    &client,
                    &target,
                    variant,
                    &name,
                    tasks,
                    options.measure,
                    wal.as_ref(),
                )
                .await?;
                samples[i].push(sample);
            }
        }
        let rates: Vec<Vec<f64>> = samples
            .iter()
            .map(|s| s.iter().map(|s| s.rate).collect())
            .collect();
        for (i, variant) in variants.iter().enumerate() {
            // Against the naive upsert, or where there is none, against the bare statement.
            let ratios: Vec<f64> = rates[i]
                .iter()
                .zip(&rates[baseline])
                .map(|(a, b)| a / b)
                .collect();
            let mut latencies: Vec<Duration> = samples[i]
                .iter()
                .flat_map(|s| s.latencies.iter().copied())
                .collect();
            let wal_bytes: Vec<f64> = samples[i]
                .iter()
                .filter_map(|s| s.wal_per_attempt)
                .collect();
            table.row(vec![
                tasks.to_string(),
                variant.label().to_owned(),
                stats::median(&rates[i]).map_or("-".to_owned(), stats::whole),
                stats::median(&ratios).map_or("-".to_owned(), stats::ratio),
                stats::percentile(&mut latencies, 50.0).map_or("-".to_owned(), stats::ms),
                stats::percentile(&mut latencies, 99.0).map_or("-".to_owned(), stats::ms),
                stats::median(&wal_bytes).map_or("-".to_owned(), |b| format!("{b:.1}")),
            ]);
        }
    }
    table.note(format!(
        "{} repetitions of {:.1} s each, interleaved, the order rotated at each repetition; medians. A pool of {POOL_SIZE} connections without the checkout check. The scenario is 16 tasks; one task alone shows the cost of a WAL flush that no other attempt shares.",
        options.repetitions,
        options.measure.as_secs_f64()
    ));
    if let Some(note) = rotation::unbalanced(variants.len(), options.repetitions) {
        table.note(note);
    }
    if has_naive {
        table.note("The naive upsert is the seed's `INSERT ... ON CONFLICT (name) DO UPDATE ... WHERE expires_at < now()`: it decides under the row lock, so a failed attempt still locks the row, takes a transaction id and writes WAL. The library's statement reads the row first and inserts nothing when it is held.");
    }
    if wal.is_some() {
        table.note("WAL: `pg_current_wal_lsn()` before and after each measurement on a private server (nobody else writes there; checkpoints and background records are counted too), divided by the failed attempts. The private server runs with `fsync=off`, so a naive attempt's commit does not wait for the disk: its rate is higher than on a durable server.");
    } else if backend.dialect() == Some(Dialect::Postgres) {
        table.note("WAL: not measured, the PostgreSQL server is not private to this run. Its own settings decide whether a commit waits for the disk.");
    }
    report.add(table);
    if let Some(wal) = wal {
        wal.close().await;
    }
    drop(client);
    target.finish().await;
    Ok(())
}

async fn measure(
    client: &LeaseClient,
    target: &Target,
    variant: Variant,
    name: &LeaseName,
    tasks: usize,
    length: Duration,
    wal: Option<&Wal>,
) -> Result<Sample, BoxError> {
    let position = match wal {
        Some(wal) => Some(wal.position().await?),
        None => None,
    };
    let started = Instant::now();
    let deadline = started + length;
    let ttl = client.config().ttl;
    let contenders = (0..tasks).map(|_| {
        let client = client.clone();
        let raw = Arc::clone(&target.raw);
        let name = name.clone();
        async move {
            let holder = HolderId::generate();
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let began = Instant::now();
                let won = match variant {
                    Variant::Library => client.try_acquire(&name).await?.is_some(),
                    Variant::Bare => raw.try_acquire(&name, &holder, ttl).await?,
                    Variant::Naive => {
                        raw.naive_try_acquire(&name, &holder, ttl).await? == Some(true)
                    }
                };
                if won {
                    return Err::<Vec<Duration>, BoxError>("a contender took a held lease".into());
                }
                latencies.push(began.elapsed());
            }
            Ok(latencies)
        }
    });
    let latencies: Vec<Duration> = tasks::all(contenders)
        .await?
        .into_iter()
        .flatten()
        .collect();
    let elapsed = started.elapsed().as_secs_f64();
    let wal_per_attempt = match (wal, position) {
        (Some(wal), Some(position)) => {
            Some(wal.written_since(&position).await? as f64 / latencies.len().max(1) as f64)
        }
        _ => None,
    };
    Ok(Sample {
        rate: latencies.len() as f64 / elapsed,
        latencies,
        wal_per_attempt,
    })
}
