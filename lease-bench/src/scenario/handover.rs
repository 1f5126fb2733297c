//! Scenario 4: how long a lease takes to change hands. From a graceful release to a waiting
//! instance holding it, by polling and (PostgreSQL) woken by `LISTEN/NOTIFY`; from
//! an instance's graceful shutdown (`LeaseClient::shutdown`) to the next instance holding each of
//! its leases, waiting with `acquire` or leading through a campaign of its own; and from a
//! holder's crash to the takeover, about one TTL.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use lease_core::runtime::TokioRuntime;
use lease_core::{BoxError, HolderId, LeaseClient, LeaseName, LeaseStore, Ttl};

use crate::backend::{self, Backend, PoolSettings};
use crate::report::{Report, Table};
use crate::scenario::Context;
use crate::stats;

/// The TTL of the crashed holder's lease (a smoke run's is shorter).
const CRASH_TTL: Duration = Duration::from_secs(1);
const SMOKE_CRASH_TTL: Duration = Duration::from_millis(300);
/// How long a waiter waits before it gives up.
const WAIT_LIMIT: Duration = Duration::from_secs(30);
/// The leases an instance leads when it shuts down.
const SHUTDOWN_LEASES: usize = 10;
/// The grace period of those shutdowns: nothing runs, so it is never used up.
const GRACE: Duration = Duration::from_secs(5);

/// Measures `backend` and adds its table to `report`.
///
/// # Errors
/// When the backend cannot be reached or a waiter never gets the lease.
pub async fn run(
    context: &Context<'_>,
    backend: Backend,
    report: &mut Report,
) -> Result<(), BoxError> {
    let options = context.options;
    // A campaign's shutdown round takes up to its retry (5 s) where nothing is pushed.
    let (releases, crashes, shutdowns, campaign_shutdowns) = if options.smoke {
        (3, 1, 1, 1)
    } else {
        (30, 5, 10, 3)
    };
    let crash_ttl = if options.smoke {
        SMOKE_CRASH_TTL
    } else {
        CRASH_TTL
    };
    let mut table = Table::new(
        format!("Handover: {}", backend.key()),
        &[
            "from",
            "to the next holder",
            "p50",
            "p99",
            "longest",
            "samples",
        ],
    );
    let mut ways = vec![false];
    if matches!(backend, Backend::SqlxPostgres | Backend::DieselPostgres) {
        ways.push(true);
    }
    for notifications in ways {
        let settings = PoolSettings {
            size: 4,
            ping: false,
            notifications,
        };
        let target = backend::open(backend, context.servers, settings).await?;
        let mut times = graceful(&target.store, releases).await?;
        let (wake, campaigning) = if notifications {
            (
                "woken by LISTEN/NOTIFY",
                "campaigns, woken by LISTEN/NOTIFY",
            )
        } else if backend == Backend::Memory {
            // The memory store pushes its releases to the clients in the process.
            ("woken by the store", "campaigns, woken by the store")
        } else {
            ("polling (default backoff)", "campaigns, retry every 5 s")
        };
        table.row(row("graceful release", wake, &mut times));
        let mut times = shutdown(&target.store, shutdowns, Next::Acquires).await?;
        table.row(row(
            &format!("graceful shutdown ({SHUTDOWN_LEASES} leases)"),
            wake,
            &mut times,
        ));
        let mut times = shutdown(&target.store, campaign_shutdowns, Next::Campaigns).await?;
        table.row(row(
            &format!("graceful shutdown ({SHUTDOWN_LEASES} leases)"),
            campaigning,
            &mut times,
        ));
        if !notifications {
            let mut times = crash(&target.store, crashes, crash_ttl).await?;
            let mut beyond_ttl: Vec<Duration> =
                times.iter().map(|t| t.saturating_sub(crash_ttl)).collect();
            table.row(row(
                &format!("holder crash (TTL {crash_ttl:?})"),
                "polling (default backoff)",
                &mut times,
            ));
            table.row(row("  the same, beyond the TTL", "", &mut beyond_ttl));
        }
        target.finish().await;
    }
    table.note("Release: a waiter calls `LeaseClient::acquire` on its own client while the holder works; the holder releases 50 to 150 ms later; timed from the release call to `acquire` returning the guard. The first handover of each kind is a warm-up and not counted.");
    table.note(format!(
        "Shutdown: an instance leads {SHUTDOWN_LEASES} campaigns; the next instance waits for each lease with `acquire` (or, in the campaigns' rows, campaigns for each, and its first attempt has found the lease held); 50 to 150 ms later the first calls `LeaseClient::shutdown` (grace {GRACE:?}, never used up: nothing runs); timed from the shutdown call to each `acquire` returning (each campaign leading), one sample per lease. The first shutdown is a warm-up and not counted. A campaign that does not lead tries again every `LeaseConfig::campaign_retry` (the defaults: 5 s), so where nothing is pushed its wait is what is left of that retry when the shutdown comes."
    ));
    table.note(format!(
        "Crash: a holder takes the lease with a TTL of {crash_ttl:?} and is never heard of again; a waiter calls `acquire` at once; timed from the holder's acquisition. Polling waiters back off from 50 ms, doubling to at most 5 s, with jitter (the defaults)."
    ));
    if matches!(backend, Backend::SqlxPostgres | Backend::DieselPostgres) {
        table.note("Notifications: `with_notifications(true)`: the release statement notifies, and the waiter's client listens on one dedicated connection, outside the pool.");
    }
    report.add(table);
    Ok(())
}

