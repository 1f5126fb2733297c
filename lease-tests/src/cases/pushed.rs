//! Pushed releases: what a store that pushes releases ([`LeaseStore::release_events`]) pushes,
//! and what listening costs its pool.

use std::time::Duration;

use futures::StreamExt;
use lease_core::{HolderId, LeaseName, LeaseStore, ReleaseEvents};

use super::{long_ttl, name};
use crate::failure::{ensure, ensure_eq};
use crate::{Capability, CaseFailure, CaseResult, Context, TestBackend, Verdict};

/// How long a pushed release may take to arrive: it is sent when the release commits.
const PUSH_LIMIT: Duration = Duration::from_secs(10);
/// How long the case listens for a push that must not come.
const QUIET: Duration = Duration::from_millis(300);
/// How long a statement through a pool of one may take while the store listens; a connection
/// pinned by the listening would make it wait for the pool's timeout instead.
const STATEMENT_LIMIT: Duration = Duration::from_secs(5);

/// The store's release events, or `None` where the backend says its stores push none (the
/// case does not apply: [`not_pushed`] says so).
///
/// # Errors
/// A [`CaseFailure`] when the backend says its stores push releases and `store` answers
/// `None`, as a wrapper that forgets to forward `release_events` does, and when subscribing
/// fails.
///
/// # Cancel safety
/// As [`LeaseStore::release_events`].
pub(super) async fn release_events<B: TestBackend, S: LeaseStore + ?Sized>(
    ctx: &Context<B>,
    store: &S,
) -> Result<Option<ReleaseEvents>, CaseFailure> {
    match (
        store.release_events().await?,
        ctx.backend().offers(Capability::PushedReleases),
    ) {
        (Some(events), _) => Ok(Some(events)),
        (None, false) => Ok(None),
        (None, true) => Err(CaseFailure::new(format!(
            "{} says its stores push releases, but release_events answered None: a wrapper \
             that does not forward release_events leaves every waiter polling",
            ctx.backend().name()
        ))),
    }
}

/// The verdict of a case about pushed releases on a backend whose stores push none.
pub(super) fn not_pushed<B: TestBackend>(ctx: &Context<B>) -> Verdict {
    Verdict::NotApplicable(format!(
        "{}'s store pushes no releases (release_events answers None): waiters poll",
        ctx.backend().name()
    ))
}

/// A release that frees a lease is pushed, once, with the lease's name; a release that a
/// minimum hold keeps taken, and a stale holder's release that frees nothing, push nothing: a
/// waiter woken for them would find the lease still taken.
///
/// # Errors
/// A [`CaseFailure`] when the backend says its stores push releases and the store answers none,
/// the release that freed a lease is not pushed within ten seconds, another name is pushed
/// first, or anything more is pushed in the 300 ms after it, and, [as any
/// case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, its leases lapse
/// after their TTL of a minute, and its subscription closes with its stream.
pub async fn releases_are_pushed_only_when_they_free_the_lease<B: TestBackend>(
    ctx: &Context<B>,
) -> CaseResult {
    let store = ctx.store().await?;
    let Some(mut events) = release_events(ctx, &*store).await? else {
        return Ok(not_pushed(ctx));
    };
    let (kept, freed) = (name("kept"), name("freed"));
    let holder = HolderId::generate();
    for lease in [&kept, &freed] {
        store
            .try_acquire(lease, &holder, long_ttl())
            .await?
            .ok_or_else(|| CaseFailure::new(format!("a fresh store refused {lease}")))?;
    }
    // A minimum hold still ahead keeps the lease taken: nobody is told it is free.
    ensure!(
        store
            .release(&kept, &holder, Duration::from_secs(60))
            .await?,
        "the holder could not release {kept} with a minimum hold"
    );
    // A stale holder releases nothing and tells nobody.
    ensure!(
        !store
            .release(&freed, &HolderId::generate(), Duration::ZERO)
            .await?,
        "a holder that never held {freed} released it"
    );
    ensure!(
        store.release(&freed, &holder, Duration::ZERO).await?,
        "the holder could not release {freed}"
    );
    let pushed = ctx
        .within(PUSH_LIMIT, events.next())
        .await
        .ok_or_else(|| {
            CaseFailure::new(format!(
                "the release that freed {freed} was not pushed within {PUSH_LIMIT:?}"
            ))
        })?
        .ok_or_else(|| CaseFailure::new("the release events ended"))?;
    ensure_eq!(
        pushed,
        freed,
        "the first lease pushed (a minimum hold keeps {kept} taken; a stale holder frees nothing)"
    );
    let more = ctx.within(QUIET, events.next()).await;
    ensure!(
        more.is_none(),
        "one release freed a lease, yet {more:?} was pushed after it"
    );
    Ok(Verdict::Passed)
}

/// On a pool of exactly one connection, a store that listens for releases still runs its
/// statements, and the pool still counts one connection: the listening connection is not the
/// pool's (were it, each statement would wait for it until the pool's timeout), as a client
/// that waits in `acquire` holds its subscription for as long as it lives.
///
/// # Errors
/// A [`CaseFailure`] when the backend says its stores push releases and the store answers none,
/// a statement through the pool does not answer within five seconds while the store listens,
/// or the pool reports more than one connection, and, [as any case](crate::cases#errors), when
/// a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, its lease lapses after
/// its TTL of a minute, and its subscription closes with its stream.
pub async fn listening_takes_no_connection_of_the_pool<B: TestBackend>(
    ctx: &Context<B>,
) -> CaseResult {
    let Some(pool) = ctx.pooled(1).await? else {
        return Ok(Verdict::NotApplicable(format!(
            "{} has no connection pool",
            ctx.backend().name()
        )));
    };
    let store = pool.store();
    let Some(mut events) = release_events(ctx, &**store).await? else {
        return Ok(not_pushed(ctx));
    };
    let lease: LeaseName = name("listened");
    let holder = HolderId::generate();
    let statements = async {
        pool.probe().await?;
        store.try_acquire(&lease, &holder, long_ttl()).await?;
        store.release(&lease, &holder, Duration::ZERO).await?;
        Ok::<_, CaseFailure>(())
    };
    // The events are read meanwhile, first and then whenever the statements wait, as a waiting
    // acquisition reads them: a stream that takes a connection only when first read holds it
    // from then on too.
    let listening = async {
        while events.next().await.is_some() {}
        futures::future::pending::<()>().await;
    };
    let statements = async {
        match futures::future::select(std::pin::pin!(listening), std::pin::pin!(statements)).await {
            futures::future::Either::Right((done, _)) => done,
            futures::future::Either::Left(((), _)) => unreachable!("listening never ends"),
        }
    };
    ctx.within(STATEMENT_LIMIT, statements)
        .await
        .ok_or_else(|| {
            CaseFailure::new(format!(
                "statements through a pool of one did not answer within {STATEMENT_LIMIT:?} \
                 while the store listened for releases: the listening holds the pool's connection"
            ))
        })?
        .map_err(|failure| {
            CaseFailure::new(format!(
                "a statement through a pool of one failed while the store listened for \
                 releases (does the listening hold the pool's connection?): {}",
                failure.message()
            ))
        })?;
    let stats = pool.stats();
    ensure!(
        stats.size <= 1,
        "a pool of exactly one connection reports {} connections while the store listens",
        stats.size
    );
    drop(events);
    Ok(Verdict::Passed)
}
