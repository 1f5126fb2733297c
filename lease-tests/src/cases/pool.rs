//! No connection held: holding leases must not keep a pooled connection from other work.

use std::time::Duration;

use futures::future::{Either, select};
use lease_core::{HolderId, LeaseName, LeaseStore, Ttl};

use super::name;
use crate::failure::ensure;
use crate::{CaseFailure, CaseResult, Context, PoolStats, TestBackend, Verdict};

/// The four kinds of work of the incident this library comes from, each under its own lease.
const JOBS: [&str; 4] = ["sweep", "alerts", "mail-checks", "uptime:node-a"];
/// How long a write through the pool may take while the leases are held: the incident's
/// readiness probe had one second, three is generous for a busy machine.
const PROBE_LIMIT: Duration = Duration::from_secs(3);
/// How many probe writes the case makes, spread over several renewal periods.
const PROBES: usize = 3;

/// With a pool of exactly one connection, the four leases of the incident (sweep, alerts,
/// mail-checks, uptime:node-a) are taken and kept alive by a renewal running alongside; while
/// they are held, a write through the same pool commits within three seconds, every time, and
/// the pool reports its connection idle between statements. Session advisory locks fail this
/// (the first lock pins the only connection).
pub async fn no_connection_held<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let Some(pool) = ctx.pooled(1).await? else {
        return Ok(Verdict::NotApplicable(format!(
            "{} has no connection pool",
            ctx.backend().name()
        )));
    };
    let store = pool.store();
    let ttl = Ttl::from_secs(2)?;
    let period = ttl.get() / 4;

    let mut held: Vec<(LeaseName, HolderId)> = Vec::new();
    for job in JOBS {
        let lease = name(job);
        let holder = HolderId::generate();
        let taken = ctx
            .within(PROBE_LIMIT, store.try_acquire(&lease, &holder, ttl))
            .await
            .ok_or_else(|| {
                CaseFailure::new(format!(
                    "taking {lease} with {} leases already held did not finish within \
                     {PROBE_LIMIT:?} on a pool of one connection",
                    held.len()
                ))
            })??;
        ensure!(taken.is_some(), "{lease} was refused in a fresh store");
        held.push((lease, holder));
    }

    // Keeps the leases alive the way a renewer does, until the checks are done.
    let renewal = async {
        loop {
            ctx.sleep(period).await;
            match store.renew_many(&held, ttl).await {
                Ok(renewed) if renewed.iter().all(|renewed| *renewed) => {}
                Ok(renewed) => {
                    break CaseFailure::new(format!(
                        "renewing the held leases failed while they were held: {renewed:?}"
                    ));
                }
                Err(error) => break CaseFailure::from(error),
            }
        }
    };
    let checks = async {
        let mut idle_seen: Option<PoolStats> = None;
        let mut samples = Vec::new();
        for probe in 0..PROBES {
            ctx.sleep(period).await;
            match ctx.within(PROBE_LIMIT, pool.probe()).await {
                Some(Ok(())) => {}
                Some(Err(error)) => {
                    return Err(CaseFailure::from(error));
                }
                None => {
                    return Err(CaseFailure::new(format!(
                        "probe write {probe} through the pool did not commit within \
                         {PROBE_LIMIT:?} while {} leases were held: they hold its connection",
                        held.len()
                    )));
                }
            }
            // Between statements every connection is idle; sample a few times because a
            // renewal or a connection on its way back to the pool may be caught mid-flight.
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
        Ok(())
    };
    match select(std::pin::pin!(renewal), std::pin::pin!(checks)).await {
        Either::Left((failure, _)) | Either::Right((Err(failure), _)) => return Err(failure),
        Either::Right((Ok(()), _)) => {}
    }

    let renewed = store.renew_many(&held, ttl).await?;
    ensure!(
        renewed.iter().all(|renewed| *renewed),
        "the leases were lost while the probes ran: {renewed:?}"
    );
    Ok(Verdict::Passed)
}
