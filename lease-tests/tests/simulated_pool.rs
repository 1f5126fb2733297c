//! The whole suite against a memory store behind a simulated one-statement-per-connection pool,
//! so the pool cases (a held lease, and listening for releases, take no connection) run on
//! every `cargo test`, not only where a database is; and their negative controls.

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

/// The negative control of holding a connection once a lease is held: leases taken as they
/// should be, whose renewals then keep their connection (a renewal left in an open
/// transaction). Every lease is taken; the first renewal keeps the only connection, and the
/// probe write waits for it until the case gives up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_that_keep_their_connection_break_no_connection_held() {
    let result = run_case(
        SimulatedPool::pinning_on_renewal(),
        TokioRuntime,
        |ctx| async move { cases::no_connection_held(&*ctx).await },
    )
    .await;
    let failure = result.expect_err("renewals that keep their connection passed the case");
    assert!(
        failure.message().contains("did not commit within"),
        "{failure}"
    );
}

/// The negative control of listening: a subscription to releases that keeps a connection of the
/// pool, as a `LISTEN` on a pooled connection would, leaves a pool of one with none for the
/// statements, which then wait until the case gives up on them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listening_on_a_pooled_connection_breaks_listening_takes_no_connection() {
    let result = run_case(
        SimulatedPool::listening_on_the_pool(),
        TokioRuntime,
        |ctx| async move { cases::listening_takes_no_connection_of_the_pool(&*ctx).await },
    )
    .await;
    let failure = result.expect_err("listening on a pooled connection passed the case");
    assert!(
        failure
            .message()
            .contains("the listening holds the pool's connection"),
        "{failure}"
    );
}

/// The same with the connection taken only when the stream is first read, as a stream that
/// opens its `LISTEN` lazily would: the case reads the events while its statements run, so
/// this store fails it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listening_on_a_pooled_connection_when_read_breaks_listening_takes_no_connection() {
    let result = run_case(
        SimulatedPool::listening_on_the_pool_when_read(),
        TokioRuntime,
        |ctx| async move { cases::listening_takes_no_connection_of_the_pool(&*ctx).await },
    )
    .await;
    let failure = result.expect_err("listening on a pooled connection when read passed the case");
    assert!(
        failure
            .message()
            .contains("the listening holds the pool's connection"),
        "{failure}"
    );
}

/// The honest pool passes the listening case rather than reporting it not applicable, so the
/// control above fails for the connection it keeps and for nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_honest_pool_listens_without_a_connection() {
    let verdict = run_case(SimulatedPool::honest(), TokioRuntime, |ctx| async move {
        cases::listening_takes_no_connection_of_the_pool(&*ctx).await
    })
    .await
    .expect("the honest pool failed the listening case");
    assert_eq!(verdict, lease_tests::Verdict::Passed);
}
