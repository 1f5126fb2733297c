//! [`DynBackend`]: any backend, with its store behind `Arc<dyn LeaseStore>`.

use std::sync::Arc;

use async_trait::async_trait;
use lease_core::{BoxError, DynLeaseStore};

use crate::{Capability, FencedStore, FreshStore, PooledStore, TestBackend};

/// Runs the suite against another backend's stores as `Arc<dyn LeaseStore>`, the way an
/// application that picks its store at run time holds one: the trait's object-safe path.
#[derive(Debug, Clone)]
pub struct DynBackend<B> {
    inner: B,
    name: String,
}

impl<B: TestBackend> DynBackend<B> {
    /// `inner`, named as it is with `+dyn` after its name.
    pub fn new(inner: B) -> Self {
        let name = format!("{}+dyn", inner.name());
        Self { inner, name }
    }
}

fn erase<S: lease_core::LeaseStore>(store: S) -> Arc<DynLeaseStore> {
    Arc::new(store)
}

#[async_trait]
impl<B: TestBackend> TestBackend for DynBackend<B> {
    type Store = Arc<DynLeaseStore>;

    fn name(&self) -> &str {
        &self.name
    }

    async fn available(&self) -> Result<(), BoxError> {
        self.inner.available().await
    }

    fn offers(&self, capability: Capability) -> bool {
        self.inner.offers(capability)
    }

    async fn store(&self) -> Result<FreshStore<Self::Store>, BoxError> {
        Ok(self.inner.store().await?.map(erase))
    }

    async fn pooled(&self, connections: u32) -> Result<Option<PooledStore<Self::Store>>, BoxError> {
        Ok(self
            .inner
            .pooled(connections)
            .await?
            .map(|pooled| pooled.map(erase)))
    }

    async fn unreachable(&self) -> Result<Option<Self::Store>, BoxError> {
        Ok(self.inner.unreachable().await?.map(erase))
    }

    async fn fenced(&self) -> Result<Option<FencedStore<Self::Store>>, BoxError> {
        Ok(self.inner.fenced().await?.map(|fenced| fenced.map(erase)))
    }
}
