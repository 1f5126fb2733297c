//! MariaDB: the conformance suite and this crate's cases on tokio and async-std.
#![cfg(feature = "mysql")]

mod common;

use common::Backend;
use lease_sqlx::sqlx::MySql;

fn mariadb() -> Backend<MySql> {
    Backend::plain()
}

lease_tests::conformance_suite!(mod conformance_tokio, runtime = tokio, backend = mariadb());
lease_tests::conformance_suite!(mod conformance_async_std, runtime = async_std, backend = mariadb());

focused_suite!(mod focused_tokio, runtime = tokio, backend = mariadb());
focused_suite!(mod focused_async_std, runtime = async_std, backend = mariadb());
