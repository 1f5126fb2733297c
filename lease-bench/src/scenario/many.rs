//! Scenario 3: one process holds many leases on a pool of two connections. Calls and
//! statements per renewal round, how long a round takes, the longest wait of any lease between
//! two renewals, and resident memory per held lease; then how many session advisory locks the
//! same pool can hold.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lease_core::runtime::TokioRuntime;
use lease_core::{BoxError, LeaseClient, LeaseGuard, Ttl};

use crate::backend::{self, Backend, PoolSettings};
use crate::counting::{self, CountingStore};
use crate::report::{Report, Table};
use crate::scenario::Context;
use crate::{stats, tasks};

/// The pool every lease is renewed through.
const POOL_SIZE: u32 = 2;
/// Tasks taking the leases at the start.
const ACQUIRERS: usize = 16;
/// Renewal rounds watched once every lease is held (a smoke run watches two).
const ROUNDS: u32 = 3;

/// Measures `backend` at every lease count and adds its table to `report`.
///
/// # Errors
/// When the backend cannot be reached or a lease cannot be taken.
pub async fn run(
    context: &Context<'_>,
    backend: Backend,
    report: &mut Report,
) -> Result<(), BoxError> {
    let options = context.options;
    // Default renewal is a quarter of the TTL; a shorter TTL than the default 2 minutes keeps
    // the run short and changes nothing else: the renewer works in periods.
    let ttl = if options.smoke {
        Ttl::from_secs(2)?
    } else {
        Ttl::from_secs(20)?
    };
    let rounds = if options.smoke { 2 } else { ROUNDS };
    let capacity_wait = if options.smoke {
        Duration::from_millis(300)
    } else {
        Duration::from_secs(1)
    };
    let mut table = Table::new(
        format!(
            "Many leases on a pool of {POOL_SIZE} connections: {}",
            backend.key()
        ),
        &[
            "leases",
            "taken in",
            "rounds watched",
            "calls per round",
            "statements per round",
            "longest round",
            "longest wait between renewals",
            "renewed late",
            "lost",
            "memory per lease",
        ],
    );
    for &count in &options.leases {
        table.row(hold(context, backend, count, ttl, rounds).await?);
    }
    let target = backend::open(
        backend,
        context.servers,
        PoolSettings::default_of(POOL_SIZE),
    )
    .await?;
    let capacity = target.raw.advisory_capacity(16, capacity_wait).await?;
    target.finish().await;
    let period = ttl.get() / 4;
    table.note(format!(
        "TTL {ttl:?}, renewed every {period:?} (the default quarter), through the library's one renewer; the default pool settings otherwise. {rounds} rounds watched once every lease is held; a round is the renewer's `renew_many` calls less than a quarter period apart."
    ));
    table.note(format!(
        "`statements per round`: {}. `renewed late`: waits of one lease between two of its renewals, or from its last renewal to the end of the watch, longer than 1.5 periods ({:?}), the renewer's own threshold for a warning; `lost`: leases no longer held once the rounds were watched, each counted once, whether a renewal was refused or the lease's local deadline passed without a renewal.",
        backend.dialect().map_or_else(
            || "none, the memory store runs no SQL".to_owned(),
            |d| format!(
                "a `renew_many` call of n leases is ceil(n / {}) statements on this dialect (lease-sql's batch)",
                d.renew_many_batch()
            )
        ),
        period + period / 2
    ));
    table.note("`memory per lease`: growth of the resident set (`VmRSS`) while the leases were taken, guards included, divided by the count; freed memory the allocator keeps from an earlier count can make a later figure smaller.");
    match capacity {
        Some(held) => table.note(format!(
            "Session advisory locks on the same pool of {POOL_SIZE}: {held} held at once, each pinning its connection; the next checkout waited {capacity_wait:?} without getting one."
        )),
        None => table.note("Session advisory locks: none on this backend."),
    }
    report.add(table);
    Ok(())
}

