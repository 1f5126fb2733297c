//! Table names a store must refuse before it makes a single statement: whatever the driver, a
//! store's constructor validates its table name through lease-sql's `TableName`.

use std::fmt;

use lease_core::Error;

/// Names that are not `table` or `schema.table` of plain identifiers: empty, SQL after the
/// name, quotes of either kind, three parts, a leading digit, a comment, a non-ASCII letter,
/// and one of 64 characters (one more than PostgreSQL keeps).
pub fn invalid_table_names() -> Vec<String> {
    [
        "",
        "leases; DROP TABLE users",
        "lea\"ses",
        "lea`ses",
        "a.b.c",
        "1leases",
        "leases--",
        "läses",
    ]
    .into_iter()
    .map(str::to_owned)
    .chain(std::iter::once("x".repeat(64)))
    .collect()
}

/// Asserts that `with_table` (a store's constructor on a pool that must not be touched) answers
/// [`Error::InvalidIdentifier`] naming each of [`invalid_table_names`], and accepts
/// `main.Leases_2`, which it answers.
///
/// # Panics
/// When a name is accepted, or refused with another error.
pub fn assert_invalid_table_names_refused<S: fmt::Debug>(
    with_table: impl Fn(&str) -> Result<S, Error>,
) -> S {
    for bad in invalid_table_names() {
        match with_table(&bad) {
            Err(Error::InvalidIdentifier { identifier, .. }) => assert_eq!(identifier, bad),
            other => panic!("{bad:?} gave {other:?}"),
        }
    }
    with_table("main.Leases_2").expect("main.Leases_2 is a valid table name")
}
