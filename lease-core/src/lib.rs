#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod backoff;
mod client;
mod clock;
mod config;
mod error;
mod error_chain;
mod fence;
mod fenced_check;
mod guard;
mod handover;
mod health;
mod held;
mod holder;
mod info;
mod into_lease_name;
mod leader;
mod lease_label;
mod memory;
#[cfg(feature = "metrics")]
mod metrics;
mod name;
mod renewer;
pub mod runtime;
mod schedule;
mod shutdown;
mod signal;
mod stats;
mod store;
mod store_error_kind;
mod timed_store;
mod ttl;
mod work_under_term;

pub use client::{LeaseClient, LeaseClientBuilder, RunOptions, RunOutcome, ShutdownReport};
pub use config::{LeaseConfig, OnLoss};
pub use error::{BoxError, Error, LossReason, NameError, Operation};
pub use error_chain::ErrorChain;
pub use fence::Fence;
pub use fenced_check::FencedCheck;
pub use guard::{LeaseGuard, LeaseHandle};
pub use health::Health;
pub use holder::HolderId;
pub use info::LeaseInfo;
pub use into_lease_name::IntoLeaseName;
pub use leader::Leader;
pub use lease_label::LeaseLabel;
pub use memory::MemoryStore;
pub use name::LeaseName;
pub use runtime::Runtime;
pub use schedule::{Schedule, ScheduleStats, Scheduled};
pub use stats::{CallStats, ClientStats, FencedChecks, Losses};
pub use store::{DynLeaseStore, LeaseStore, MAX_MIN_HOLD, ReleaseEvents};
pub use store_error_kind::StoreErrorKind;
pub use ttl::Ttl;
pub use work_under_term::WorkUnderTerm;

pub use async_trait::async_trait;
