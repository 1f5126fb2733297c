//! An unreachable store answers with errors: never a panic, never a hang.

use std::future::Future;
use std::time::Duration;

use lease_core::{Error, HolderId, LeaseClient, LeaseStore, Operation};

use super::{long_ttl, name};
use crate::failure::ensure;
use crate::{Capability, CaseFailure, CaseResult, Context, TestBackend, Verdict};

/// How long one call to an unreachable store may take before the case calls it a hang: the
/// backend's connect timeout plus room for a busy machine.
const CALL_LIMIT: Duration = Duration::from_secs(20);

/// Every operation on a store that cannot reach its database returns [`Error::Store`] naming
/// that operation, within a bounded time, and so does a client's acquisition through it. Where
/// the backend [offers](TestBackend::offers) [`Capability::TransientWhenUnreachable`] (a server
/// that may come back), every such error is transient, so that waits and campaigns ride the
/// outage out.
///
/// # Errors
/// A [`CaseFailure`] when a call on the unreachable store, or a client's acquisition through it,
/// succeeds, takes longer than twenty seconds, fails other than with [`Error::Store`] naming
/// its operation, or, where the backend offers transient errors when unreachable, fails with an
/// error that is not transient; when the backend offers [`Capability::Unreachable`] yet gives no
/// unreachable store; and, [as any case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Cancel safe, unlike [the other cases](crate::cases#cancel-safety): its store reaches no
/// database, so it takes no lease, and its client and calls are dropped with it.
pub async fn unreachable_store_returns_errors<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let Some(store) = ctx.unreachable().await? else {
        return Ok(Verdict::NotApplicable(format!(
            "{} cannot be unreachable",
            ctx.backend().name()
        )));
    };
    let lease = name("sweep");
    let holder = HolderId::generate();
    let pair = [(lease.clone(), holder.clone())];

    let acquire = store.try_acquire(&lease, &holder, long_ttl());
    expect_store_error(ctx, &[Operation::Acquire], acquire).await?;
    let renew = store.renew(&lease, &holder, long_ttl());
    expect_store_error(ctx, &[Operation::Renew], renew).await?;
    // The trait's default `renew_many` renews one by one, and so fails as a renewal.
    let renew_many = store.renew_many(&pair, long_ttl());
    expect_store_error(ctx, &[Operation::RenewMany, Operation::Renew], renew_many).await?;
    let release = store.release(&lease, &holder, Duration::ZERO);
    expect_store_error(ctx, &[Operation::Release], release).await?;
    expect_store_error(ctx, &[Operation::Inspect], store.inspect(&lease)).await?;
    expect_store_error(ctx, &[Operation::List], store.list()).await?;
    let prune = store.prune(Duration::from_secs(3600));
    expect_store_error(ctx, &[Operation::Prune], prune).await?;

    let client = LeaseClient::new(store, ctx.runtime().clone());
    let guard = client.try_acquire(&lease);
    let attempt = ctx.within(CALL_LIMIT, guard).await.ok_or_else(|| {
        CaseFailure::new(format!(
            "a client acquiring through an unreachable store did not return within {CALL_LIMIT:?}"
        ))
    })?;
    match attempt {
        Err(error @ Error::Store { .. }) => expect_transient(ctx, "a client's acquisition", &error),
        other => Err(CaseFailure::new(format!(
            "a client acquiring through an unreachable store gave {:?}, not Error::Store",
            other.map(|guard| guard.map(|guard| guard.fence()))
        ))),
    }?;
    Ok(Verdict::Passed)
}

async fn expect_store_error<B, T>(
    ctx: &Context<B>,
    operations: &[Operation],
    call: impl Future<Output = Result<T, Error>>,
) -> Result<(), CaseFailure>
where
    B: TestBackend,
    T: std::fmt::Debug,
{
    let operation = operations[0];
    match ctx.within(CALL_LIMIT, call).await {
        None => Err(CaseFailure::new(format!(
            "{operation} on an unreachable store did not return within {CALL_LIMIT:?}"
        ))),
        Some(Ok(value)) => Err(CaseFailure::new(format!(
            "{operation} on an unreachable store succeeded with {value:?}"
        ))),
        Some(Err(error @ Error::Store { .. })) => {
            if let Error::Store {
                operation: reported,
                ..
            } = &error
            {
                ensure!(
                    operations.contains(reported),
                    "{operation} on an unreachable store failed as {reported}"
                );
            }
            expect_transient(ctx, &operation.to_string(), &error)
        }
        Some(Err(other)) => Err(CaseFailure::new(format!(
            "{operation} on an unreachable store gave {other:?}, not Error::Store"
        ))),
    }
}

/// `error`, from `call` on an unreachable store, is transient where the backend offers
/// [`Capability::TransientWhenUnreachable`]: a permanent error would end every campaign and
/// wait on the store at the first outage of its server.
fn expect_transient<B: TestBackend>(
    ctx: &Context<B>,
    call: &str,
    error: &Error,
) -> Result<(), CaseFailure> {
    if ctx.backend().offers(Capability::TransientWhenUnreachable) {
        ensure!(
            error.is_transient(),
            "{call} on an unreachable store failed as {}, not transient, though {} offers {}: \
             {error}",
            error
                .store_error_kind()
                .map_or_else(|| "no store error".to_owned(), |kind| format!("{kind:?}")),
            ctx.backend().name(),
            Capability::TransientWhenUnreachable
        );
    }
    Ok(())
}
