//! Fenced writes: the database keeps a holder's writes from interleaving with another holder's.
//! For stores whose backend offers [`FencedWrites`](crate::FencedWrites); not applicable
//! elsewhere.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lease_core::{Error, LeaseClient, LeaseGuard, LeaseStore, LossReason};
use tracing::instrument::WithSubscriber;

use super::client_of;
use crate::failure::ensure;
use crate::spans::SpanCapture;
use crate::{CaseFailure, CaseResult, Context, FencedWrites, TestBackend, Verdict};

fn not_applicable<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    Ok(Verdict::NotApplicable(format!(
        "{} offers no fenced check",
        ctx.backend().name()
    )))
}

fn client<B: TestBackend>(
    ctx: &Context<B>,
    store: &Arc<B::Store>,
    ttl: Duration,
) -> Result<LeaseClient, CaseFailure> {
    client_of(ctx, Arc::clone(store), ttl, ttl / 4, ttl / 5)
}

/// `sweep` taken by `client` on a fresh store, waiting up to ten seconds. The cases that use it
/// give their holder a short store timeout (a fifth of a TTL of about a second), which an
/// attempt can miss on a loaded machine, the first one above all (it opens a connection and
/// prepares the statement): such an attempt is tried again. One that timed out may still have
/// taken the lease, for a holder nobody keeps; `acquire` then waits for it to lapse, within a
/// TTL. The cases are about the fenced transaction that follows, not the first acquisition.
async fn take_sweep(client: &LeaseClient) -> Result<LeaseGuard, CaseFailure> {
    Ok(client.acquire("sweep", Duration::from_secs(10)).await?)
}

/// The outcomes the `lease.store` spans of `lease.operation` = `fence` that `capture` kept
/// recorded, in the order the spans opened (`-` for a span that recorded none).
fn fence_outcomes(capture: &SpanCapture) -> Vec<String> {
    capture
        .named("lease.store")
        .into_iter()
        .filter(|span| span.get("lease.operation").is_some_and(|op| op == "fence"))
        .map(|span| {
            span.get("lease.outcome")
                .cloned()
                .unwrap_or_else(|| "-".to_owned())
        })
        .collect()
}

/// The holder's fenced write commits, and the check answers without costing the lease.
///
/// # Errors
/// A [`CaseFailure`] when one of the holder's three fenced writes fails or does not commit, the
/// checks cost the lease or moved its expiry by more than a few microseconds, the client's
/// statistics do not count three checks passed
/// ([`LeaseHandle::record_fenced_check`](lease_core::LeaseHandle::record_fenced_check)), or the
/// writes did not run each check in a `lease.store` span of `lease.operation` = `fence` that
/// recorded `lease.outcome` = `ok` (as lease-sql's stores do, wherever the check goes), and,
/// [as any case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, the guard of `notify` is
/// released in the background, and a fenced write cut off before its commit commits nothing.
pub async fn fenced_write_commits_while_held<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let Some((store, writes)) = ctx.fenced().await? else {
        return not_applicable(ctx);
    };
    let client = client(ctx, &store, Duration::from_secs(60))?;
    let guard = client
        .try_acquire("notify")
        .await?
        .ok_or_else(|| CaseFailure::new("a fresh store refused the lease"))?;
    let capture = SpanCapture::new();
    for value in 1..=3 {
        writes
            .write(&guard.handle(), value, Box::pin(async {}))
            .with_subscriber(capture.clone())
            .await?;
    }
    let written = writes.written().await?;
    ensure!(
        written.len() == 3,
        "three fenced writes of the holder committed {written:?}"
    );
    ensure!(guard.is_held(), "the fenced checks cost the lease");
    // A check may move the expiry by the smallest step (a microsecond), never by more: as a
    // renewal never moves an expiry back, steps of a millisecond at thousands of checks a
    // second would keep the lease taken long after its holder died.
    let row = store
        .inspect(guard.name())
        .await?
        .ok_or_else(|| CaseFailure::new("the lease checked three times is not listed"))?;
    let span = row
        .expires_at
        .duration_since(row.taken_at)
        .unwrap_or_default();
    ensure!(
        span <= Duration::from_secs(60) + Duration::from_micros(100),
        "three fenced checks moved the expiry of a lease taken for 60 s to {span:?} after it \
         was taken"
    );
    let checks = client.stats().fenced_checks;
    ensure!(
        (checks.passed, checks.not_held, checks.failed) == (3, 0, 0),
        "the client counted the three fenced checks that passed as {checks:?}"
    );
    let outcomes = fence_outcomes(&capture);
    ensure!(
        outcomes == ["ok"; 3],
        "the three fenced checks that passed ran in `fence` spans that recorded {outcomes:?}"
    );
    guard.release().await?;
    Ok(Verdict::Passed)
}

