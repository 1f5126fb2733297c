//! The `lease.store` span of a fenced check, as the client's own store calls have one, and its
//! count in the lease's client statistics.

use std::future::Future;

use lease_core::{Error, Fence, FencedCheck, LeaseHandle, StoreErrorKind};
use tracing::{Instrument, Span};

/// Runs `check`, the fenced check (and commit) of `lease`, in a `lease.store` span with the
/// fields of the client's store calls: `lease.operation` = `fence`, `lease.name`,
/// `lease.leases` = 1 and `lease.outcome` = `ok`, `not_held` (the lease was gone: nothing
/// commits), `unknown` (the answer to the check and the commit was lost: it may have
/// committed) or `error`. It has no `lease.store` label: the check runs in the caller's
/// transaction, outside any client. The outcome is also counted in the statistics of the
/// client that holds `lease` ([`LeaseHandle::record_fenced_check`]), which carry its label.
pub(crate) async fn traced(
    lease: &LeaseHandle,
    check: impl Future<Output = Result<Fence, Error>>,
) -> Result<Fence, Error> {
    let span = span(lease);
    let answer = check.instrument(span.clone()).await;
    record(&span, lease, outcome(answer.as_ref().map(|_| ())));
    answer
}

/// The `lease.store` span of a fenced check of `lease`, its outcome still to be recorded.
pub(crate) fn span(lease: &LeaseHandle) -> Span {
    tracing::debug_span!(
        "lease.store",
        lease.operation = "fence",
        lease.name = lease.name().as_str(),
        lease.leases = 1,
        lease.outcome = tracing::field::Empty,
    )
}

/// Records how the fenced check of `lease` in `span` ended, in the span and in the statistics
/// of the client that holds `lease`.
pub(crate) fn record(span: &Span, lease: &LeaseHandle, check: FencedCheck) {
    span.record(
        "lease.outcome",
        match check {
            FencedCheck::Passed => "ok",
            FencedCheck::NotHeld => "not_held",
            FencedCheck::Unknown => "unknown",
            _ => "error",
        },
    );
    lease.record_fenced_check(check);
}

/// How a fenced check that answered `answer` ended: passed, not held (the lease was gone),
/// unknown (its answer lost with the commit's), or failed (any other error).
pub(crate) fn outcome(answer: Result<(), &Error>) -> FencedCheck {
    match answer {
        Ok(()) => FencedCheck::Passed,
        Err(Error::NotHeld { .. }) => FencedCheck::NotHeld,
        Err(error) if error.store_error_kind() == Some(StoreErrorKind::OutcomeUnknown) => {
            FencedCheck::Unknown
        }
        Err(_) => FencedCheck::Failed,
    }
}
