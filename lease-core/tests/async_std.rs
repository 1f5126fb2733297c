//! The same client on async-std: nothing in the core needs tokio.

mod common;

use std::time::Duration;

use common::{Faulty, Mode};
use lease_core::{LeaseClient, LossReason, MemoryStore, RunOutcome, Ttl, runtime::AsyncStdRuntime};

fn client(store: impl lease_core::LeaseStore) -> LeaseClient {
    LeaseClient::builder(store, AsyncStdRuntime)
        .ttl(Ttl::from_millis(600).unwrap())
        .renew_every(Duration::from_millis(150))
        .build()
        .unwrap()
}

#[async_std::test]
async fn one_holder_renewal_and_release() {
    let store = MemoryStore::new();
    let (a, b) = (client(store.clone()), client(store.clone()));
    let guard = a.try_acquire("sweep").await.unwrap().unwrap();
    async_std::task::sleep(Duration::from_millis(1_500)).await;
    assert!(guard.is_held(), "renewed by the spawned renewer");
    assert!(b.try_acquire("sweep").await.unwrap().is_none());
    guard.release().await.unwrap();
    assert!(b.try_acquire("sweep").await.unwrap().is_some());
}

#[async_std::test]
async fn loss_cancels_the_work() {
    let store = Faulty::new(MemoryStore::new());
    let outcome = client(store.clone())
        .run_exclusive("alerts", |_| async {
            store.set(Mode::Fail);
            async_std::task::sleep(Duration::from_secs(30)).await;
        })
        .await
        .unwrap();
    assert_eq!(
        outcome,
        Some(RunOutcome::Cancelled {
            reason: LossReason::DeadlinePassed
        })
    );
}
