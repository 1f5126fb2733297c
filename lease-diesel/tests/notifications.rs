//! PostgreSQL release notifications through diesel-async: the conformance suite with them on
//! (deadpool), where `release_wakes_a_waiter` holds a waiter to the release itself, not its next
//! poll; the cases of waiting once more on bb8; and the listening connection made outside the
//! pool, so that a pool of one still runs statements while the store listens.
#![cfg(all(
    feature = "postgres",
    feature = "mysql",
    feature = "sqlite",
    feature = "deadpool",
    feature = "bb8"
))]

mod support;

use std::time::Duration;

use diesel_async::AsyncPgConnection;
use diesel_async::pooled_connection::{bb8, deadpool};
use futures::StreamExt;
use lease_core::{HolderId, LeaseName, LeaseStore, Ttl};
use lease_tests::{cases, env, run};
use support::{Backend, Database, Postgres, TestPool};

type Deadpool = deadpool::Pool<AsyncPgConnection>;
type Bb8 = bb8::Pool<AsyncPgConnection>;

lease_tests::conformance_suite!(
    mod postgres_deadpool_notifications,
    runtime = tokio,
    backend = Backend::<Postgres, Deadpool>::new().notifying(),
);

#[test]
fn bb8_release_wakes_a_waiter() {
    let backend = Backend::<Postgres, Bb8>::new().notifying();
    run::tokio("release_wakes_a_waiter", backend, |ctx| async move {
        cases::release_wakes_a_waiter(&*ctx).await
    });
}

#[test]
fn bb8_acquire_waits_for_the_release() {
    let backend = Backend::<Postgres, Bb8>::new().notifying();
    run::tokio("acquire_waits_for_the_release", backend, |ctx| async move {
        cases::acquire_waits_for_the_release(&*ctx).await
    });
}

/// On a pool of one connection, the store listens and still runs its statements: the listening
/// connection is not the pool's (were it, every statement would wait for it until the pool's
/// timeout). A release that frees a lease is pushed; one a minimum hold keeps taken is not.
async fn listening_pins_no_connection_of_the_pool<P: TestPool<Connection = AsyncPgConnection>>() {
    if let Err(error) = Postgres::available().await {
        return env::skip_or_fail(Postgres::NAME, &error.to_string());
    }
    let backend = Backend::<Postgres, P>::new().notifying();
    let (store, table) = backend.make(1).await.unwrap();
    let mut events = store
        .release_events()
        .await
        .unwrap()
        .expect("notifications are on");
    let ttl = Ttl::from_secs(60).unwrap();
    let (kept, freed) = (
        LeaseName::new("kept").unwrap(),
        LeaseName::new("freed").unwrap(),
    );
    let holder = HolderId::generate();
    let statements = async {
        for name in [&kept, &freed] {
            assert!(
                store
                    .try_acquire(name, &holder, ttl)
                    .await
                    .unwrap()
                    .is_some()
            );
        }
        assert!(
            store
                .release(&kept, &holder, Duration::from_secs(60))
                .await
                .unwrap()
        );
        assert!(
            store
                .release(&freed, &holder, Duration::ZERO)
                .await
                .unwrap()
        );
    };
    tokio::time::timeout(support::CONNECT_TIMEOUT, statements)
        .await
        .expect("the pool's one connection answers while the store listens");
    let pushed = tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .expect("the release that freed a lease was pushed")
        .expect("the stream goes on");
    assert_eq!(pushed, freed);
    let more = tokio::time::timeout(Duration::from_millis(300), events.next()).await;
    assert!(more.is_err(), "only one release freed a lease: {more:?}");
    let state = store.pool_state();
    assert!(
        state.size <= 1,
        "the pool holds only its own connection: {state:?}"
    );
    drop(events);
    Backend::<Postgres, P>::drop_table(store.pool(), &table)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn deadpool_listening_pins_no_connection_of_the_pool() {
    listening_pins_no_connection_of_the_pool::<Deadpool>().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bb8_listening_pins_no_connection_of_the_pool() {
    listening_pins_no_connection_of_the_pool::<Bb8>().await;
}
