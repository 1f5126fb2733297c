#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod error;
mod fence;
mod holder;
mod info;
mod memory;
mod name;
pub mod runtime;
mod store;
mod ttl;

pub use error::{BoxError, Error, LossReason, NameError, Operation};
pub use fence::Fence;
pub use holder::HolderId;
pub use info::LeaseInfo;
pub use memory::MemoryStore;
pub use name::LeaseName;
pub use runtime::Runtime;
pub use store::{DynLeaseStore, LeaseStore};
pub use ttl::Ttl;

pub use async_trait::async_trait;
