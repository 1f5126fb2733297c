//! Waits and campaigns ride out a slow or flaky store: transient errors (failures, statements
//! that outlive the store timeout) are retried with the backoff until the wait's own timeout,
//! permanent ones end the wait or the campaign at once. On tokio's paused clock.

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{Faulty, Mode, fast_client, tokio_memory};
use futures::StreamExt;
use lease_core::{Error, LeaseClient, LeaseStore, StoreErrorKind, Ttl, runtime::TokioRuntime};
use tokio::time::Instant;

const WAIT: Duration = Duration::from_secs(20);

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
async fn a_wait_rides_out_a_failing_store_and_takes_the_lease_once_it_answers() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(Arc::clone(&store));
    outage(&store, Mode::Fail, Duration::from_secs(3));
    let started = Instant::now();
    let guard = client.acquire("sweep", WAIT).await.unwrap();
    assert!(guard.is_held());
    assert!(started.elapsed() >= Duration::from_secs(3));
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "one backoff pause after the outage"
    );
    assert!(store.acquires.load(Ordering::SeqCst) > 2, "retried");
}

#[tokio::test(start_paused = true)]
async fn a_wait_rides_out_statements_that_outlive_the_store_timeout() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(Arc::clone(&store));
    outage(&store, Mode::Hang, Duration::from_secs(2));
    let guard = client.acquire("sweep", WAIT).await.unwrap();
    assert!(guard.is_held());
}

/// An acquisition whose answer was lost may have taken the lease for a holder nobody knows:
/// the client gives it back and tells a transient failure, so the lease is free again at once
/// rather than after its TTL, and a wait goes on and takes it.
#[tokio::test(start_paused = true)]
async fn an_acquisition_whose_answer_was_lost_is_given_back() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(Arc::clone(&store));
    store.lose_acquire_answers(1);
    let error = match client.try_acquire("sweep").await {
        Err(error) => error,
        Ok(taken) => panic!("a lost answer answered {taken:?}"),
    };
    assert_eq!(
        error.store_error_kind(),
        Some(StoreErrorKind::Transient),
        "{error:?}"
    );
    // The give-back runs in the background, at once.
    tokio::time::sleep(Duration::from_millis(1)).await;
    let guard = client
        .try_acquire("sweep")
        .await
        .unwrap()
        .expect("the lease an unanswered acquisition took was given back");
    guard.release().await.unwrap();

    store.lose_acquire_answers(1);
    let started = Instant::now();
    let guard = client.acquire("sweep", WAIT).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "the wait took {:?}, a TTL or more",
        started.elapsed()
    );
    guard.release().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_permanent_error_ends_the_wait_at_once() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(Arc::clone(&store));
    store.set(Mode::Refuse);
    let started = Instant::now();
    let error = client.acquire("sweep", WAIT).await.unwrap_err();
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert!(!error.is_transient());
    assert_eq!(error.store_error_kind(), Some(StoreErrorKind::Permanent));
    assert_eq!(store.acquires.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_store_that_keeps_failing_ends_the_wait_at_its_timeout_with_the_store_error() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(Arc::clone(&store));
    store.set(Mode::Fail);
    let started = Instant::now();
    let error = client.acquire("sweep", WAIT).await.unwrap_err();
    assert!(started.elapsed() >= WAIT, "{:?}", started.elapsed());
    assert!(matches!(error, Error::Store { .. }), "{error:?}");
    assert!(error.is_transient());
}

#[tokio::test(start_paused = true)]
async fn the_control_a_held_lease_still_times_out() {
    let store = tokio_memory();
    let client = fast_client(store.clone());
    let _held = fast_client(store)
        .try_acquire("sweep")
        .await
        .unwrap()
        .unwrap();
    let error = client.acquire("sweep", WAIT).await.unwrap_err();
    assert!(matches!(error, Error::Timeout { .. }), "{error:?}");
    assert!(!error.is_transient());
}

#[tokio::test(start_paused = true)]
async fn a_campaign_rides_out_a_failing_store_and_leads_once_it_answers() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(Arc::clone(&store));
    outage(&store, Mode::Fail, Duration::from_secs(3));
    let leader = client.campaign("alerts").unwrap();
    let mut changes = leader.changes();
    assert_eq!(changes.next().await, Some(true));
    assert!(leader.error().is_none());
}

#[tokio::test(start_paused = true)]
async fn a_permanent_error_ends_the_campaign_and_says_why() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(Arc::clone(&store));
    store.set(Mode::Refuse);
    let leader = client.campaign("alerts").unwrap();
    let mut changes = leader.changes();
    assert_eq!(
        changes.next().await,
        None,
        "the stream ends with the campaign"
    );
    let error = leader.error().expect("the error that ended it");
    assert_eq!(error.store_error_kind(), Some(StoreErrorKind::Permanent));
    assert_eq!(store.acquires.load(Ordering::SeqCst), 1, "not retried");
    assert!(!leader.is_leader());
    // A stream asked for after the end ends at once.
    assert_eq!(leader.changes().next().await, None);
}

#[tokio::test(start_paused = true)]
async fn an_acquisition_that_timed_out_after_taking_the_lease_gives_it_back_instead_of_blocking_a_ttl()
 {
    let store = Faulty::new(tokio_memory());
    // A TTL of a minute, so a lease left taken would keep the wait below out for that long.
    let client = LeaseClient::builder(Arc::clone(&store), TokioRuntime)
        .ttl(Ttl::from_secs(60).unwrap())
        .renew_every(Duration::from_secs(10))
        .store_timeout(Duration::from_millis(250))
        .build()
        .unwrap();
    store.delay_acquire_answers(Duration::from_millis(400));
    assert!(client.try_acquire("sweep").await.is_err(), "timed out");
    // The control: the statement did take the lease, for a holder nobody knows.
    let ghost = store.inner.inspect(&common::name("sweep")).await.unwrap();
    assert!(
        ghost.is_some_and(|info| !info.is_expired()),
        "taken behind the timeout"
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(
        store.inner.inspect(&common::name("sweep")).await.unwrap(),
        None,
        "given back in the background"
    );

    // Through a wait: the first attempt times out after taking the lease, the next takes it.
    let answers_in_time = {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(260)).await;
            store.delay_acquire_answers(Duration::ZERO);
        })
    };
    let started = Instant::now();
    let guard = client.acquire("report", WAIT).await.unwrap();
    answers_in_time.await.unwrap();
    assert!(guard.is_held());
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}, not a TTL",
        started.elapsed()
    );
}
