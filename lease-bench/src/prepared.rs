//! [`Prepared`]: one of lease-sql's queries as a diesel query that diesel prepares once per
//! connection, as a user who writes a query fragment (not `diesel::sql_query`, which declares
//! itself unsafe to cache and is prepared anew at every call) would send it. The bare baseline
//! for diesel that prepares its statements as the library does.

use std::marker::PhantomData;

use diesel::QueryResult;
use diesel::backend::Backend;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::serialize::ToSql;
use diesel::sql_types::{BigInt, HasSqlType, Text};
use lease_sql::{Param, Piece};

/// lease-sql's text, its placeholders written by diesel as each parameter is bound, with rows of
/// the SQL types `ST` read by position.
pub struct Prepared<'q, ST> {
    sql: &'q str,
    params: &'q [Param<'q>],
    row: PhantomData<fn() -> ST>,
}

impl<'q, ST> Prepared<'q, ST> {
    /// `sql` with `params` bound in order.
    pub fn new(sql: &'q str, params: &'q [Param<'q>]) -> Self {
        Self {
            sql,
            params,
            row: PhantomData,
        }
    }
}

impl<DB, ST> QueryFragment<DB> for Prepared<'_, ST>
where
    DB: Backend + HasSqlType<Text> + HasSqlType<BigInt>,
    str: ToSql<Text, DB>,
    i64: ToSql<BigInt, DB>,
{
    fn walk_ast<'b>(&'b self, mut pass: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        for piece in Piece::split(self.sql) {
            match piece {
                Piece::Sql(sql) => pass.push_sql(sql),
                Piece::Param(index) => match self.params.get(index) {
                    Some(Param::Text(text)) => pass.push_bind_param::<Text, str>(text)?,
                    Some(Param::Int(int)) => pass.push_bind_param::<BigInt, i64>(int)?,
                    None => {
                        return Err(diesel::result::Error::QueryBuilderError(
                            format!("no parameter {}", index + 1).into(),
                        ));
                    }
                },
            }
        }
        Ok(())
    }
}

/// No static id: the statement cache keys it by its text.
impl<ST> QueryId for Prepared<'_, ST> {
    type QueryId = ();

    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<ST: 'static> Query for Prepared<'_, ST> {
    type SqlType = ST;
}
