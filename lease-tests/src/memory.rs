//! [`MemoryBackend`]: the reference store under the suite.

use async_trait::async_trait;
use lease_core::{BoxError, MemoryStore};

use crate::{Capability, FreshStore, TestBackend};

/// Runs the suite against [`MemoryStore`]: a new store per test, no pool, always reachable,
/// pushing its releases.
///
/// ```
/// use lease_tests::MemoryBackend;
///
/// lease_tests::conformance_suite!(mod memory, runtime = tokio, backend = MemoryBackend);
/// # fn main() {}
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct MemoryBackend;

#[async_trait]
impl TestBackend for MemoryBackend {
    type Store = MemoryStore;

    fn name(&self) -> &str {
        "memory"
    }

    fn offers(&self, capability: Capability) -> bool {
        capability == Capability::PushedReleases
    }

    async fn store(&self) -> Result<FreshStore<MemoryStore>, BoxError> {
        Ok(FreshStore::new(MemoryStore::new()))
    }
}
