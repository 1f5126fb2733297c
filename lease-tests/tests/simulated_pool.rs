//! The whole suite against a memory store behind a simulated one-statement-per-connection pool,
//! so the pool case runs on every `cargo test`, not only where a database is.

#[path = "support/pool.rs"]
mod pool;

use lease_core::runtime::TokioRuntime;
use lease_tests::cases;
use lease_tests::run::run_case;
use pool::SimulatedPool;

lease_tests::conformance_suite!(
    mod memory_pool_tokio,
    runtime = tokio,
    backend = SimulatedPool::honest(),
);

lease_tests::conformance_suite!(
    mod memory_pool_async_std,
    runtime = async_std,
    backend = SimulatedPool::honest(),
);

/// The negative control: leases that pin the connection they were taken on, as session
/// advisory locks do, fail the case. The second lease already waits for the only connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_that_pin_connections_break_no_connection_held() {
    let result = run_case(SimulatedPool::pinning(), TokioRuntime, |ctx| async move {
        cases::no_connection_held(&*ctx).await
    })
    .await;
    let failure = result.expect_err("pinned connections passed the case");
    assert!(
        failure.message().contains("lease store failed to acquire"),
        "{failure}"
    );
}
