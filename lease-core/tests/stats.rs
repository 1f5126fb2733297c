//! What an operator sees: the client's statistics, its health, and a guard's deadline, on
//! tokio's paused clock. Each count is checked against the moment that makes it, beside a
//! client or a moment where it must not move.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Faulty, Mode, fast_client, name, tokio_memory};
use lease_core::{FencedCheck, HolderId, LeaseStore, LossReason, Ttl};

/// Sets `mode` on `store` for `outage`, then lets calls through again.
fn outage(store: &Arc<Faulty>, mode: Mode, outage: Duration) {
    store.set(mode);
    let store = Arc::clone(store);
    tokio::spawn(async move {
        tokio::time::sleep(outage).await;
        store.set(Mode::Pass);
    });
}

#[tokio::test(start_paused = true)]
async fn acquisitions_renewals_and_releases_are_counted() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(Arc::clone(&store));
    let other = fast_client(Arc::clone(&store));
    let guard = client.try_acquire("sweep").await.unwrap().unwrap();
    assert!(other.try_acquire("sweep").await.unwrap().is_none());
    store.set(Mode::Fail);
    assert!(client.try_acquire("report").await.is_err());
    store.set(Mode::Pass);

    let stats = client.stats();
    assert_eq!(
        (
            stats.held,
            stats.acquired,
            stats.skipped,
            stats.acquire_failed
        ),
        (1, 1, 0, 1)
    );
    assert_eq!(
        (stats.acquire_calls.calls, stats.acquire_calls.errors),
        (2, 1)
    );
    assert_eq!(
        other.stats().skipped,
        1,
        "counted by the client that skipped"
    );

    // Renewed every 250 ms: four rounds in a second.
    tokio::time::sleep(Duration::from_millis(1_010)).await;
    let stats = client.stats();
    assert_eq!(stats.renewals, 4, "{stats:?}");
    assert_eq!((stats.renewals_failed, stats.renewals_late), (0, 0));
    assert_eq!(stats.renew_calls.calls, 4);
    assert_eq!(
        other.stats().renewals,
        0,
        "a client that holds nothing renews nothing"
    );

    guard.release().await.unwrap();
    let stats = client.stats();
    assert_eq!(
        (stats.held, stats.released, stats.release_calls.calls),
        (0, 1, 1)
    );
    assert_eq!(stats.losses.total(), 0);
}

#[tokio::test(start_paused = true)]
async fn store_call_latency_is_timed_on_the_clock() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(Arc::clone(&store));
    store.delay_acquires(Duration::from_millis(40));
    let _guard = client.try_acquire("sweep").await.unwrap().unwrap();
    store.delay_acquires(Duration::from_millis(20));
    let _other = client.try_acquire("report").await.unwrap().unwrap();
    let calls = client.stats().acquire_calls;
    assert_eq!(calls.total, Duration::from_millis(60));
    assert_eq!(calls.max, Duration::from_millis(40));
    assert_eq!(calls.mean(), Some(Duration::from_millis(30)));

    store.set(Mode::Hang);
    assert!(client.try_acquire("digest").await.is_err());
    let calls = client.stats().acquire_calls;
    assert_eq!(
        calls.max,
        client.config().store_timeout,
        "a timeout counts as long as it took"
    );
    assert_eq!(calls.errors, 1);
}