/// A lease that expired by the database's clock, not yet taken over, fails the check: nothing is
/// committed, and the guard learns of the loss at once (`LossReason::NotHeld`).
///
/// # Errors
/// A [`CaseFailure`] when the write under the expired lease commits or fails other than with
/// `Error::NotHeld` for the guard's fence, the guard does not learn of the loss within a second,
/// the client's statistics do not count one check that found the lease gone, or the write did
/// not run its check in one `lease.store` span of `lease.operation` = `fence` that recorded
/// `lease.outcome` = `not_held`, and, [as any case](crate::cases#errors), when a call it needs
/// fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, a fenced write cut off
/// before its commit commits nothing, and the guard of `notify` is released in the background,
/// unless the check had already marked it lost (its row has expired by then).
pub async fn expired_lease_fails_fenced_check<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let Some((store, writes)) = ctx.fenced().await? else {
        return not_applicable(ctx);
    };
    let client = client(ctx, &store, Duration::from_secs(60))?;
    let guard = client
        .try_acquire("notify")
        .await?
        .ok_or_else(|| CaseFailure::new("a fresh store refused the lease"))?;
    writes.expire(guard.name()).await?;
    let capture = SpanCapture::new();
    let handle = guard.handle();
    let write = writes
        .write(&handle, 1, Box::pin(async {}))
        .with_subscriber(capture.clone());
    match write.await {
        Err(Error::NotHeld { fence, .. }) if fence == guard.fence() => {}
        Err(other) => return Err(CaseFailure::new(format!("the check failed with {other}"))),
        Ok(()) => {
            return Err(CaseFailure::new(
                "a fenced write on an expired lease committed",
            ));
        }
    }
    let written = writes.written().await?;
    ensure!(
        written.is_empty(),
        "the refused transaction committed {written:?}"
    );
    ensure!(
        !guard.is_held(),
        "the guard still believes it holds the lease"
    );
    let lost = ctx.within(Duration::from_secs(1), guard.lost()).await;
    ensure!(
        lost == Some(LossReason::NotHeld),
        "the guard reported {lost:?}, not its loss by the check"
    );
    let checks = client.stats().fenced_checks;
    ensure!(
        (checks.passed, checks.not_held, checks.failed) == (0, 1, 0),
        "the client counted the one fenced check that found the lease gone as {checks:?}"
    );
    let outcomes = fence_outcomes(&capture);
    ensure!(
        outcomes == ["not_held"],
        "the fenced check that found the lease gone ran in `fence` spans that recorded {outcomes:?}"
    );
    Ok(Verdict::Passed)
}

