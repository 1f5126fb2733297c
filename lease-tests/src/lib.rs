#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod adoption;
mod capability;
pub mod cases;
pub mod classified;
mod context;
pub mod env;
mod erased;
mod failure;
mod fenced;
mod harness;
pub mod history;
pub mod lost_answer;
mod memory;
pub mod no_connection;
#[cfg(feature = "runtime-tokio")]
pub mod plans;
pub mod prepared_fence;
pub mod proxy;
pub mod read_only;
pub mod renewal_in_flight;
pub mod run;
pub mod server;
pub mod spans;
mod suite;
pub mod table_names;

pub use capability::Capability;
pub use context::{Context, SharedRuntime};
pub use erased::DynBackend;
pub use failure::{CaseFailure, CaseResult, Verdict};
pub use fenced::{FencedStore, FencedWrites};
pub use harness::{FreshStore, PooledStore, TestBackend};
pub use lease_sql::PoolState;
pub use memory::MemoryBackend;
