#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod after_commit;
mod batch_failed;
mod commit_message;
mod database_error;
mod diagnoses;
mod dialect;
mod ended_probe;
mod error_kind;
mod execute;
pub mod exports;
mod fence_span;
mod fenced_begin;
mod fnv1a;
mod inline;
mod json;
mod migration;
mod mysql;
mod not_held;
mod pieces;
mod pool_state;
mod postgres;
mod prepared_fence;
mod query;
mod rows;
mod schema;
mod snapshot_isolation;
mod spoiled_connection;
mod sqlite;
mod statements;
mod store;
mod table;
mod template;
mod transaction_ended;

pub use after_commit::AfterCommit;
pub use batch_failed::BatchFailed;
pub use commit_message::CommitMessage;
pub use database_error::DatabaseError;
pub use diagnoses::Diagnoses;
pub use dialect::Dialect;
pub use ended_probe::EndedProbe;
pub use error_kind::{
    ends_session, mysql_ends_session, mysql_error_kind, mysql_error_kind_with_message,
    out_of_space, postgres_ends_session, postgres_error_ends_session, postgres_error_kind,
    rolled_back_first, sqlite_ends_session, sqlite_error_kind,
};
pub use execute::{Connect, ConnectWith, CountedOnConnection, Execute, ExecuteOn, OnConnection};
pub use fenced_begin::FencedBegin;
pub use inline::{InlineError, mysql_literal, postgres_literal};
pub use migration::{Layout, Migration, MigrationFile};
pub use not_held::{NOT_HELD_MARKER, is_not_held};
pub use pieces::Piece;
pub use pool_state::PoolState;
pub use postgres::listen as postgres_listen;
pub use prepared_fence::PreparedFence;
pub use query::{Param, Query, RenewManyResult};
pub use rows::{
    DistinctPairs, LeaseRow, MAX_MIN_HOLD, acquired, distinct_pairs, min_hold_micros,
    positions_in_batch, time_from_micros, ttl_micros,
};
pub use schema::SchemaCheck;
pub use snapshot_isolation::{
    SNAPSHOT_MARKER, SNAPSHOT_PREDATES_MARKER, SnapshotIsolation, snapshot_isolation,
    snapshot_refusal,
};
pub use spoiled_connection::spoiled_connection;
pub use sqlite::{SQLITE_BUSY_TIMEOUT, sqlite_pragmas};
pub use statements::Statements;
pub use store::{Attempt, CheckAt, FencedCommit, SqlStore};
pub use table::TableName;
pub use transaction_ended::{TRANSACTION_ENDED_MARKER, TransactionEnded, is_transaction_ended};