/// A lease released by force (its holder cleared on the row, its expiry and fence as they
/// were, nobody holding it since) fails the check: nothing is committed, and the guard learns
/// of the loss at once (`LossReason::NotHeld`). Only the holder's condition refuses it: the
/// fence is the lease's and the expiry ahead.
///
/// # Errors
/// A [`CaseFailure`] when the write under the freed lease commits or fails other than with
/// `Error::NotHeld` for the guard's fence, or the guard does not learn of the loss within a
/// second, and, [as any case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, a fenced write cut off
/// before its commit commits nothing, and the guard of `notify` is released in the background
/// (the release matches nothing: the row names no holder).
pub async fn freed_lease_fails_fenced_check<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let Some((store, writes)) = ctx.fenced().await? else {
        return not_applicable(ctx);
    };
    let client = client(ctx, &store, Duration::from_secs(60))?;
    let guard = client
        .try_acquire("notify")
        .await?
        .ok_or_else(|| CaseFailure::new("a fresh store refused the lease"))?;
    writes.free(guard.name()).await?;
    match writes.write(&guard.handle(), 1, Box::pin(async {})).await {
        Err(Error::NotHeld { fence, .. }) if fence == guard.fence() => {}
        Err(other) => return Err(CaseFailure::new(format!("the check failed with {other}"))),
        Ok(()) => {
            return Err(CaseFailure::new(
                "a fenced write on a lease released by force committed",
            ));
        }
    }
    let written = writes.written().await?;
    ensure!(
        written.is_empty(),
        "the refused transaction committed {written:?}"
    );
    let lost = ctx.within(Duration::from_secs(1), guard.lost()).await;
    ensure!(
        lost == Some(LossReason::NotHeld),
        "the guard reported {lost:?}, not its loss by the check"
    );
    Ok(Verdict::Passed)
}

/// After a takeover, the stale holder's fenced write fails and commits nothing, while the new
/// holder's commits.
///
/// # Errors
/// A [`CaseFailure`] when the stale holder's write commits, the new holder's does not, the
/// protected table holds anything but the new holder's value, or the stale guard still believes it
/// holds the lease, and, [as any case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, a fenced write cut off
/// before its commit commits nothing, and both guards of `notify` are released in the background
/// (the stale one's release matches nothing once the lease was taken over).
pub async fn stale_fenced_write_commits_nothing<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let Some((store, writes)) = ctx.fenced().await? else {
        return not_applicable(ctx);
    };
    let stale_client = client(ctx, &store, Duration::from_secs(60))?;
    let new_client = client(ctx, &store, Duration::from_secs(60))?;
    let stale = stale_client
        .try_acquire("notify")
        .await?
        .ok_or_else(|| CaseFailure::new("a fresh store refused the lease"))?;
    writes.expire(stale.name()).await?;
    let new = new_client
        .try_acquire("notify")
        .await?
        .ok_or_else(|| CaseFailure::new("an expired lease was not taken over"))?;
    let value = |fence: lease_core::Fence| i64::try_from(fence.get()).unwrap_or(i64::MAX);
    if writes
        .write(&stale.handle(), value(stale.fence()), Box::pin(async {}))
        .await
        .is_ok()
    {
        return Err(CaseFailure::new(
            "the stale holder's fenced write committed after a takeover",
        ));
    }
    writes
        .write(&new.handle(), value(new.fence()), Box::pin(async {}))
        .await?;
    let written = writes.written().await?;
    ensure!(
        written == [value(new.fence())],
        "after the takeover the protected table holds {written:?}"
    );
    ensure!(
        !stale.is_held(),
        "the stale guard still believes it holds the lease"
    );
    new.release().await?;
    Ok(Verdict::Passed)
}

