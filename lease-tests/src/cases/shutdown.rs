//! A graceful shutdown through the store: every lease the client holds is free for the next
//! instance at once, whatever held it (work that finished, work stopped at the end of the grace
//! period, a guard its owner kept, a campaign that led), and a minimum hold is kept.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::channel::oneshot;
use lease_core::{HolderId, LeaseClient, LeaseStore, LossReason, RunOptions, RunOutcome, Ttl};

use super::{LONG_TTL, client_of, name};
use crate::failure::{ensure, ensure_eq};
use crate::{CaseFailure, CaseResult, Context, TestBackend, Verdict};

/// How long one store call may take before the client counts it failed.
const STORE_TIMEOUT: Duration = Duration::from_secs(3);
/// How long running work may go on once the shutdown began.
const GRACE: Duration = Duration::from_millis(500);
/// How long the finishing work runs: within the grace period.
const WORK: Duration = Duration::from_millis(100);
/// How long a campaign may take to lead a free lease.
const LEAD_LIMIT: Duration = Duration::from_secs(5);
/// The minimum hold of the work that keeps its lease after the shutdown.
const MIN_HOLD: Duration = Duration::from_secs(60);

/// A client whose leases do not lapse within the case (a TTL of 60 s), so only a release can
/// free them.
fn client<S: LeaseStore, B: TestBackend>(
    store: S,
    ctx: &Context<B>,
) -> Result<LeaseClient, CaseFailure> {
    client_of(ctx, store, LONG_TTL, Duration::from_secs(5), STORE_TIMEOUT)
}

/// Whether a fresh holder takes `lease` at once; it gives it back if it did.
async fn taken_at_once<S: LeaseStore + ?Sized>(
    store: &S,
    lease: &str,
) -> Result<bool, CaseFailure> {
    let lease = name(lease);
    let holder = HolderId::generate();
    let taken = store
        .try_acquire(&lease, &holder, Ttl::from_secs(60)?)
        .await?
        .is_some();
    if taken {
        store.release(&lease, &holder, Duration::ZERO).await?;
    }
    Ok(taken)
}

/// A client holds five leases: `sweep` for work that finishes within the grace period, `digest`
/// for work that never ends, `report` for work that ended with a minimum hold of a minute,
/// `uptime` for a guard its owner never releases, and `alerts` as a campaign's leader. After
/// `shutdown`, a fresh holder takes `sweep`, `digest`, `uptime` and `alerts` at once and not
/// `report`; the finishing work finished, the endless one was cancelled with
/// `LossReason::ShutDown`, the guard is lost with that reason, the campaign no longer leads, and
/// the report counts all of it and nothing failed.
///
/// # Errors
/// A [`CaseFailure`] when a lease the shutdown should have given back cannot be taken at once,
/// `report` can be taken within its minimum hold, the work, guard or campaign did not end as the
/// shutdown ends them, or the shutdown's report miscounts or is not clean, and, [as any
/// case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, its running work, the
/// guard of `uptime` and the campaign on `alerts` go with it, and each gives its lease back in the
/// background, as dropped work, a dropped guard and a dropped `Leader` do; `report` stays taken for
/// its minimum hold of a minute, as after the case.
pub async fn shutdown_hands_every_lease_over<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let store = ctx.store().await?;
    let client = client(Arc::clone(&store), ctx)?;

    let ended = client
        .run_exclusive_with(
            "report",
            RunOptions::default().min_hold(MIN_HOLD),
            |_| async {},
        )
        .await?;
    ensure_eq!(ended, Some(RunOutcome::Finished(())), "the report's run");
    let uptime = client
        .try_acquire("uptime")
        .await?
        .ok_or_else(|| CaseFailure::new("the free lease uptime was not taken"))?;
    let leader = client.campaign("alerts")?;
    let mut changes = leader.changes();
    ensure!(
        ctx.within(LEAD_LIMIT, changes.next()).await == Some(Some(true)),
        "the campaign on the free lease alerts did not lead within {LEAD_LIMIT:?}"
    );

    let (sweep_started, sweep_running) = oneshot::channel();
    let (digest_started, digest_running) = oneshot::channel();
    let (shutdown_begins, shutdown_began) = oneshot::channel::<()>();
    let sweep = client.run_exclusive("sweep", |_| async move {
        let _ = sweep_started.send(());
        // Runs on into the shutdown, however long the other work took to start.
        let _ = shutdown_began.await;
        ctx.sleep(WORK).await;
        "swept"
    });
    let digest = client.run_exclusive("digest", |_| async move {
        let _ = digest_started.send(());
        futures::future::pending::<()>().await
    });
    let shutdown = async {
        // Both works run before the shutdown begins.
        let _ = sweep_running.await;
        let _ = digest_running.await;
        // The shutdown begins in the same poll, before the work sees this.
        let _ = shutdown_begins.send(());
        client.shutdown(GRACE).await
    };
    let (sweep, digest, report) = futures::join!(sweep, digest, shutdown);
    ensure_eq!(
        sweep?,
        Some(RunOutcome::Finished("swept")),
        "work that ends within the grace period"
    );
    ensure_eq!(
        digest?,
        Some(RunOutcome::Cancelled {
            reason: LossReason::ShutDown
        }),
        "work still running when the grace period ended"
    );

    for lease in ["sweep", "digest", "uptime", "alerts"] {
        ensure!(
            taken_at_once(&*store, lease).await?,
            "after the shutdown, a fresh holder could not take {lease}: it was not given back \
             ({report:?})"
        );
    }
    ensure!(
        !taken_at_once(&*store, "report").await?,
        "a fresh holder took report within its minimum hold of {MIN_HOLD:?}: the shutdown \
         released it early"
    );
    ensure!(
        !uptime.is_held() && uptime.lost().await == LossReason::ShutDown,
        "the guard the shutdown released does not say it was lost to the shutdown"
    );
    ensure!(
        !leader.is_leader(),
        "the campaign still leads after the shutdown"
    );
    ensure_eq!(
        (
            report.finished,
            report.cancelled,
            report.resigned,
            report.forced,
            report.released
        ),
        (1, 1, 1, 1, 4),
        "(finished, cancelled, resigned, forced, released) in {report:?}"
    );
    ensure!(report.is_clean(), "the shutdown was not clean: {report:?}");
    Ok(Verdict::Passed)
}
