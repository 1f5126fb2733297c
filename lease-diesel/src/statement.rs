//! [`Statement`]: one of lease-sql's queries as a diesel query that diesel prepares once per
//! connection, whose rows are read by position; and [`OwnedQuery`], the query with its parameters
//! owned, so that it can finish after its caller stopped waiting.
//!
//! The text is lease-sql's, cut at its placeholders: diesel writes each placeholder itself as a
//! value is bound (`$1, $2, ...` on PostgreSQL, `?` elsewhere), so the SQL that runs is
//! lease-sql's with its placeholders renumbered, the same text at every call. Unlike
//! `diesel::sql_query`, the statement does not declare itself unsafe to cache: diesel and
//! diesel-async then prepare it once per connection, keyed by that text, and later calls send
//! only its parameters. The exception is a text written for one call (a renew-many for a
//! partial batch, [`lease_sql::Query::is_fixed`]), which is not kept. lease-sql's inspect and list return computed columns that have no useful
//! name (PostgreSQL calls three of them `int8`), so the statement declares its row's SQL types
//! and diesel reads the columns by position, like a tuple.

use std::marker::PhantomData;

use diesel::QueryResult;
use diesel::backend::Backend;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::serialize::ToSql;
use diesel::sql_types::{BigInt, HasSqlType, Text, Untyped};
use lease_sql::{Param, Piece};

/// One parameter of a query, owned: [`lease_sql::Param`] without its borrow.
#[derive(Debug, Clone, PartialEq, Eq)]
enum OwnedParam {
    Text(String),
    Int(i64),
}

/// One of lease-sql's queries with its parameters owned, so that it can outlive the call that
/// made it (see `finish.rs`: a statement runs on when its caller stops waiting).
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedQuery {
    sql: String,
    params: Vec<OwnedParam>,
    /// Whether diesel may keep it prepared: only a text that is the same at every call
    /// ([`lease_sql::Query::is_fixed`]).
    fixed: bool,
}

impl OwnedQuery {
    /// A statement that takes no parameters, such as DDL.
    pub(crate) fn without_params(sql: &str) -> Self {
        Self {
            sql: sql.to_owned(),
            params: Vec::new(),
            fixed: false,
        }
    }

    /// The text, for a statement that takes no parameters.
    pub(crate) fn sql(&self) -> &str {
        &self.sql
    }
}

impl From<lease_sql::Query<'_>> for OwnedQuery {
    fn from(query: lease_sql::Query<'_>) -> Self {
        let fixed = query.is_fixed();
        let (sql, params) = query.into_parts();
        let params = params
            .into_iter()
            .map(|param| match param {
                Param::Text(text) => OwnedParam::Text(text.into_owned()),
                Param::Int(int) => OwnedParam::Int(int),
            })
            .collect();
        Self {
            sql: sql.into_owned(),
            params,
            fixed,
        }
    }
}

/// A statement of lease-sql, ready to run, whose rows have the SQL types `ST`.
#[must_use = "a statement runs only when it is loaded or executed"]
pub(crate) struct Statement<'q, ST> {
    query: &'q OwnedQuery,
    row: PhantomData<fn() -> ST>,
}

/// A try-acquire row: `(fence, won)`.
pub(crate) type AcquireRow = (BigInt, BigInt);
/// A renew-many row on PostgreSQL: the position of a renewed lease in its batch.
pub(crate) type PositionRow = (BigInt,);
/// A renew-many row on SQLite: `(name, holder)` of a renewed lease.
pub(crate) type PairRow = (Text, Text);
/// An inspect or list row: `(name, holder, fence, taken_at, expires_at, observed_at)`.
pub(crate) type LeaseRow = (Text, Text, BigInt, BigInt, BigInt, BigInt);
/// A statement run for its affected-rows count.
pub(crate) type Execute<'q> = Statement<'q, Untyped>;

impl<'q, ST> Statement<'q, ST> {
    pub(crate) fn new(query: &'q OwnedQuery) -> Self {
        Self {
            query,
            row: PhantomData,
        }
    }
}

impl<DB, ST> QueryFragment<DB> for Statement<'_, ST>
where
    DB: Backend + HasSqlType<Text> + HasSqlType<BigInt>,
    str: ToSql<Text, DB>,
    i64: ToSql<BigInt, DB>,
{
    fn walk_ast<'b>(&'b self, mut pass: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        if !self.query.fixed {
            // Written for this call (a renew-many for one batch size): kept prepared, every
            // size would hold a statement on the server for the connection's life.
            pass.unsafe_to_cache_prepared();
        }
        for piece in Piece::split(&self.query.sql) {
            match piece {
                Piece::Sql(sql) => pass.push_sql(sql),
                Piece::Param(index) => match self.query.params.get(index) {
                    Some(OwnedParam::Text(text)) => pass.push_bind_param::<Text, str>(text)?,
                    Some(OwnedParam::Int(int)) => pass.push_bind_param::<BigInt, i64>(int)?,
                    None => {
                        return Err(diesel::result::Error::QueryBuilderError(
                            format!("the statement has no parameter {}", index + 1).into(),
                        ));
                    }
                },
            }
        }
        Ok(())
    }
}

/// No static id: the statement cache keys it by its text, which is fixed for each statement.
impl<ST> QueryId for Statement<'_, ST> {
    type QueryId = ();

    const HAS_STATIC_QUERY_ID: bool = false;
}

/// Rows of `ST`, read by position. A statement that only reports a count is `Untyped`.
impl<ST: 'static> Query for Statement<'_, ST> {
    type SqlType = ST;
}

#[cfg(all(test, feature = "mysql"))]
mod tests {
    use super::*;
    use diesel::query_builder::QueryFragment;
    use lease_core::Ttl;
    use lease_sql::{Dialect, Statements, TableName};

    /// Whether diesel may keep `query` prepared, as MariaDB's backend asks it.
    fn cached(query: lease_sql::Query<'_>) -> bool {
        let owned = OwnedQuery::from(query);
        Execute::new(&owned)
            .is_safe_to_cache_prepared(&diesel::mysql::Mysql)
            .unwrap()
    }

    #[test]
    fn only_texts_fixed_for_every_call_are_kept_prepared() {
        let statements = Statements::new(Dialect::MySql, &TableName::default());
        let ttl = Ttl::from_secs(60).unwrap();
        let full: Vec<(String, String)> = (0..Dialect::MySql.renew_many_batch())
            .map(|i| (format!("lease-{i}"), format!("holder-{i}")))
            .collect();
        let full: Vec<(&str, &str)> = full.iter().map(|(n, h)| (n.as_str(), h.as_str())).collect();
        assert!(cached(statements.renew_many(&full, ttl)), "a full batch");
        assert!(
            !cached(statements.renew_many(&full[..3], ttl)),
            "a batch of three, written for its size"
        );
        let name = lease_core::LeaseName::new("sweep").unwrap();
        assert!(
            cached(statements.inspect(&name)),
            "the statements' own texts"
        );
    }
}
