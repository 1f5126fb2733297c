//! [`Query`] and [`Param`]: one statement with its parameters, ready for a driver to run.

use std::borrow::Cow;

/// One parameter of a [`Query`], in the type the statement expects.
///
/// Every dialect binds the same two kinds, so a driver binds them the same way everywhere;
/// no statement takes an array (PostgreSQL's renew-many sends its lists as JSON text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Param<'a> {
    /// Text: a lease name, a holder id, or (PostgreSQL's renew-many) a JSON array of them
    /// (PostgreSQL `text`, MariaDB a string compared with the binary column, SQLite `TEXT`).
    Text(Cow<'a, str>),
    /// A 64-bit integer: a duration in microseconds.
    Int(i64),
}

impl<'a> Param<'a> {
    /// Borrowed text.
    pub fn text(text: &'a str) -> Self {
        Self::Text(Cow::Borrowed(text))
    }
}

/// A statement and its parameters in binding order: bind each [`Param`] in turn, then run
/// [`sql`](Query::sql).
///
/// The order is the placeholders' order for the dialect (`$1, $2, ...` on PostgreSQL, each `?`
/// in turn on MariaDB, `?1, ?2, ...` on SQLite), so a driver never needs to know which parameter
/// is which.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query<'a> {
    pub(crate) sql: Cow<'a, str>,
    pub(crate) params: Vec<Param<'a>>,
}

impl<'a> Query<'a> {
    /// A statement of your own: its text, with the dialect's placeholders, and its parameters
    /// in binding order. For running SQL other than the lease statements through an
    /// [`Execute`](crate::Execute), such as a test's or a tool's.
    pub fn new(sql: impl Into<Cow<'a, str>>, params: Vec<Param<'a>>) -> Self {
        Self {
            sql: sql.into(),
            params,
        }
    }

    /// The statement's text, with placeholders.
    pub fn sql(&self) -> &str {
        &self.sql
    }

    /// The parameters, in binding order.
    pub fn params(&self) -> &[Param<'a>] {
        &self.params
    }

    /// Whether the text is the same at every call of its statement, so that a driver may
    /// prepare it once per connection and keep it. The statements' own texts are; a renew-many
    /// for a batch smaller than the full one is written for its size (on MariaDB and SQLite), and
    /// so is a query made with [`new`](Query::new): kept prepared, each size would hold a
    /// prepared statement on the server for as long as the connection lives (MariaDB caps them
    /// server-wide, `max_prepared_stmt_count`).
    pub fn is_fixed(&self) -> bool {
        matches!(self.sql, Cow::Borrowed(_))
    }

    /// The statement's text and its parameters, to hand to a driver by value.
    pub fn into_parts(self) -> (Cow<'a, str>, Vec<Param<'a>>) {
        (self.sql, self.params)
    }
}

/// What [`Statements::renew_many`](crate::Statements::renew_many) answers with, which depends on
/// the dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenewManyResult {
    /// Rows of one integer, the position in the batch (from 0) of each lease the statement
    /// renewed (PostgreSQL: `WITH ORDINALITY` over the lists it was sent).
    Positions,
    /// Rows of `(name, holder)`, one for each lease the statement renewed (SQLite, whose
    /// `UPDATE ... FROM ... RETURNING` may name only the updated table's columns). Find their
    /// positions with [`positions_in_batch`](crate::positions_in_batch).
    Pairs,
    /// Only the number of leases the statement renewed (MariaDB, which has no `RETURNING` on
    /// `UPDATE`; the count is that of matched rows, as with the `CLIENT_FOUND_ROWS` flag that
    /// sqlx and diesel set). When it equals the number of pairs sent, all were renewed; when it
    /// is smaller, renew parts of the batch again to learn which (`SqlStore` halves it until
    /// each part is renewed whole or not at all): renewing a lease twice is harmless, and a
    /// lost one stays lost.
    Count,
}
