#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod counting;
pub mod incident;
pub mod notices;
pub mod quickstart;
pub mod service;

/// The workspace README and `docs/choices.md`, included so that every Rust example in them
/// compiles (and, unless marked `no_run`, runs) as a doctest of this crate. The Rust code of
/// `docs/implementing-a-store.md` is this crate's `counting` module and `counting_store` test,
/// word for word (its own test checks).
pub mod docs {
    #[doc = include_str!("../../README.md")]
    pub mod readme {}

    #[doc = include_str!("../../docs/choices.md")]
    pub mod choices {}
}
