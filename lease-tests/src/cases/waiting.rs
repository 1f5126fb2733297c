//! Waiting for a lease: `LeaseClient::acquire` waits while the lease is held, takes it once it
//! is released, and, where the store pushes releases, is woken by the release itself.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lease_core::{HolderId, LeaseClient, LeaseGuard, LeaseName, LeaseStore, Runtime, Ttl};

use super::pushed::{not_pushed, release_events};
use super::{long_ttl, name};
use crate::failure::{ensure, ensure_eq};
use crate::{CaseFailure, CaseResult, Context, TestBackend, Verdict};

/// How long one store call may take before the client counts it failed.
const STORE_TIMEOUT: Duration = Duration::from_secs(3);
/// The longest a waiter may keep waiting in these cases.
const ACQUIRE_LIMIT: Duration = Duration::from_secs(30);
/// Room for scheduling and a statement's round trip on a busy machine.
const SLACK: Duration = Duration::from_millis(1500);

/// What a waiter got, and when.
struct Waited {
    guard: Result<LeaseGuard, lease_core::Error>,
    at: Instant,
}

/// What the releasing side did, and when it started.
struct Released {
    released: Result<bool, lease_core::Error>,
    started: Instant,
}

/// Runs `client.acquire(lease)` while, beside it on the same task, the incumbent keeps the
/// lease until `hold` completes and then releases it.
async fn wait_while_held<B: TestBackend, S: LeaseStore + ?Sized>(
    ctx: &Context<B>,
    store: &S,
    client: &LeaseClient,
    lease: &LeaseName,
    incumbent: &HolderId,
    hold: impl Future<Output = ()>,
) -> (Waited, Released) {
    let waiting = async {
        let guard = client.acquire(lease.clone(), ACQUIRE_LIMIT).await;
        Waited {
            guard,
            at: ctx.runtime().now(),
        }
    };
    let releasing = async {
        hold.await;
        let started = ctx.runtime().now();
        Released {
            released: store.release(lease, incumbent, Duration::ZERO).await,
            started,
        }
    };
    futures::join!(waiting, releasing)
}

/// Returns once `client` has opened its subscription to releases (or failed to) and tried
/// once more after it opened, so a release from now on reaches it through the subscription;
/// or after [`ACQUIRE_LIMIT`], whichever comes first. Looks every 20 ms.
async fn until_subscribed<B: TestBackend>(ctx: &Context<B>, client: &LeaseClient) {
    let look = Duration::from_millis(20);
    let looks = ACQUIRE_LIMIT.as_millis() / look.as_millis();
    for _ in 0..looks {
        let stats = client.stats();
        let subscribe = stats.subscribe_calls;
        if subscribe.errors > 0 || (subscribe.calls > 0 && stats.acquire_calls.calls >= 2) {
            return;
        }
        ctx.sleep(look).await;
    }
}

/// While another holder has the lease, `acquire` keeps waiting (it neither returns nor takes
/// it); once the holder releases it, `acquire` takes it by its next attempt, with a fence above
/// the holder's, and `inspect` names the new guard.
///
/// # Errors
/// A [`CaseFailure`] when `acquire` returns while the incumbent still holds the lease, gives up,
/// takes it later than its next attempt after the release, or with a fence not above the
/// incumbent's, or `inspect` does not name the new guard, and, [as any case](crate::cases#errors),
/// when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, the incumbent keeps
/// `sweep` until its TTL of a minute runs out, unless its release was sent; a waiting attempt in
/// flight may have taken it for a holder nobody renews, for the client's TTL of ten seconds; a
/// guard already taken is released in the background.
pub async fn acquire_waits_for_the_release<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let store = ctx.store().await?;
    let lease = name("sweep");
    let incumbent = HolderId::generate();
    let held = store
        .try_acquire(&lease, &incumbent, long_ttl())
        .await?
        .ok_or_else(|| CaseFailure::new(format!("a fresh store refused {lease}")))?;
    // Short pauses, so the waiter tries several times while the lease is held and soon after.
    let longest_pause = Duration::from_millis(200);
    let client = LeaseClient::builder(Arc::clone(&store), ctx.runtime().clone())
        .ttl(Ttl::from_secs(10)?)
        .store_timeout(STORE_TIMEOUT)
        .acquire_backoff(Duration::from_millis(50), longest_pause)
        .build()?;
    let hold = ctx.sleep(longest_pause * 4);
    let (waited, released) = wait_while_held(ctx, &*store, &client, &lease, &incumbent, hold).await;
    let guard = waited.guard?;
    ensure!(
        waited.at >= released.started,
        "acquire({lease}) returned with fence {} while {incumbent} still held it with fence {held}",
        guard.fence()
    );
    ensure!(
        released.released?,
        "the incumbent could not release {lease} while a client waited for it"
    );
    let after = waited.at.duration_since(released.started);
    ensure!(
        after <= longest_pause + SLACK,
        "acquire({lease}) took it {after:?} after the release, with pauses of at most \
         {longest_pause:?}"
    );
    ensure!(
        guard.fence() > held,
        "the waiter's fence {} is not above the incumbent's {held}",
        guard.fence()
    );
    let info = store.inspect(&lease).await?;
    ensure_eq!(
        info.map(|info| (info.holder, info.fence)),
        Some((guard.holder().clone(), guard.fence())),
        "holder and fence of {lease} after the waiter took it"
    );
    guard.release().await?;
    Ok(Verdict::Passed)
}

