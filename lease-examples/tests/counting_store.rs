//! The conformance suite against `CountingStore` around the memory store, and what the counts
//! show about a client.

use std::sync::Arc;

use lease_core::runtime::TokioRuntime;
use lease_core::{BoxError, HolderId, LeaseClient, LeaseName, LeaseStore, MemoryStore, Ttl};
use lease_examples::counting::{CountingStore, Counts};
use lease_tests::{Capability, FreshStore, MemoryBackend, PooledStore, TestBackend};

/// Runs the suite against any backend's stores, wrapped in `CountingStore`.
struct Counting<B>(B);

#[async_trait::async_trait]
impl<B: TestBackend> TestBackend for Counting<B> {
    type Store = CountingStore<Arc<B::Store>>;

    fn name(&self) -> &str {
        "counting"
    }

    async fn available(&self) -> Result<(), BoxError> {
        self.0.available().await
    }

    /// What the inner backend offers, but fenced writes, which this wrapper does not forward:
    /// a fenced transaction runs on the caller's own connection, past the counted store.
    fn offers(&self, capability: Capability) -> bool {
        capability != Capability::FencedWrites && self.0.offers(capability)
    }

    async fn store(&self) -> Result<FreshStore<Self::Store>, BoxError> {
        let fresh = self.0.store().await?;
        Ok(fresh.map(|store| CountingStore::new(Arc::new(store))))
    }

    async fn pooled(&self, connections: u32) -> Result<Option<PooledStore<Self::Store>>, BoxError> {
        let pooled = self.0.pooled(connections).await?;
        Ok(pooled.map(|pooled| pooled.map(CountingStore::new)))
    }

    async fn unreachable(&self) -> Result<Option<Self::Store>, BoxError> {
        let store = self.0.unreachable().await?;
        Ok(store.map(|store| CountingStore::new(Arc::new(store))))
    }
}

lease_tests::conformance_suite!(mod counting_memory, runtime = tokio, backend = Counting(MemoryBackend));

#[tokio::test]
async fn counts_every_call_and_batches_stay_batches() -> Result<(), BoxError> {
    let store = CountingStore::new(MemoryStore::new());
    let ttl = Ttl::from_secs(60)?;
    let names: Vec<LeaseName> = ["sweep", "alerts", "mail-checks"]
        .into_iter()
        .map(LeaseName::new)
        .collect::<Result<_, _>>()?;
    let mut held = Vec::new();
    for name in &names {
        let holder = HolderId::generate();
        assert!(store.try_acquire(name, &holder, ttl).await?.is_some());
        held.push((name.clone(), holder));
    }
    assert_eq!(store.renew_many(&held, ttl).await?, [true, true, true]);
    assert_eq!(store.list().await?.len(), 3);
    assert_eq!(
        store.counts(),
        Counts {
            acquire: 3,
            renew_many: 1,
            read: 1,
            ..Counts::default()
        }
    );
    Ok(())
}

#[tokio::test]
async fn a_run_costs_one_acquisition_and_one_release() -> Result<(), BoxError> {
    let store = CountingStore::new(MemoryStore::new());
    let client = LeaseClient::new(store.clone(), TokioRuntime);
    let skipped = client
        .run_exclusive("sweep", |_| async {
            // While the work runs, another instance's attempt is one more acquisition.
            LeaseClient::new(store.clone(), TokioRuntime)
                .try_acquire("sweep")
                .await
        })
        .await?
        .and_then(lease_core::RunOutcome::output)
        .expect("the work finished");
    assert!(skipped?.is_none());
    let counts = store.counts();
    assert_eq!((counts.acquire, counts.release), (2, 1), "{counts:?}");
    // Nothing renewed a lease held for a moment of a 2-minute TTL.
    assert_eq!((counts.renew, counts.renew_many), (0, 0), "{counts:?}");
    Ok(())
}
