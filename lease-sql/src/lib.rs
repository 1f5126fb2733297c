#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod dialect;
mod execute;
mod inline;
mod mysql;
mod postgres;
mod query;
mod rows;
mod sqlite;
mod statements;
mod table;
mod template;

pub use dialect::Dialect;
pub use execute::{Execute, SqlLeases};
pub use inline::{InlineError, postgres_literal};
pub use query::{Param, Query, RenewManyResult};
pub use rows::{
    LeaseRow, MAX_MIN_HOLD, acquired, distinct_pairs, min_hold_micros, renewed_in_order,
    time_from_micros, ttl_micros,
};
pub use statements::Statements;
pub use table::TableName;