/// A renewal period and a store timeout that reach the local deadline (a TTL of 60 s renewed
/// every 30 s: the store timeout follows the period, 30 s, and the local validity is 54 s) still
/// turn the client unhealthy before its lease is lost: half-way between the renewal's due time
/// and the deadline, at 42 s, not after 60 s, when the lease would be lost and no longer counted.
#[tokio::test(start_paused = true)]
async fn a_long_period_and_timeout_still_turn_the_client_unhealthy_before_the_deadline() {
    let store = Faulty::new(tokio_memory());
    let client =
        lease_core::LeaseClient::builder(Arc::clone(&store), lease_core::runtime::TokioRuntime)
            .ttl(Ttl::from_secs(60).unwrap())
            .renew_every(Duration::from_secs(30))
            .build()
            .unwrap();
    let guard = client.try_acquire("sweep").await.unwrap().unwrap();
    store.set(Mode::Fail);
    tokio::time::sleep(Duration::from_secs(45)).await;
    let health = client.health();
    assert!(guard.is_held(), "lost before the deadline: {health:?}");
    assert!(
        !health.is_healthy(),
        "healthy 45 s after the last renewal, 9 s before the lease is lost: {health:?}"
    );
    assert_eq!((health.held, health.overdue), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn failed_and_late_renewals_are_counted_and_the_client_turns_unhealthy_before_the_deadline() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(Arc::clone(&store));
    let healthy = fast_client(tokio_memory());
    let _steady = healthy.try_acquire("sweep").await.unwrap().unwrap();
    let guard = client.try_acquire("sweep").await.unwrap().unwrap();
    assert!(client.health().is_healthy());

    // Renewals fail from 250 ms on, retried every 62.5 ms, until 820 ms: the one sent at 875 ms
    // succeeds, 25 ms before the local deadline at 900 ms, inside the 100 ms safety margin.
    outage(&store, Mode::Fail, Duration::from_millis(820));
    tokio::time::sleep(Duration::from_millis(600)).await;
    let health = client.health();
    assert!(
        !health.is_healthy(),
        "overdue 100 ms after a period and a timeout: {health:?}"
    );
    assert_eq!((health.held, health.overdue), (1, 1));
    assert_eq!(health.soonest_deadline, Some(Duration::from_millis(300)));
    assert!(guard.is_held(), "unhealthy before the lease is lost");
    assert!(
        healthy.health().is_healthy(),
        "the control, renewed all along"
    );

    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(guard.is_held());
    let stats = client.stats();
    assert_eq!(stats.renewals_late, 1, "{stats:?}");
    assert_eq!(stats.renewals_failed, 10, "{stats:?}");
    assert_eq!(stats.losses.total(), 0);
    assert!(client.health().is_healthy(), "healthy again once renewed");
    assert_eq!(
        healthy.stats().renewals_late,
        0,
        "the control renewed in time"
    );
}

/// A lease released while its renewal was on its way, the renewal then failing (it timed
/// out), is not counted as a failed renewal: the client holds nothing that failed to renew.
/// The same failure for a lease still held is (the control).
#[tokio::test(start_paused = true)]
async fn a_renewal_that_fails_for_a_lease_released_meanwhile_counts_no_failure() {
    for release in [true, false] {
        let store = Faulty::new(tokio_memory());
        let client = fast_client(Arc::clone(&store));
        let guard = client.try_acquire("sweep").await.unwrap().expect("free");
        // The first renewal, 250 ms on, hangs past the store timeout.
        store.delay_renewals(Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            store.renew_manys.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "the renewal is on its way"
        );
        let kept = if release {
            guard.release().await.unwrap();
            None
        } else {
            Some(guard)
        };
        store.delay_renewals(Duration::ZERO);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let failed = client.stats().renewals_failed;
        if release {
            assert_eq!(failed, 0, "counted for a lease released meanwhile");
        } else {
            assert_eq!(failed, 1, "the control's failed renewal was not counted");
        }
        drop(kept);
    }
}

#[tokio::test(start_paused = true)]
async fn losses_are_counted_by_reason() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(Arc::clone(&store));

    let taken_over = client.try_acquire("sweep").await.unwrap().unwrap();
    store
        .inner
        .release(taken_over.name(), taken_over.holder(), Duration::ZERO)
        .await
        .unwrap();
    let thief = HolderId::generate();
    store
        .inner
        .try_acquire(&name("sweep"), &thief, Ttl::from_secs(60).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(taken_over.lost().await, LossReason::Rejected);

    let fenced = client.try_acquire("report").await.unwrap().unwrap();
    let _ = fenced.mark_not_held();

    let unreachable = client.try_acquire("digest").await.unwrap().unwrap();
    store.set(Mode::Fail);
    assert_eq!(unreachable.lost().await, LossReason::DeadlinePassed);

    let losses = client.stats().losses;
    assert_eq!(
        (
            losses.rejected,
            losses.not_held,
            losses.deadline_passed,
            losses.shut_down
        ),
        (1, 1, 1, 0)
    );
    assert_eq!(client.stats().held, 0, "{:?}", client.stats());
}

#[tokio::test(start_paused = true)]
async fn fenced_checks_are_counted_by_outcome_and_change_nothing_else() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(Arc::clone(&store));
    let guard = client.try_acquire("sweep").await.unwrap().unwrap();
    let handle = guard.handle();

    handle.record_fenced_check(FencedCheck::Passed);
    handle.record_fenced_check(FencedCheck::Passed);
    handle.record_fenced_check(FencedCheck::Failed);
    handle.record_fenced_check(FencedCheck::NotHeld);
    handle.record_fenced_check(FencedCheck::Unknown);

    let stats = client.stats();
    let checks = stats.fenced_checks;
    assert_eq!(
        (
            checks.passed,
            checks.not_held,
            checks.failed,
            checks.unknown,
            checks.total()
        ),
        (2, 1, 1, 1, 5)
    );
    // Counting is all it does: the lease stays held until a store marks it lost.
    assert!(guard.is_held());
    assert_eq!(stats.losses.total(), 0);
    assert_eq!(stats.held, 1);
    assert_eq!(
        [
            FencedCheck::Passed,
            FencedCheck::NotHeld,
            FencedCheck::Failed,
            FencedCheck::Unknown
        ]
        .map(FencedCheck::label),
        ["passed", "not_held", "failed", "unknown"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_guard_tells_its_deadline_and_time_left() {
    let client = fast_client(tokio_memory());
    let taken = tokio::time::Instant::now();
    let guard = client.try_acquire("sweep").await.unwrap().unwrap();
    assert_eq!(guard.time_left(), Duration::from_millis(900));
    assert_eq!(
        guard.deadline(),
        (taken + Duration::from_millis(900)).into_std()
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Renewed at 250 ms: the deadline moved to 1,150 ms.
    assert_eq!(guard.time_left(), Duration::from_millis(850));
    assert_eq!(guard.handle().time_left(), guard.time_left());
    let _ = guard.mark_not_held();
    assert_eq!(guard.time_left(), Duration::ZERO, "none left once lost");
}
