//! A renewal that fails or hangs leaves time for another try before the lease's local deadline:
//! the default store timeout is at most half the time a renewal sent on time has left, and a
//! failed renewal is tried again at most half-way to the deadline. On tokio's paused clock.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Faulty, Mode, tokio_memory};
use lease_core::{LeaseClient, Ttl, runtime::TokioRuntime};

/// Sets `mode` on `store` from `from` to `until` after now.
fn fault(store: &Arc<Faulty>, mode: Mode, from: Duration, until: Duration) {
    let store = Arc::clone(store);
    tokio::spawn(async move {
        tokio::time::sleep(from).await;
        store.set(mode);
        tokio::time::sleep(until - from).await;
        store.set(Mode::Pass);
    });
}

/// A 60 s TTL renewed every 30 s: the local deadline falls 54 s after a renewal is sent. With
/// the store timeout as long as the period, a renewal that hangs at 30 s times out at 60 s,
/// after the deadline, and the lease is lost with no second try; with the default now chosen
/// (12 s), it times out at 42 s, and the try at 48 s, once the store answers again, renews it.
#[tokio::test(start_paused = true)]
async fn a_hung_renewal_leaves_time_for_another_try() {
    let store = Faulty::new(tokio_memory());
    let client = LeaseClient::builder(Arc::clone(&store), TokioRuntime)
        .ttl(Ttl::from_secs(60).unwrap())
        .renew_every(Duration::from_secs(30))
        .build()
        .unwrap();
    assert_eq!(client.config().store_timeout, Duration::from_secs(12));
    let guard = client.try_acquire("nightly-report").await.unwrap().unwrap();
    fault(
        &store,
        Mode::Hang,
        Duration::from_secs(29),
        Duration::from_secs(44),
    );
    tokio::time::sleep(Duration::from_secs(70)).await;
    let stats = client.stats();
    assert!(
        guard.is_held(),
        "the lease was lost to one hung renewal: {:?}",
        stats.losses
    );
    assert!(
        stats.renewals_failed >= 1,
        "the hung renewal counts as failed"
    );
    guard.release().await.unwrap();
}

/// A 60 s TTL renewed every 45 s: 9 s between a renewal sent on time and the local deadline. A
/// renewal that fails at once at 45 s was tried again a quarter period on, at 56.25 s, after the
/// deadline (54 s); now half-way there, and again, until the store answers at 50 s.
#[tokio::test(start_paused = true)]
async fn a_failed_renewal_is_tried_again_before_the_deadline() {
    let store = Faulty::new(tokio_memory());
    let client = LeaseClient::builder(Arc::clone(&store), TokioRuntime)
        .ttl(Ttl::from_secs(60).unwrap())
        .renew_every(Duration::from_secs(45))
        .build()
        .unwrap();
    let guard = client.try_acquire("nightly-report").await.unwrap().unwrap();
    fault(
        &store,
        Mode::Fail,
        Duration::from_secs(44),
        Duration::from_secs(50),
    );
    tokio::time::sleep(Duration::from_secs(58)).await;
    let stats = client.stats();
    assert!(
        guard.is_held(),
        "the lease was lost though the store answered 4 s before its deadline: {:?}",
        stats.losses
    );
    assert!(
        stats.renewals_failed >= 2,
        "the renewal failed and was tried again while the store failed: {stats:?}"
    );
    guard.release().await.unwrap();
}