/// Where the store pushes releases ([`LeaseStore::release_events`] answers a stream), a client
/// waiting in `acquire` with a long pause between attempts takes the lease within a fraction of
/// that pause once it is released: the release woke it, not its next poll. Not applicable to a
/// store that answers `None` (the backend does not [offer](TestBackend::offers) [`Capability::PushedReleases`](crate::Capability::PushedReleases)); a failure when the
/// backend says its stores push releases and the store under test answers `None`, as a wrapper
/// that forgets to forward `release_events` does.
///
/// # Errors
/// A [`CaseFailure`] when the backend says its stores push releases and the store answers none,
/// the client's subscription to releases fails, or the waiter, subscribed, does not take the
/// released lease within 2.5 s of the release, and, [as any
/// case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, it leaves what
/// [`acquire_waits_for_the_release`] leaves, with `alerts`, and the client's subscription to
/// releases closes with the client.
pub async fn release_wakes_a_waiter<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let store = ctx.store().await?;
    if release_events(ctx, &*store).await?.is_none() {
        return Ok(not_pushed(ctx));
    }
    let lease = name("alerts");
    let incumbent = HolderId::generate();
    store
        .try_acquire(&lease, &incumbent, long_ttl())
        .await?
        .ok_or_else(|| CaseFailure::new(format!("a fresh store refused {lease}")))?;
    // The first pause after the failed attempt is at least half of this: the next poll is
    // seconds away.
    let first_pause = Duration::from_secs(10);
    let next_poll = first_pause / 2;
    let wake_limit = Duration::from_millis(2500);
    let client = LeaseClient::builder(Arc::clone(&store), ctx.runtime().clone())
        .ttl(Ttl::from_secs(10)?)
        .store_timeout(STORE_TIMEOUT)
        .acquire_backoff(first_pause, first_pause)
        .build()?;
    // Released once the client's subscription is open and it has tried again since: a release
    // before that is one no subscription could push, which the client's retry on opening covers
    // (lease-core's own tests prove that part).
    let hold = until_subscribed(ctx, &client);
    let started = ctx.runtime().now();
    let (waited, released) = wait_while_held(ctx, &*store, &client, &lease, &incumbent, hold).await;
    let subscribe = client.stats().subscribe_calls;
    ensure!(
        subscribe.calls > 0 && subscribe.errors == 0,
        "the client's subscription to releases failed ({} of {} calls): its waiters poll",
        subscribe.errors,
        subscribe.calls
    );
    let guard = waited.guard?;
    ensure!(
        waited.at >= released.started,
        "acquire({lease}) returned with fence {} while {incumbent} still held it",
        guard.fence()
    );
    ensure!(
        released.released?,
        "the incumbent could not release {lease} while a client waited for it"
    );
    let after = waited.at.duration_since(released.started);
    ensure!(
        after <= wake_limit,
        "the waiter took {lease} {after:?} after its release ({:?} after it began waiting, its \
         next poll due no sooner than {next_poll:?}): the release did not wake it",
        waited.at.duration_since(started)
    );
    guard.release().await?;
    Ok(Verdict::Passed)
}
