//! Running one case: check the backend can run, run the case, tear down, and report.
//!
//! [`conformance_suite!`](crate::conformance_suite) calls [`tokio`](fn@tokio) or [`async_std`](fn@async_std) from each
//! test it writes; [`run_case`] is the runtime-neutral part, for a runner of your own.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use lease_core::Runtime;

use crate::{CaseFailure, CaseResult, Context, TestBackend, Verdict, env};

/// The longest a case may run, and then its teardown: far beyond what any case takes (seconds),
/// so that a wait that never ends (a row lock an earlier step left held, a server that stopped
/// answering) fails the case, saying so, rather than hanging the test run.
pub const CASE_LIMIT: Duration = Duration::from_secs(300);

/// Runs one case against `backend` on `runtime`: [`Verdict::Skipped`] when the backend is not
/// available, otherwise the case's result, after the teardown of every store it made. A failed
/// teardown fails a case that passed. The case, and then its teardown, may each take at most
/// [`CASE_LIMIT`]: a case still running then is dropped where it waits, and its teardown runs.
///
/// # Errors
/// The case's own [`CaseFailure`], or one saying that it or its teardown passed
/// [`CASE_LIMIT`]; for a case that passed, one naming the error of its teardown (after a failed
/// case, the case's failure is reported and the teardown's error is not).
///
/// # Cancel safety
/// Not cancel safe: dropped while the case runs, the case is dropped where it is (see [the
/// cases](crate::cases#cancel-safety)) and the teardown never runs, so the stores the case made
/// stay behind; dropped during the teardown, as [`Context::teardown`].
pub async fn run_case<B, F, Fut>(backend: B, runtime: impl Runtime, case: F) -> CaseResult
where
    B: TestBackend,
    F: FnOnce(Arc<Context<B>>) -> Fut,
    Fut: Future<Output = CaseResult>,
{
    if let Err(why) = backend.available().await {
        return Ok(Verdict::Skipped(why.to_string()));
    }
    let ctx = Arc::new(Context::new(backend, runtime));
    let result = ctx
        .within(CASE_LIMIT, case(Arc::clone(&ctx)))
        .await
        .unwrap_or_else(|| {
            Err(CaseFailure::new(format!(
                "the case did not finish within {CASE_LIMIT:?}: one of its waits never ended"
            )))
        });
    let teardown = ctx.within(CASE_LIMIT, ctx.teardown()).await;
    let teardown = teardown.unwrap_or_else(|| {
        Err(format!("the teardown did not finish within {CASE_LIMIT:?}").into())
    });
    match (result, teardown) {
        (Ok(_), Err(error)) => Err(CaseFailure::new(format!(
            "the case passed but its teardown failed: {error}"
        ))),
        (result, _) => result,
    }
}

/// Turns a case's result into a test's: a panic that names the backend and case when it
/// failed, a `SKIPPED` line (or, under `LEASE_TEST_REQUIRE_ALL=1`, a panic) when the backend
/// cannot run, a `NOT APPLICABLE` line when the case does not apply. The lines go past the test
/// harness's capture ([`env::report`]), so plain `cargo test` shows them.
///
/// # Panics
/// When the case failed, or was skipped while every backend is required.
pub fn conclude(backend: &str, case: &str, result: CaseResult) {
    match result {
        Ok(Verdict::Passed) => {}
        Ok(Verdict::NotApplicable(why)) => {
            env::report(&format!("NOT APPLICABLE {backend}::{case}: {why}"));
        }
        Ok(Verdict::Skipped(why)) => env::skip_or_fail(backend, &why),
        Err(failure) => panic!("{backend}::{case} failed: {failure}"),
    }
}

/// Runs one case as a test on a fresh multi-threaded tokio runtime.
///
/// # Panics
/// As [`conclude`], and when the runtime cannot be built.
#[cfg(feature = "runtime-tokio")]
pub fn tokio<B, F, Fut>(case_name: &str, backend: B, case: F)
where
    B: TestBackend,
    F: FnOnce(Arc<Context<B>>) -> Fut,
    Fut: Future<Output = CaseResult>,
{
    let backend_name = backend.name().to_owned();
    // Two workers, so spawned contenders really run in parallel, as they would in production.
    let runtime = ::tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime for the test");
    let result = runtime.block_on(run_case(backend, lease_core::runtime::TokioRuntime, case));
    conclude(&backend_name, case_name, result);
}

/// Runs one case as a test on async-std.
///
/// # Panics
/// As [`conclude`].
#[cfg(feature = "runtime-async-std")]
pub fn async_std<B, F, Fut>(case_name: &str, backend: B, case: F)
where
    B: TestBackend,
    F: FnOnce(Arc<Context<B>>) -> Fut,
    Fut: Future<Output = CaseResult>,
{
    let backend_name = backend.name().to_owned();
    let result = ::async_std::task::block_on(run_case(
        backend,
        lease_core::runtime::AsyncStdRuntime,
        case,
    ));
    conclude(&backend_name, case_name, result);
}
