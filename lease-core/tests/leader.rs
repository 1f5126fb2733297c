//! Leader election hands over when the leader stops.

mod common;

use std::time::Duration;

use common::{fast_client, tokio_memory};
use futures::StreamExt;
use lease_core::LeaseStore;

#[tokio::test(start_paused = true)]
async fn leadership_passes_on_when_the_leader_resigns_or_goes_away() {
    let store = tokio_memory();
    let (a, b, c) = (
        fast_client(store.clone()),
        fast_client(store.clone()),
        fast_client(store.clone()),
    );

    let first = a.campaign("alerts").unwrap();
    let mut first_changes = first.changes();
    assert_eq!(first_changes.next().await, Some(true));
    assert!(first.is_leader());
    let first_fence = first.fence().unwrap();

    let second = b.campaign("alerts").unwrap();
    let mut second_changes = second.changes();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(first.is_leader());
    assert!(!second.is_leader(), "two leaders at once");

    first.resign().await;
    let started = tokio::time::Instant::now();
    assert_eq!(second_changes.next().await, Some(true));
    assert!(
        started.elapsed() <= Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );
    assert!(second.fence().unwrap() > first_fence);
    assert_eq!(first_changes.next().await, Some(false));

    // Dropping the last handle ends the campaign and gives the lease back.
    let third = c.campaign("alerts").unwrap();
    let mut third_changes = third.changes();
    drop(second);
    assert_eq!(third_changes.next().await, Some(true));
    let info = store
        .inspect(&common::name("alerts"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(Some(info.fence), third.fence());
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_loses_its_lease_stops_leading_and_campaigns_again() {
    let store = tokio_memory();
    let client = fast_client(store.clone());
    let leader = client.campaign("sweep").unwrap();
    let mut changes = leader.changes();
    assert_eq!(changes.next().await, Some(true));
    let info = store.inspect(leader.name()).await.unwrap().unwrap();

    // The lease is taken away; the next renewal is rejected.
    assert!(
        store
            .release(leader.name(), &info.holder, Duration::ZERO)
            .await
            .unwrap()
    );
    assert_eq!(changes.next().await, Some(false));
    // And it campaigns again (woken by the release at once), winning the free lease with a
    // higher fence.
    assert_eq!(changes.next().await, Some(true));
    assert!(leader.fence().unwrap() > info.fence);
}
