//! The public types are `Send + Sync` where they should be, and the futures of the calls users
//! spawn are `Send`, so they can run on a multi-threaded executor. Checked at compile time.

use std::time::Duration;

use lease_core::{
    ClientStats, DynLeaseStore, Error, Fence, Health, HolderId, Leader, LeaseClient,
    LeaseClientBuilder, LeaseConfig, LeaseGuard, LeaseHandle, LeaseInfo, LeaseName, LossReason,
    MemoryStore, NameError, OnLoss, Operation, RunOptions, RunOutcome, Schedule, ScheduleStats,
    Scheduled, ShutdownReport, Ttl,
};

fn send_sync<T: Send + Sync>() {}

fn send<T: Send>(_: &T) {}

#[test]
fn bounds() {
    send_sync::<LeaseClient>();
    send_sync::<LeaseClientBuilder>();
    send_sync::<LeaseGuard>();
    send_sync::<LeaseHandle>();
    send_sync::<Leader>();
    send_sync::<LeaseConfig>();
    send_sync::<OnLoss>();
    send_sync::<RunOptions>();
    send_sync::<RunOutcome<()>>();
    send_sync::<ShutdownReport>();
    send_sync::<Schedule>();
    send_sync::<Scheduled>();
    send_sync::<ScheduleStats>();
    send_sync::<ClientStats>();
    send_sync::<Health>();
    send_sync::<Error>();
    send_sync::<LossReason>();
    send_sync::<NameError>();
    send_sync::<Operation>();
    send_sync::<LeaseName>();
    send_sync::<HolderId>();
    send_sync::<Fence>();
    send_sync::<Ttl>();
    send_sync::<LeaseInfo>();
    send_sync::<MemoryStore>();
    send_sync::<std::sync::Arc<DynLeaseStore>>();
    #[cfg(feature = "runtime-tokio")]
    send_sync::<lease_core::runtime::TokioRuntime>();
    #[cfg(feature = "runtime-async-std")]
    send_sync::<lease_core::runtime::AsyncStdRuntime>();
}

/// Type-checked, never called: building the futures is enough to know whether they are `Send`.
#[allow(dead_code)]
fn futures_are_send(
    client: &LeaseClient,
    guard: LeaseGuard,
    handle: &LeaseHandle,
    leader: Leader,
    scheduled: Scheduled,
) {
    send(&scheduled.stop());
    send(&client.try_acquire("sweep"));
    send(&client.shutdown(Duration::from_secs(1)));
    send(&client.acquire("sweep", Duration::from_secs(1)));
    send(&client.run_exclusive("sweep", |lease| async move { lease.fence() }));
    send(&client.run_exclusive_with("sweep", RunOptions::default(), |_| async {}));
    send(&client.run_renewer());
    send(&client.renewer());
    send(&guard.lost());
    send(&handle.lost());
    send(&guard.release());
    send(&leader.resign());
}
