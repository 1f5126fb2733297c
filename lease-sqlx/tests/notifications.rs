//! PostgreSQL release notifications: the conformance suite with them on (prepared and through
//! the simple protocol: among its cases, releases pushed only when they free a lease, a waiter
//! woken by the release, a pool of one that listening leaves free), no events with them off,
//! and a waiter woken by a release long before its next poll, twice on one client.
#![cfg(feature = "postgres")]

mod common;

use std::time::{Duration, Instant};

use common::Backend;
use lease_core::runtime::TokioRuntime;
use lease_core::{LeaseClient, LeaseName, LeaseStore};
use lease_sqlx::sqlx::postgres::PgPoolOptions;
use lease_sqlx::sqlx::{self, AssertSqlSafe, Postgres};
use lease_sqlx::{PgLeaseStore, PgProtocol};
use lease_tests::env;

fn notifying() -> Backend<Postgres> {
    Backend::adjusted("postgres-notifications", |store| {
        store.with_notifications(true)
    })
    .pushing_releases()
}

fn notifying_simple() -> Backend<Postgres> {
    Backend::adjusted("postgres-notifications-simple-protocol", |store| {
        store
            .with_notifications(true)
            .map_executor(|x| x.with_protocol(PgProtocol::SimpleInline))
    })
    .pushing_releases()
}

lease_tests::conformance_suite!(mod conformance_notifying, runtime = tokio, backend = notifying());
lease_tests::conformance_suite!(mod conformance_notifying_simple, runtime = tokio, backend = notifying_simple());

/// A store with notifications on over a fresh table, or `None` after reporting the skip.
async fn store() -> Option<(PgLeaseStore, String)> {
    let pool = match PgPoolOptions::new()
        .max_connections(4)
        .acquire_timeout(Duration::from_secs(10))
        .connect(&env::postgres_url())
        .await
    {
        Ok(pool) => pool,
        Err(error) => {
            env::skip_or_fail("postgres", &error.to_string());
            return None;
        }
    };
    let table = env::unique_table("lease_notify");
    let store = PgLeaseStore::with_table(pool, &table)
        .unwrap()
        .with_notifications(true);
    store.setup().await.unwrap();
    Some((store, table))
}

async fn drop_table(store: PgLeaseStore, table: &str) {
    sqlx::raw_sql(AssertSqlSafe(format!("DROP TABLE IF EXISTS {table}")))
        .execute(store.pool())
        .await
        .unwrap();
    store.pool().close().await;
}

#[tokio::test]
async fn without_notifications_there_are_no_release_events() {
    let Some((store, table)) = store().await else {
        return;
    };
    let quiet = store.clone().with_notifications(false);
    assert!(!quiet.notifications());
    assert!(quiet.release_events().await.unwrap().is_none());
    assert!(store.notifications());
    drop_table(store, &table).await;
}

#[tokio::test]
async fn a_waiter_wakes_on_a_release_long_before_its_next_poll() {
    let Some((store, table)) = store().await else {
        return;
    };
    let holder = LeaseClient::new(store.clone(), TokioRuntime);
    // Polling alone would wait at least 5 s after the first failed attempt.
    let poll = Duration::from_secs(10);
    let waiter = LeaseClient::builder(store.clone(), TokioRuntime)
        .acquire_backoff(poll, poll)
        .build()
        .unwrap();
    // The first handover also opens the waiter's listening connection: not timed.
    for (round, timed) in [(0, false), (1, true)] {
        let name = LeaseName::new(format!("handover-{round}")).unwrap();
        let guard = holder.try_acquire(&name).await.unwrap().expect("free");
        let waiting = {
            let (waiter, name) = (waiter.clone(), name.clone());
            tokio::spawn(async move {
                let guard = waiter.acquire(&name, Duration::from_secs(60)).await;
                (guard, Instant::now())
            })
        };
        tokio::time::sleep(Duration::from_millis(500)).await;
        let released = Instant::now();
        guard.release().await.unwrap();
        let (taken, at) = waiting.await.unwrap();
        let taken = taken.expect("the waiter takes the released lease");
        if timed {
            let waited = at - released;
            assert!(
                waited < Duration::from_secs(2),
                "the waiter took {waited:?} after the release; its next poll was at least 5 s away"
            );
        }
        taken.release().await.unwrap();
    }
    drop((holder, waiter));
    drop_table(store, &table).await;
}
