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

    /// The most pairs one renew-many statement can carry: a limit of the dialect, not a setting.
    /// How many leases a call carries is the client's one batch setting
    /// (`LeaseConfig::renew_batch`, 1,000 by default), which stays under every dialect's limit,
    /// so each call is one statement; a store splits only a larger call made directly.
    ///
    /// PostgreSQL sends the pairs as two JSON texts whatever their number; the bound there only
    /// caps how many row locks one statement takes. MariaDB and SQLite need two placeholders per
    /// pair: 1,000 pairs are 2,000 placeholders, well under their limits of 65,535 and 32,766
    /// (10,000 held leases are renewed in 10 statements a period).
    pub fn renew_many_batch(self) -> usize {
        match self {
            Self::Postgres => 10_000,
            Self::MySql | Self::Sqlite => 1_000,
        }
    }

    /// What a renew-many statement answers with.
    pub fn renew_many_result(self) -> RenewManyResult {
        match self {
            Self::Postgres => RenewManyResult::Positions,
            Self::Sqlite => RenewManyResult::Pairs,
            Self::MySql => RenewManyResult::Count,
        }
    }
}
