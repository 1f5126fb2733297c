//! PostgreSQL release notifications through diesel-async: the conformance suite with them on,
//! on deadpool and on bb8, whose pools make the listening connection each their own way
//! (`DieselPool::dedicated`). Among its cases, `release_wakes_a_waiter` holds a waiter to the
//! release itself, not its next poll; `releases_are_pushed_only_when_they_free_the_lease` what is
//! pushed; and `listening_takes_no_connection_of_the_pool` the listening connection to one made
//! outside the pool.
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
use support::{Backend, Postgres};

lease_tests::conformance_suite!(
    mod postgres_deadpool_notifications,
    runtime = tokio,
    backend = Backend::<Postgres, deadpool::Pool<AsyncPgConnection>>::new().notifying(),
);

lease_tests::conformance_suite!(
    mod postgres_bb8_notifications,
    runtime = tokio,
    backend = Backend::<Postgres, bb8::Pool<AsyncPgConnection>>::new().notifying(),
);
