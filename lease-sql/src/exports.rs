//! The items a driver crate (lease-sqlx, lease-diesel) re-exports as its own, so that an
//! application depends on the driver crate alone: lease-core's client, guards, schedules and
//! statistics, and lease-sql's store, table and migration types. A driver writes
//! `pub use lease_sql::exports::*;`, and the list lives here once.

pub use crate::{
    AfterCommit, BatchFailed, CheckAt, CommitMessage, Connect, ConnectWith, CountedOnConnection,
    Dialect, Execute, ExecuteOn, Layout, Migration, MigrationFile, OnConnection, PoolState,
    SchemaCheck, SnapshotIsolation, SqlStore, TableName, TransactionEnded,
};
pub use lease_core::{
    CallStats, ClientStats, Error, ErrorChain, Fence, FencedCheck, FencedChecks, Health, HolderId,
    Leader, LeaseClient, LeaseConfig, LeaseGuard, LeaseHandle, LeaseInfo, LeaseName, LeaseStore,
    LossReason, Losses, OnLoss, RunOptions, RunOutcome, Schedule, ScheduleStats, Scheduled,
    ShutdownReport, StoreErrorKind, Ttl, runtime,
};
