//! No connection held: holding leases must not keep a pooled connection from other work.

use std::sync::Arc;
use std::time::Duration;

use lease_core::{LeaseClient, LeaseStore, Ttl};

use crate::failure::ensure;
use crate::{CaseFailure, CaseResult, Context, PoolState, TestBackend, Verdict};

/// The four kinds of work of the incident this library comes from, each under its own lease.
const JOBS: [&str; 4] = ["sweep", "alerts", "mail-checks", "uptime:node-a"];
/// How long a write through the pool may take while the leases are held: the incident's
/// readiness probe had one second, three is generous for a busy machine.
const PROBE_LIMIT: Duration = Duration::from_secs(3);
/// How many probe writes the case makes, spread over several renewal periods.
const PROBES: usize = 3;

/// With a pool of exactly one connection, the four leases of the incident (sweep, alerts,
/// mail-checks, uptime:node-a) are taken through a client and kept alive by its renewer; while
/// they are held, a write through the same pool commits within three seconds, every time, the
/// pool reports its connection idle between statements, and the renewals really happen (the
/// leases outlive their first TTL). Session advisory locks fail this: the first lock pins the
/// only connection.
///
/// # Errors
/// A [`CaseFailure`] when a probe write through the pool fails or does not commit within three
/// seconds while the leases are held, the pool never reports its one connection idle or reports
/// more than one, a lease is lost or not renewed past its first TTL, or leases remain once the
/// guards were released, and, [as any case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, its four guards are
/// released in the background and their renewal stops with them, and a probe write cut off is
/// dropped wherever it was.
pub async fn no_connection_held<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let Some(pool) = ctx.pooled(1).await? else {
        return Ok(Verdict::NotApplicable(format!(
            "{} has no connection pool",
            ctx.backend().name()
        )));
    };
    let ttl = Ttl::from_secs(2)?;
    let period = ttl.get() / 4;
    let client = LeaseClient::builder(Arc::clone(pool.store()), ctx.runtime().clone())
        .ttl(ttl)
        .renew_every(period)
        .store_timeout(PROBE_LIMIT)
        .build()?;

    let mut guards = Vec::new();
    for job in JOBS {
        let guard = client
            .try_acquire(job)
            .await?
            .ok_or_else(|| CaseFailure::new(format!("{job} was refused in a fresh store")))?;
        guards.push(guard);
    }

    let mut idle_seen: Option<PoolState> = None;
    let mut samples = Vec::new();
    for probe in 0..PROBES {
        ctx.sleep(period).await;
        match ctx.within(PROBE_LIMIT, pool.probe()).await {
            Some(Ok(())) => {}
            Some(Err(error)) => return Err(CaseFailure::from(error)),
            None => {
                return Err(CaseFailure::new(format!(
                    "probe write {probe} through the pool did not commit within {PROBE_LIMIT:?} \
                     while {} leases were held: they hold its connection",
                    guards.len()
                )));
            }
        }
        // Between statements the connection is idle; sample a few times because a renewal, or
        // a connection on its way back to the pool, may be caught mid-flight.
        for _ in 0..10 {
            let stats = pool.stats();
            samples.push(stats);
            ensure!(
                stats.size <= 1,
                "a pool of exactly one connection reports {} connections",
                stats.size
            );
            if stats.idle == stats.size {
                idle_seen = Some(stats);
                break;
            }
            ctx.sleep(Duration::from_millis(20)).await;
        }
    }
    ensure!(
        idle_seen.is_some(),
        "the pool never reported its connection idle while the leases were held: {samples:?}"
    );

    // Held past the first TTL: the renewer kept them alive through the same one connection.
    ctx.sleep(ttl.get().saturating_sub(period * PROBES as u32) + period)
        .await;
    for guard in &guards {
        ensure!(
            guard.is_held(),
            "{} was lost while the probes ran",
            guard.name()
        );
        let info = pool.store().inspect(guard.name()).await?;
        ensure!(
            info.as_ref()
                .is_some_and(|info| info.holder == *guard.holder()
                    && !info.is_expired()
                    && info
                        .expires_at
                        .duration_since(info.taken_at)
                        .unwrap_or_default()
                        > ttl.get()),
            "{} was not renewed past its first TTL: {info:?}",
            guard.name()
        );
    }
    for guard in guards {
        guard.release().await?;
    }
    ensure!(
        pool.store().list().await?.is_empty(),
        "leases remained after every guard was released"
    );
    Ok(Verdict::Passed)
}
