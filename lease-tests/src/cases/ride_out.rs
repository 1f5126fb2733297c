//! Waiting through an outage: `acquire` rides out a store that fails or does not answer for a
//! while, and takes the lease once it answers again, within its own timeout.

use std::sync::Arc;
use std::time::Duration;

use lease_core::{Error, LeaseClient, LeaseStore, Runtime, Ttl};

use super::name;
use super::severable::{Link, Severable};
use crate::failure::ensure;
use crate::{CaseFailure, CaseResult, Context, TestBackend, Verdict};

/// How long one store call may take. Room for a fresh connection's first statement after the
/// outage: an acquisition that times out after its statement took the lease leaves it taken for
/// a holder nobody knows, until its TTL.
const STORE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the store is out.
const OUTAGE: Duration = Duration::from_secs(1);
/// How long the wait may last: far beyond the outage.
const WAIT: Duration = Duration::from_secs(20);
/// The longest pause between attempts.
const LONGEST_PAUSE: Duration = Duration::from_millis(400);
/// Room for scheduling and a statement's round trip on a busy machine.
const SLACK: Duration = Duration::from_millis(1500);

/// For a store that refuses every call, then for one that answers none (each call ends at the
/// store timeout) for a second: a single attempt in the outage fails with `Error::Store` (the
/// control: the outage is real), while `acquire` started in it takes the lease once the store
/// answers again, within the outage, a pause and a statement, and the store names its holder.
///
/// # Errors
/// A [`CaseFailure`] when an attempt in the outage does not fail with [`Error::Store`], `acquire`
/// gives up in the outage or takes the lease later than the outage, a pause and a statement allow,
/// or the store does not name the guard's holder, and, [as any case](crate::cases#errors), when a
/// call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, an attempt of `acquire`
/// in flight may take the lease for a holder nobody renews, which lapses after the client's TTL of
/// ten seconds, and a guard already taken is released in the background.
pub async fn acquire_rides_out_a_store_outage<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let store = ctx.store().await?;
    let severable = Arc::new(Severable::new(Arc::clone(&store)));
    let client = LeaseClient::builder(Arc::clone(&severable), ctx.runtime().clone())
        .ttl(Ttl::from_secs(10)?)
        .renew_every(Duration::from_secs(2))
        .store_timeout(STORE_TIMEOUT)
        .acquire_backoff(Duration::from_millis(50), LONGEST_PAUSE)
        .build()?;
    for (outage, lease) in [(Link::Refusing, "sweep"), (Link::BlackHole, "alerts")] {
        let lease = name(lease);
        severable.set(outage);
        let attempt = ctx
            .within(STORE_TIMEOUT + SLACK, client.try_acquire(&lease))
            .await
            .ok_or_else(|| CaseFailure::new("an attempt in the outage did not end"))?;
        ensure!(
            matches!(attempt, Err(Error::Store { .. })),
            "an attempt on {lease} in the outage ({outage:?}) did not fail with Error::Store"
        );
        let started = ctx.runtime().now();
        let restore = async {
            ctx.sleep(OUTAGE).await;
            severable.set(Link::Up);
        };
        let (guard, ()) = futures::join!(client.acquire(&lease, WAIT), restore);
        let guard = guard.map_err(|error| {
            CaseFailure::new(format!(
                "acquire({lease}) gave up in a {OUTAGE:?} outage ({outage:?}) it should ride out: {error}"
            ))
        })?;
        let took = ctx.runtime().now().duration_since(started);
        let limit = OUTAGE + LONGEST_PAUSE + STORE_TIMEOUT + SLACK;
        ensure!(
            took <= limit,
            "acquire({lease}) took {took:?} after an outage of {OUTAGE:?} ({outage:?}), more than {limit:?}"
        );
        let info = store.inspect(&lease).await?;
        ensure!(
            info.as_ref()
                .is_some_and(|info| info.holder == *guard.holder()),
            "after the outage the store does not name the guard's holder for {lease}: {info:?}"
        );
        guard.release().await?;
    }
    Ok(Verdict::Passed)
}
