//! [`Piece`]: a statement's text cut at its placeholders, for drivers that write placeholders
//! themselves.

use crate::Query;

/// Part of a statement's text: SQL to send as it is, or the place of a parameter.
///
/// diesel writes each placeholder itself as a value is bound (`$1, $2, ...` on PostgreSQL, `?`
/// elsewhere), so a driver built on it sends the SQL pieces and binds
/// [`Query::params`]`[index]` at each [`Param`](Piece::Param), in order. A parameter that the
/// text uses twice is bound twice. The text that runs differs from [`Query::sql`] only in how
/// its placeholders are numbered, and is the same for every call of a statement, so it can be
/// prepared once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece<'q> {
    /// SQL text without placeholders.
    Sql(&'q str),
    /// The parameter at this index of [`Query::params`].
    Param(usize),
}

impl Query<'_> {
    /// The text cut at its placeholders (see [`Piece::split`]).
    pub fn pieces(&self) -> Vec<Piece<'_>> {
        Piece::split(&self.sql)
    }
}

impl<'q> Piece<'q> {
    /// `sql` cut at its placeholders: `$n` (PostgreSQL) and `?n` (SQLite) name parameter
    /// `n - 1`; a bare `?` (MariaDB) the next one in turn. Quoted literals are passed over.
    pub fn split(sql: &'q str) -> Vec<Self> {
        pieces(sql)
    }
}

fn pieces(sql: &str) -> Vec<Piece<'_>> {
    let bytes = sql.as_bytes();
    let mut pieces = Vec::with_capacity(8);
    let (mut start, mut at, mut next) = (0, 0, 0);
    while at < bytes.len() {
        match bytes[at] {
            b'\'' => {
                // A literal ends at a quote that is not doubled.
                at += 1;
                while at < bytes.len() {
                    if bytes[at] == b'\'' {
                        if bytes.get(at + 1) == Some(&b'\'') {
                            at += 1;
                        } else {
                            break;
                        }
                    }
                    at += 1;
                }
                at += 1;
            }
            marker @ (b'$' | b'?') => {
                let digits = bytes[at + 1..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit())
                    .count();
                let index = if digits == 0 {
                    (marker == b'?').then(|| {
                        next += 1;
                        next - 1
                    })
                } else {
                    sql[at + 1..at + 1 + digits]
                        .parse::<usize>()
                        .ok()
                        .and_then(|n| n.checked_sub(1))
                };
                match index {
                    Some(index) => {
                        if start < at {
                            pieces.push(Piece::Sql(&sql[start..at]));
                        }
                        pieces.push(Piece::Param(index));
                        at += 1 + digits;
                        start = at;
                    }
                    None => at += 1,
                }
            }
            _ => at += 1,
        }
    }
    if start < bytes.len() {
        pieces.push(Piece::Sql(&sql[start..]));
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;
    use Piece::{Param, Sql};

    #[test]
    fn numbered_and_bare_placeholders_become_params_and_literals_are_passed_over() {
        assert_eq!(
            pieces("SELECT $1::text, $2 + $1, '$3 ?', 'it''s $4'"),
            [
                Sql("SELECT "),
                Param(0),
                Sql("::text, "),
                Param(1),
                Sql(" + "),
                Param(0),
                Sql(", '$3 ?', 'it''s $4'"),
            ]
        );
        assert_eq!(
            pieces("UPDATE t SET a = ? WHERE b = ? AND c = ?"),
            [
                Sql("UPDATE t SET a = "),
                Param(0),
                Sql(" WHERE b = "),
                Param(1),
                Sql(" AND c = "),
                Param(2),
            ]
        );
        assert_eq!(
            pieces("VALUES (?2, ?3) LIMIT ?1"),
            [
                Sql("VALUES ("),
                Param(1),
                Sql(", "),
                Param(2),
                Sql(") LIMIT "),
                Param(0),
            ]
        );
        assert_eq!(pieces("SELECT 1"), [Sql("SELECT 1")]);
    }
}
