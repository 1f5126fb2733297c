//! [`Dialect`]: which database a statement is written for.

use crate::RenewManyResult;

/// A database family, each with its own SQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Dialect {
    /// PostgreSQL 14 or later: `$1, $2, ...` placeholders.
    Postgres,
    /// MariaDB 10.5 or later: `?` placeholders, one per parameter in order. MySQL does not
    /// work (no `INSERT ... RETURNING`).
    MySql,
    /// SQLite 3.42 or later: `?1, ?2, ...` placeholders, bound by position.
    Sqlite,
}

impl Dialect {
    /// The character that quotes an identifier.
    pub(crate) fn quote(self) -> char {
        match self {
            Self::Postgres | Self::Sqlite => '"',
            Self::MySql => '`',
        }
    }

    /// The most pairs one renew-many statement carries. PostgreSQL sends them as two arrays
    /// whatever their number; the bound there only caps how many row locks one statement takes.
    /// MariaDB and SQLite need two placeholders per pair, well under their limits (65,535 and
    /// 32,766).
    pub fn renew_many_batch(self) -> usize {
        match self {
            Self::Postgres => 10_000,
            Self::MySql | Self::Sqlite => 500,
        }
    }

    /// What a renew-many statement answers with.
    pub fn renew_many_result(self) -> RenewManyResult {
        match self {
            Self::Postgres | Self::Sqlite => RenewManyResult::Rows,
            Self::MySql => RenewManyResult::Count,
        }
    }
}