/// A takeover attempted while the holder's fenced transaction is open waits for it: the
/// holder's write commits before the new holder has the lease, whose fence is greater. While the
/// transaction is open, the lease is made to expire by the database's clock, as for a holder
/// paused past its TTL (the statement that does so waits for the row lock the check took, as a
/// takeover does), and the transaction stays open past the lease's TTL besides, so neither the
/// holder's renewals nor the expiry's statement can let the takeover through early.
///
/// # Errors
/// A [`CaseFailure`] when the takeover succeeds while the holder's transaction is open or gets a
/// fence not above the holder's, the holder's write fails other than with `Error::NotHeld`, or the
/// protected table disagrees with how it answered, and, [as any case](crate::cases#errors), when a
/// call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, the holder's open
/// transaction rolls back, which lets the contender's waiting attempt through: it may take `sweep`
/// for a holder nobody renews, and the lease then lapses after its TTL of a minute. The holder's
/// guard is released in the background.
pub async fn takeover_waits_for_fenced_transaction<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let Some((store, writes)) = ctx.fenced().await? else {
        return not_applicable(ctx);
    };
    if writes.checks_at_commit() {
        return Ok(Verdict::NotApplicable(format!(
            "{}'s fenced writes check at the commit, where a takeover does not wait for them \
             (takeover_during_fenced_work_commits_nothing covers them)",
            ctx.backend().name()
        )));
    }
    let ttl = Duration::from_millis(1_200);
    let holder_client = client(ctx, &store, ttl)?;
    let contender = client(ctx, &store, Duration::from_secs(60))?;
    let holder = take_sweep(&holder_client).await?;
    // Set when the job's work is done and the insert and commit are about to be sent: the
    // takeover may finish only after that. (Set after the commit's answer instead, it would
    // race the contender's answer, which the server may send first.)
    let committing = AtomicBool::new(false);
    // Set when the job's work begins: the check has run, and the transaction holds the row.
    let working = AtomicBool::new(false);
    let hold = async {
        working.store(true, Ordering::SeqCst);
        ctx.sleep(ttl + Duration::from_millis(1_000)).await;
        committing.store(true, Ordering::SeqCst);
    };
    let handle = holder.handle();
    let write = writes.write(&handle, 1, Box::pin(hold));
    let take = async {
        // Once the transaction holds the row (a fixed pause here raced a slow begin on a loaded
        // machine: the takeover came before the check), and until well past the lease's TTL.
        let mut looks = 0;
        while !working.load(Ordering::SeqCst) {
            looks += 1;
            ensure!(
                looks <= 2_000,
                "the fenced transaction's work did not begin within 2,000 looks 10 ms apart"
            );
            ctx.sleep(Duration::from_millis(10)).await;
        }
        writes.expire(holder.name()).await?;
        let guard = contender.acquire("sweep", Duration::from_secs(20)).await?;
        Ok::<_, CaseFailure>((guard, committing.load(Ordering::SeqCst)))
    };
    let (outcome, taken) = futures::join!(write, take);
    let (taken, after_work) = taken?;
    ensure!(
        after_work,
        "the takeover succeeded while the holder's fenced transaction was open"
    );
    ensure!(
        taken.fence() > holder.fence(),
        "the takeover got fence {} after {}",
        taken.fence(),
        holder.fence()
    );
    // The holder's write commits; or, when the writes refuse to commit a lease the holder has
    // lost locally meanwhile (its renewals waited for the row lock past its deadline, as
    // `fenced` does), it commits nothing. Either way no other holder came in between.
    let written = writes.written().await?;
    match outcome {
        Ok(()) => ensure!(
            written == [1],
            "the holder's fenced write did not commit: {written:?}"
        ),
        Err(Error::NotHeld { .. }) => ensure!(
            written.is_empty(),
            "a fenced write refused with NotHeld committed {written:?}"
        ),
        Err(other) => return Err(other.into()),
    }
    taken.release().await?;
    Ok(Verdict::Passed)
}

