//! PostgreSQL release notifications through diesel-async: the conformance suite with them on
//! (deadpool), where `release_wakes_a_waiter` holds a waiter to the release itself, not its next
//! poll, and `listening_takes_no_connection_of_the_pool` the listening connection to one made
//! outside the pool; the cases of pushed releases once more on bb8, whose pools make that
//! connection another way.
#![cfg(all(
    feature = "postgres",
    feature = "mysql",
    feature = "sqlite",
    feature = "deadpool",
    feature = "bb8"
))]

mod support;

use diesel_async::AsyncPgConnection;
use diesel_async::pooled_connection::{bb8, deadpool};
use lease_tests::{cases, run};
use support::{Backend, Postgres};

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

#[test]
fn bb8_releases_are_pushed_only_when_they_free_the_lease() {
    let backend = Backend::<Postgres, Bb8>::new().notifying();
    run::tokio(
        "releases_are_pushed_only_when_they_free_the_lease",
        backend,
        |ctx| async move { cases::releases_are_pushed_only_when_they_free_the_lease(&*ctx).await },
    );
}

#[test]
fn bb8_listening_takes_no_connection_of_the_pool() {
    let backend = Backend::<Postgres, Bb8>::new().notifying();
    run::tokio(
        "listening_takes_no_connection_of_the_pool",
        backend,
        |ctx| async move { cases::listening_takes_no_connection_of_the_pool(&*ctx).await },
    );
}
