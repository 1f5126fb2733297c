//! The `lease.store` span of a fenced check, as the client's own store calls have one, and its
//! count in the lease's client statistics.

use std::future::Future;

use lease_core::{Error, Fence, FencedCheck, LeaseHandle};
use tracing::Instrument;

/// Runs `check`, the fenced check (and commit) of `lease`, in a `lease.store` span with the
/// fields of the client's store calls: `lease.operation` = `fence`, `lease.name`,
/// `lease.leases` = 1 and `lease.outcome` = `ok`, `not_held` (the lease was gone: nothing
/// commits) or `error`. It has no `lease.store` label: the check runs in the caller's
/// transaction, outside any client. The outcome is also counted in the statistics of the
/// client that holds `lease` ([`LeaseHandle::record_fenced_check`]), which carry its label.
pub(crate) async fn traced(
    lease: &LeaseHandle,
    check: impl Future<Output = Result<Fence, Error>>,
) -> Result<Fence, Error> {
    let span = tracing::debug_span!(
        "lease.store",
        lease.operation = "fence",
        lease.name = lease.name().as_str(),
        lease.leases = 1,
        lease.outcome = tracing::field::Empty,
    );
    let answer = check.instrument(span.clone()).await;
    let outcome = match &answer {
        Ok(_) => "ok",
        Err(Error::NotHeld { .. }) => "not_held",
        Err(_) => "error",
    };
    span.record("lease.outcome", outcome);
    counted(lease, answer.as_ref().map(|_| ()));
    answer
}

/// Counts a fenced check of `lease` that answered `answer` in the statistics of the client that
/// holds it ([`LeaseHandle::record_fenced_check`]): passed, not held, or failed.
pub(crate) fn counted(lease: &LeaseHandle, answer: Result<(), &Error>) {
    lease.record_fenced_check(match answer {
        Ok(_) => FencedCheck::Passed,
        Err(Error::NotHeld { .. }) => FencedCheck::NotHeld,
        Err(_) => FencedCheck::Failed,
    });
}