fn row(from: &str, how: &str, times: &mut [Duration]) -> Vec<String> {
    vec![
        from.to_owned(),
        how.to_owned(),
        stats::percentile(times, 50.0).map_or("-".to_owned(), stats::ms),
        stats::percentile(times, 99.0).map_or("-".to_owned(), stats::ms),
        times.iter().max().map_or("-".to_owned(), |t| stats::ms(*t)),
        times.len().to_string(),
    ]
}

/// Times `count` graceful handovers (plus one warm-up).
async fn graceful(store: &Arc<dyn LeaseStore>, count: usize) -> Result<Vec<Duration>, BoxError> {
    let holder = LeaseClient::new(Arc::clone(store), TokioRuntime);
    let waiter = LeaseClient::new(Arc::clone(store), TokioRuntime);
    let mut times = Vec::with_capacity(count);
    for round in 0..=count {
        let name = LeaseName::new(format!("handover-{round}"))?;
        let guard = holder
            .try_acquire(&name)
            .await?
            .ok_or("the lease was held")?;
        let waiting = {
            let (waiter, name) = (waiter.clone(), name.clone());
            tokio::spawn(async move {
                let guard = waiter.acquire(&name, WAIT_LIMIT).await?;
                Ok::<_, BoxError>((guard, Instant::now()))
            })
        };
        // Varied, so the release does not always fall at the same point of the waiter's backoff.
        let work = 50 + (round as u64 * 37) % 100;
        tokio::time::sleep(Duration::from_millis(work)).await;
        let released = Instant::now();
        guard.release().await?;
        let (next, taken) = waiting.await??;
        if round > 0 {
            times.push(taken - released);
        }
        next.release().await?;
    }
    Ok(times)
}

/// How the next instance waits for the leases of the one that shuts down.
#[derive(Debug, Clone, Copy)]
enum Next {
    /// `acquire` on each lease, backing off between attempts.
    Acquires,
    /// A campaign for each lease, as a leader's schedule runs one.
    Campaigns,
}