/// Takes and holds `count` leases, watches the renewals, and gives the table row.
async fn hold(
    context: &Context<'_>,
    backend: Backend,
    count: usize,
    ttl: Ttl,
    rounds: u32,
) -> Result<Vec<String>, BoxError> {
    let target = backend::open(
        backend,
        context.servers,
        PoolSettings::default_of(POOL_SIZE),
    )
    .await?;
    let prefix = "many-";
    let store = Arc::new(CountingStore::new(Arc::clone(&target.store), prefix, count));
    let mut client = LeaseClient::builder(Arc::clone(&store), TokioRuntime).ttl(ttl);
    if context.options.smoke {
        // The smoke run's short TTL makes the default store timeout (a renewal period) a
        // quarter second, which sixteen acquirers queueing for two connections of an unoptimised
        // build on a busy machine can exceed. Figures of a smoke run mean nothing anyway.
        client = client.store_timeout(Duration::from_secs(10));
    }
    let client = client.build()?;
    let period = client.config().renew_every;

    let before = resident_bytes();
    let started = Instant::now();
    let acquirers = (0..ACQUIRERS).map(|first| {
        let client = client.clone();
        async move {
            let mut guards = Vec::with_capacity(count / ACQUIRERS + 1);
            for index in (first..count).step_by(ACQUIRERS) {
                let guard = client
                    .try_acquire(format!("{prefix}{index}"))
                    .await?
                    .ok_or_else(|| format!("{prefix}{index} was already held"))?;
                guards.push(guard);
            }
            Ok::<_, BoxError>(guards)
        }
    });
    let guards: Vec<LeaseGuard> = tasks::all(acquirers).await?.into_iter().flatten().collect();
    let taken_in = started.elapsed();
    let after = resident_bytes();

    let watch_from = Instant::now();
    tokio::time::sleep(period * rounds + period / 2).await;
    let watched_until = Instant::now();
    let rounds = counting::rounds(store.calls_since(watch_from), period / 4);
    let dialect = backend.dialect();
    let statements = |round: &[counting::Call]| -> usize {
        round
            .iter()
            .map(|call| dialect.map_or(0, |d| call.leases.div_ceil(d.renew_many_batch())))
            .sum()
    };
    let worst_gap = store.worst_gap_until(watched_until);
    let renewed_late = worst_gap > period + period / 2;
    let row = vec![
        stats::whole(count as f64),
        stats::ms(taken_in),
        rounds.len().to_string(),
        rounds.iter().map(Vec::len).max().unwrap_or(0).to_string(),
        if dialect.is_some() {
            rounds
                .iter()
                .map(|r| statements(r))
                .max()
                .unwrap_or(0)
                .to_string()
        } else {
            "-".to_owned()
        },
        rounds
            .iter()
            // To the end of the slowest call: a held-up batch may end after later ones.
            .map(|round| counting::round_end(round) - round[0].start)
            .max()
            .map_or("-".to_owned(), stats::ms),
        format!(
            "{} ({:.2} periods)",
            stats::ms(worst_gap),
            worst_gap.as_secs_f64() / period.as_secs_f64()
        ),
        if renewed_late {
            "yes".to_owned()
        } else {
            "none".to_owned()
        },
        lost(&guards).to_string(),
        match (before, after) {
            (Some(before), Some(after)) => {
                format!("{} B", after.saturating_sub(before) / count as u64)
            }
            _ => "-".to_owned(),
        },
    ];
    // Dropping the table first lets the guards' releases fail at once instead of queueing
    // one statement per lease on two connections.
    let raw = Arc::clone(&target.raw);
    target.finish().await;
    drop(guards);
    drop(client);
    drop(raw);
    Ok(row)
}

/// How many of `guards` no longer hold their lease: each lost lease once, whether a renewal
/// was refused (the store's answer) or its local deadline passed without a renewal.
fn lost(guards: &[LeaseGuard]) -> usize {
    guards.iter().filter(|guard| !guard.is_held()).count()
}

/// The process's resident set (`VmRSS`), where `/proc` has it.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use lease_core::{HolderId, LeaseName, LeaseStore, MemoryStore};

    use super::*;

    /// A lease whose renewal the store refused is lost once, not once as refused and again as
    /// not held.
    #[tokio::test]
    async fn a_refused_renewal_is_one_lost_lease() {
        let inner = Arc::new(MemoryStore::new());
        let store = Arc::new(CountingStore::new(inner.clone(), "n", 2));
        let client = LeaseClient::builder(store, TokioRuntime)
            .ttl(Ttl::from_secs(2).unwrap())
            .build()
            .unwrap();
        let mut guards = Vec::new();
        for name in ["n0", "n1"] {
            guards.push(client.try_acquire(name).await.unwrap().unwrap());
        }
        // Another holder takes n1 behind its guard's back: its next renewal is refused.
        let name = LeaseName::new("n1").unwrap();
        assert!(
            inner
                .release(&name, guards[1].holder(), Duration::ZERO)
                .await
                .unwrap()
        );
        let ttl = Ttl::from_secs(60).unwrap();
        let thief = HolderId::generate();
        assert!(
            inner
                .try_acquire(&name, &thief, ttl)
                .await
                .unwrap()
                .is_some()
        );
        let period = client.config().renew_every;
        tokio::time::sleep(period * 2 + period / 2).await;
        assert!(guards[0].is_held());
        assert_eq!(lost(&guards), 1);
    }
}
