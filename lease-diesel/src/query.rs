//! [`Statement`]: one of lease-sql's queries as a diesel query whose rows are read by position,
//! and [`OwnedQuery`], the query with its parameters owned, so it can run on a task of its own.
//!
//! The text goes through `diesel::sql_query` unchanged, with each parameter bound in order, so
//! the SQL that runs is exactly lease-sql's. `sql_query` reads rows by column name
//! (`QueryableByName`), but lease-sql's inspect and list return computed columns that have no
//! useful name (PostgreSQL calls three of them `int8`), so the query is wrapped in a type that
//! declares the row's SQL types and lets diesel read the columns by position, like a tuple.

use std::marker::PhantomData;

use diesel::QueryResult;
use diesel::backend::{Backend, DieselReserveSpecialization};
use diesel::query_builder::{AstPass, BoxedSqlQuery, Query, QueryFragment, QueryId, SqlQuery};
use diesel::sql_types::{BigInt, Text, Untyped};

/// One parameter of a query, owned: [`lease_sql::Param`] without its borrow.
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bind {
    /// Text: a lease name or a holder id.
    Text(String),
    /// A duration in microseconds.
    Int(i64),
    /// An array of text (PostgreSQL's renew-many).
    TextArray(Vec<String>),
}

/// One of lease-sql's queries with its parameters owned, so it can outlive the call that made
/// it (see `run.rs`: a statement runs to its end even when its caller stops waiting).
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedQuery {
    sql: String,
    binds: Vec<Bind>,
}

impl OwnedQuery {
    /// A statement that takes no parameters, such as DDL.
    pub(crate) fn without_params(sql: &str) -> Self {
        Self {
            sql: sql.to_owned(),
            binds: Vec::new(),
        }
    }

    /// The text, for a statement that takes no parameters.
    pub(crate) fn into_sql(self) -> String {
        self.sql
    }
}

impl From<lease_sql::Query<'_>> for OwnedQuery {
    fn from(query: lease_sql::Query<'_>) -> Self {
        let (sql, params) = query.into_parts();
        let binds = params
            .into_iter()
            .map(|param| match param {
                lease_sql::Param::Text(text) => Bind::Text(text.to_owned()),
                lease_sql::Param::Int(int) => Bind::Int(int),
                lease_sql::Param::TextArray(items) => {
                    Bind::TextArray(items.into_iter().map(str::to_owned).collect())
                }
            })
            .collect();
        Self {
            sql: sql.into_owned(),
            binds,
        }
    }
}

/// A statement of lease-sql, bound and ready to run, whose rows have the SQL types `ST`.
#[must_use = "a statement runs only when it is loaded or executed"]
pub(crate) struct Statement<'q, DB: Backend, ST> {
    query: BoxedSqlQuery<'q, DB, SqlQuery>,
    row: PhantomData<fn() -> ST>,
}

/// A try-acquire row: `(fence, won)`.
pub(crate) type AcquireRow = (BigInt, BigInt);
/// A renew-many row: `(name, holder)` of a renewed lease.
pub(crate) type PairRow = (Text, Text);
/// An inspect or list row: `(name, holder, fence, taken_at, expires_at, observed_at)`.
pub(crate) type LeaseRow = (Text, Text, BigInt, BigInt, BigInt, BigInt);

impl<'q, DB, ST> Statement<'q, DB, ST>
where
    DB: Backend + DieselReserveSpecialization,
{
    /// `query` with its parameters bound by `bind`, which knows the database's types.
    pub(crate) fn new(
        query: OwnedQuery,
        bind: impl Fn(BoxedSqlQuery<'q, DB, SqlQuery>, Bind) -> BoxedSqlQuery<'q, DB, SqlQuery>,
    ) -> Self {
        let query = query
            .binds
            .into_iter()
            .fold(diesel::sql_query(query.sql).into_boxed(), bind);
        Self {
            query,
            row: PhantomData,
        }
    }
}

impl<DB, ST> QueryFragment<DB> for Statement<'_, DB, ST>
where
    DB: Backend + DieselReserveSpecialization,
{
    fn walk_ast<'b>(&'b self, pass: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        self.query.walk_ast(pass)
    }
}

/// No static id: the text is only known at run time.
impl<DB: Backend, ST> QueryId for Statement<'_, DB, ST> {
    type QueryId = ();

    const HAS_STATIC_QUERY_ID: bool = false;
}

/// Rows of `ST`, read by position. A statement that only reports a count is `Untyped`.
impl<DB: Backend, ST: 'static> Query for Statement<'_, DB, ST> {
    type SqlType = ST;
}

/// A statement run for its affected-rows count.
pub(crate) type Execute<'q, DB> = Statement<'q, DB, Untyped>;