/// Times `count` graceful shutdowns (plus one warm-up) of an instance leading
/// [`SHUTDOWN_LEASES`] campaigns: from the shutdown call to the next instance holding each, as
/// `next` waits for them.
async fn shutdown(
    store: &Arc<dyn LeaseStore>,
    count: usize,
    next_waits: Next,
) -> Result<Vec<Duration>, BoxError> {
    let next = LeaseClient::new(Arc::clone(store), TokioRuntime);
    let mut times = Vec::with_capacity(count * SHUTDOWN_LEASES);
    for round in 0..=count {
        let leaving = LeaseClient::new(Arc::clone(store), TokioRuntime);
        let mut leaders = Vec::with_capacity(SHUTDOWN_LEASES);
        for lease in 0..SHUTDOWN_LEASES {
            let leader = leaving.campaign(format!("shutdown-{round}-{lease}"))?;
            let mut changes = leader.changes();
            let led = tokio::time::timeout(WAIT_LIMIT, changes.next()).await?;
            if led != Some(true) {
                return Err("a campaign on a free lease did not lead".into());
            }
            leaders.push(leader);
        }
        let mut waiting = Vec::with_capacity(SHUTDOWN_LEASES);
        for leader in &leaders {
            waiting.push(wait_for(&next, leader.name().clone(), next_waits).await?);
        }
        let work = 50 + (round as u64 * 37) % 100;
        tokio::time::sleep(Duration::from_millis(work)).await;
        let began = Instant::now();
        let report = leaving.shutdown(GRACE).await;
        if !report.is_clean() || report.resigned != SHUTDOWN_LEASES {
            return Err(format!("the shutdown did not hand every lease back: {report:?}").into());
        }
        for waiter in waiting {
            let (held, taken) = waiter.await??;
            if round > 0 {
                times.push(taken - began);
            }
            held.give_back().await?;
        }
    }
    Ok(times)
}

/// What the next instance holds once it has a lease of the one that shut down.
enum Held {
    Guard(lease_core::LeaseGuard),
    Leader(lease_core::Leader),
}

impl Held {
    /// Releases the lease, or ends the campaign (which releases it).
    async fn give_back(self) -> Result<(), BoxError> {
        match self {
            Held::Guard(guard) => guard.release().await?,
            Held::Leader(leader) => leader.resign().await,
        }
        Ok(())
    }
}

/// Starts `next` waiting for `name` as `how` says, and answers the task that ends when it holds
/// the lease, with the moment it did. A campaign is started, and has been told it does not lead
/// (its first attempt found the lease held), before this returns.
async fn wait_for(
    next: &LeaseClient,
    name: LeaseName,
    how: Next,
) -> Result<tokio::task::JoinHandle<Result<(Held, Instant), BoxError>>, BoxError> {
    Ok(match how {
        Next::Acquires => {
            let next = next.clone();
            tokio::spawn(async move {
                let guard = next.acquire(&name, WAIT_LIMIT).await?;
                Ok((Held::Guard(guard), Instant::now()))
            })
        }
        Next::Campaigns => {
            let leader = next.campaign(name)?;
            let mut changes = leader.changes();
            // Nothing is told until the campaign leads: wait for its first attempt to find the
            // lease held instead (the campaigns start one at a time, so one more skip is its).
            let skipped = next.stats().skipped;
            let deadline = Instant::now() + WAIT_LIMIT;
            while next.stats().skipped == skipped {
                if Instant::now() > deadline {
                    return Err("a campaign made no attempt".into());
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            if leader.is_leader() {
                return Err("a campaign led a lease its holder had not handed back".into());
            }
            tokio::spawn(async move {
                match tokio::time::timeout(WAIT_LIMIT, changes.next()).await {
                    Ok(Some(true)) => Ok((Held::Leader(leader), Instant::now())),
                    _ => Err("the next instance's campaign did not lead".into()),
                }
            })
        }
    })
}

/// Times `count` takeovers after a crash.
async fn crash(
    store: &Arc<dyn LeaseStore>,
    count: usize,
    ttl: Duration,
) -> Result<Vec<Duration>, BoxError> {
    let waiter = LeaseClient::new(Arc::clone(store), TokioRuntime);
    let ttl = Ttl::new(ttl)?;
    let mut times = Vec::with_capacity(count);
    for round in 0..count {
        let name = LeaseName::new(format!("crash-{round}"))?;
        let crashed = Instant::now();
        store
            .try_acquire(&name, &HolderId::generate(), ttl)
            .await?
            .ok_or("the lease was held")?;
        let guard = waiter.acquire(&name, WAIT_LIMIT).await?;
        times.push(crashed.elapsed());
        guard.release().await?;
    }
    Ok(times)
}
