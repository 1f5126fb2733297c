//! Runnable examples of `lease`; see the README. Not published: the library crates are
//! `lease-core`, `lease-sqlx` and the others of the workspace.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod incident;
pub mod quickstart;
