//! The same client on async-std: nothing in the core needs tokio.

mod common;

use std::time::Duration;

use common::{Faulty, Mode};
use lease_core::{
    LeaseClient, LeaseInfo, LeaseStore, LossReason, MemoryStore, RunOutcome, Ttl,
    runtime::AsyncStdRuntime,
};

const TTL: Duration = Duration::from_millis(600);

fn client(store: impl lease_core::LeaseStore) -> LeaseClient {
    LeaseClient::builder(store, AsyncStdRuntime)
        .ttl(Ttl::new(TTL).unwrap())
        .renew_every(Duration::from_millis(150))
        // Real time on a loaded machine: a store call gets far more than one renewal period
        // before it counts as failed, and still less than the TTL minus the safety margin.
        .store_timeout(Duration::from_millis(500))
        .build()
        .unwrap()
}

/// Polls the store until `done` holds for the lease, at most 250 times 20 ms apart.
async fn wait_for_store(
    store: &MemoryStore,
    name: &lease_core::LeaseName,
    what: &str,
    done: impl Fn(&LeaseInfo) -> bool,
) -> LeaseInfo {
    for _ in 0..250 {
        if let Some(info) = store.inspect(name).await.unwrap()
            && done(&info)
        {
            return info;
        }
        async_std::task::sleep(Duration::from_millis(20)).await;
    }
    panic!("the store never showed {what} within 5 s");
}

#[async_std::test]
async fn one_holder_renewal_and_release() {
    let store = MemoryStore::new();
    let (a, b) = (client(store.clone()), client(store.clone()));
    let guard = a.try_acquire("sweep").await.unwrap().unwrap();
    // Renewed by the spawned renewer after its first TTL had run out: its expiry is at least
    // two TTLs after it was taken.
    wait_for_store(
        &store,
        guard.name(),
        "a renewal after the first TTL",
        |info| {
            info.expires_at
                .duration_since(info.taken_at)
                .is_ok_and(|extended| extended >= 2 * TTL)
        },
    )
    .await;
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
