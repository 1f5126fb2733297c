//! The whole suite against the reference store, directly and as `Arc<dyn LeaseStore>`, on both
//! runtimes.

use lease_tests::{DynBackend, MemoryBackend};

lease_tests::conformance_suite!(mod memory_tokio, runtime = tokio, backend = MemoryBackend);

lease_tests::conformance_suite!(
    mod memory_dyn_tokio,
    runtime = tokio,
    backend = DynBackend::new(MemoryBackend),
);

lease_tests::conformance_suite!(mod memory_async_std, runtime = async_std, backend = MemoryBackend);

lease_tests::conformance_suite!(
    mod memory_dyn_async_std,
    runtime = async_std,
    backend = DynBackend::new(MemoryBackend),
);