/// Checked at the commit, a fenced transaction does not hold the takeover back: a new holder
/// takes the lease over while the job works, and then the old holder's commit fails and
/// commits nothing, and its guard learns of the loss at once.
///
/// # Errors
/// A [`CaseFailure`] when the expired lease is not taken over during the work, or only once the
/// transaction ended, the stale commit commits anything or fails other than with `Error::NotHeld`,
/// the new fence is not above the old one, or the stale guard does not learn of its loss within a
/// second, and, [as any case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, the holder's open
/// transaction rolls back, a takeover still in flight may leave `sweep` taken for a holder nobody
/// renews (it lapses after its TTL of a minute), and the guards are released in the background.
pub async fn takeover_during_fenced_work_commits_nothing<B: TestBackend>(
    ctx: &Context<B>,
) -> CaseResult {
    let Some((store, writes)) = ctx.fenced().await? else {
        return not_applicable(ctx);
    };
    if !writes.checks_at_commit() {
        return Ok(Verdict::NotApplicable(format!(
            "{}'s fenced writes check at the start, where a takeover waits for them \
             (takeover_waits_for_fenced_transaction covers them)",
            ctx.backend().name()
        )));
    }
    let holder_client = client(ctx, &store, Duration::from_secs(60))?;
    let contender = client(ctx, &store, Duration::from_secs(60))?;
    let holder = holder_client
        .try_acquire("sweep")
        .await?
        .ok_or_else(|| CaseFailure::new("a fresh store refused the lease"))?;
    let taken = std::sync::Mutex::new(None);
    let hold = async {
        // While the job works: the lease expires by the database's clock and is taken over,
        // without waiting for the open transaction.
        let taking = async {
            writes.expire(holder.name()).await?;
            Ok::<_, CaseFailure>(contender.try_acquire("sweep").await?)
        };
        let answer = ctx.within(Duration::from_secs(5), taking).await;
        *taken.lock().unwrap_or_else(|e| e.into_inner()) = Some(answer);
    };
    let handle = holder.handle();
    let written = writes.write(&handle, 1, Box::pin(hold)).await;
    let taken = taken.into_inner().unwrap_or_else(|e| e.into_inner());
    let new = match taken {
        Some(Some(Ok(Some(guard)))) => guard,
        Some(Some(Ok(None))) => {
            return Err(CaseFailure::new(
                "the expired lease was not taken over during the fenced work",
            ));
        }
        Some(Some(Err(failure))) => return Err(failure),
        Some(None) => {
            return Err(CaseFailure::new(
                "the takeover waited for the fenced transaction, which checks at its commit",
            ));
        }
        None => return Err(CaseFailure::new("the work never ran")),
    };
    match written {
        Err(Error::NotHeld { fence, .. }) if fence == holder.fence() => {}
        Err(other) => {
            return Err(CaseFailure::new(format!(
                "the stale commit failed with {other}, not NotHeld"
            )));
        }
        Ok(()) => {
            return Err(CaseFailure::new(
                "the stale holder's fenced transaction committed after a takeover",
            ));
        }
    }
    let written = writes.written().await?;
    ensure!(
        written.is_empty(),
        "the stale holder's transaction committed {written:?}"
    );
    ensure!(
        new.fence() > holder.fence(),
        "the takeover got fence {} after {}",
        new.fence(),
        holder.fence()
    );
    let lost = ctx.within(Duration::from_secs(1), holder.lost()).await;
    ensure!(
        lost == Some(LossReason::NotHeld),
        "the stale guard reported {lost:?}, not its loss by the check"
    );
    new.release().await?;
    Ok(Verdict::Passed)
}

/// Checked at the commit, a fenced transaction longer than the lease's TTL costs nothing: the
/// holder's renewals go on while it is open (the row is locked only for the check and the
/// commit), and its write commits.
///
/// # Errors
/// A [`CaseFailure`] when the holder loses its lease while its transaction is open, or its write
/// does not commit, and, [as any case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, the transaction it holds
/// open for two TTLs rolls back, and the guard of `sweep` is released in the background.
pub async fn renewal_goes_on_during_fenced_work<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let Some((store, writes)) = ctx.fenced().await? else {
        return not_applicable(ctx);
    };
    if !writes.checks_at_commit() {
        return Ok(Verdict::NotApplicable(format!(
            "{}'s fenced writes check at the start, which holds the lease's row locked, and \
             the holder's renewals with it, until the transaction ends",
            ctx.backend().name()
        )));
    }
    let ttl = Duration::from_millis(1_200);
    // Renewals are what this case is about: each is given half a TTL, where the other cases'
    // holders give a fifth, which a loaded machine can take three times in a row.
    let holder_client = client_of(ctx, Arc::clone(&store), ttl, ttl / 4, ttl / 2)?;
    let holder = take_sweep(&holder_client).await?;
    let handle = holder.handle();
    let written = writes.write(&handle, 1, Box::pin(ctx.sleep(2 * ttl))).await;
    // The loss shows first in the write's own check, which finds the lease gone: read here,
    // so that a store whose renewals waited for the transaction fails on this case's rule.
    if let Err(Error::NotHeld { .. }) = &written {
        return Err(CaseFailure::new(
            "the holder lost its lease while its fenced transaction was open: the write's check \
             found it gone",
        ));
    }
    written?;
    ensure!(
        holder.is_held(),
        "the holder lost its lease while its fenced transaction was open"
    );
    held_write_committed(holder, &*writes).await
}

/// The end of a case whose holder wrote `1` once and kept its lease: the write committed, and
/// the lease is released. The holder's store timeout is short (a fifth of a TTL of a second or
/// so), so a loaded machine may answer the release after it: that tells nothing of what the
/// case checks, and the lease then lapses within its TTL. Any other failure of the release
/// fails the case.
async fn held_write_committed(holder: LeaseGuard, writes: &dyn FencedWrites) -> CaseResult {
    let written = writes.written().await?;
    ensure!(
        written == [1],
        "the holder's fenced write did not commit: {written:?}"
    );
    match holder.release().await {
        Err(error) if !error.is_transient() => Err(error.into()),
        _ => Ok(Verdict::Passed),
    }
}

/// A fenced transaction that a renewal of the holder's falls into commits, and the holder keeps
/// its lease, wherever the check goes: checked at the commit the renewal goes on meanwhile,
/// checked at the start it waits for the transaction. Where the transaction reads from a
/// snapshot (PostgreSQL's `SERIALIZABLE` or `REPEATABLE READ` as the connections' default), a
/// check at the commit would find the row a renewal changed since the snapshot and fail, so the
/// store's own fenced transaction must check at the start there.
///
/// # Errors
/// A [`CaseFailure`] when no renewal was sent while the transaction was open, the write fails
/// or does not commit, or the holder loses its lease, and, [as any case](crate::cases#errors),
/// when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, the transaction it holds
/// open rolls back, and the guard of `sweep` is released in the background.
pub async fn fenced_work_spans_a_renewal<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let Some((store, writes)) = ctx.fenced().await? else {
        return not_applicable(ctx);
    };
    // Renewals every 750 ms, each given 600 ms: a second of work spans at least one, and a
    // renewal that waits for the transaction gives up well before the lease's deadline.
    let ttl = Duration::from_secs(3);
    let work = Duration::from_secs(1);
    let holder_client = client(ctx, &store, ttl)?;
    let holder = take_sweep(&holder_client).await?;
    let sent = |client: &LeaseClient| {
        let stats = client.stats();
        stats.renewals + stats.renewals_failed
    };
    let before = sent(&holder_client);
    writes
        .write(&holder.handle(), 1, Box::pin(ctx.sleep(work)))
        .await?;
    // A renewal that waited for the transaction answers within its store timeout.
    ctx.sleep(ttl / 5).await;
    ensure!(
        sent(&holder_client) > before,
        "no renewal was sent while the fenced transaction was open for {work:?}"
    );
    ensure!(
        holder.is_held(),
        "the holder lost its lease to a fenced transaction a renewal fell into"
    );
    held_write_committed(holder, &*writes).await
}
