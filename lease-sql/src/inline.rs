//! Statements with their parameters written in as literals, for the simple query protocol:
//! PostgreSQL's (PgBouncer in transaction pooling mode, the fenced commit) and MariaDB's text
//! protocol (the fenced commit).
//!
//! Why this is safe on MariaDB: text becomes a hexadecimal literal, `X'...'`, of its UTF-8 bytes
//! (only hex digits between the quotes, whatever the SQL mode or character set), compared as
//! bytes with the `VARBINARY` columns; integers are written by Rust's formatter, in
//! parentheses; and the templates' only `?` are placeholders, replaced in a single pass.
//!
//! Why this is safe on PostgreSQL:
//! - Text becomes an escape string constant, `E'...'`, with every `'` doubled and every `\`
//!   doubled. Inside `E'...'` a backslash always starts an escape, whatever
//!   `standard_conforming_strings` says, so after doubling, the only way out of the constant is
//!   the closing quote we write. The text is UTF-8 (a Rust `str`) and the connection's
//!   `client_encoding` is UTF-8 (sqlx sets it at connect), where the bytes of `'` and `\` never
//!   occur inside a multi-byte character, so escaping character by character is exact.
//! - A NUL character cannot be sent in PostgreSQL text at all and is refused here (lease names
//!   never contain one).
//! - Integers are written by Rust's formatter: digits and at most a leading minus, in
//!   parentheses.
//! - The templates are this crate's own: the only `$` in them start placeholders (a validated
//!   table name holds no `$`), and the rendering is a single pass, so a `$1` inside a value is
//!   never looked at again.

use crate::{Param, Query};

/// Why a query could not be written with inline literals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InlineError(String);

impl std::fmt::Display for InlineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InlineError {}

/// `text` as a PostgreSQL escape string constant, `E'...'`.
///
/// # Errors
/// When `text` contains a NUL character, which PostgreSQL text cannot hold.
pub fn postgres_literal(text: &str) -> Result<String, InlineError> {
    if text.contains('\0') {
        return Err(InlineError(
            "PostgreSQL text cannot contain a NUL character".to_owned(),
        ));
    }
    let mut literal = String::with_capacity(text.len() + 3);
    literal.push_str("E'");
    for c in text.chars() {
        match c {
            '\'' => literal.push_str("''"),
            '\\' => literal.push_str("\\\\"),
            c => literal.push(c),
        }
    }
    literal.push('\'');
    Ok(literal)
}

/// `text` as a MariaDB hexadecimal literal of its UTF-8 bytes, `X'...'`: a binary string,
/// compared byte for byte with a `VARBINARY` column.
pub fn mysql_literal(text: &str) -> String {
    use std::fmt::Write;
    let mut literal = String::with_capacity(2 * text.len() + 3);
    literal.push_str("X'");
    for byte in text.bytes() {
        // Writing to a String cannot fail.
        let _ = write!(literal, "{byte:02X}");
    }
    literal.push('\'');
    literal
}

fn param_literal(param: &Param<'_>) -> Result<String, InlineError> {
    Ok(match param {
        Param::Text(text) => postgres_literal(text)?,
        Param::Int(int) => format!("({int})"),
    })
}

impl Query<'_> {
    /// The PostgreSQL statement with every `$n` replaced by its parameter as a literal: one
    /// self-contained text for the simple query protocol.
    ///
    /// # Errors
    /// When a text parameter contains a NUL character, or the statement names a parameter it
    /// was not given (never for this crate's statements).
    pub fn inline_postgres(&self) -> Result<String, InlineError> {
        let literals = self
            .params
            .iter()
            .map(param_literal)
            .collect::<Result<Vec<_>, _>>()?;
        let sql = self.sql.as_ref();
        let mut out =
            String::with_capacity(sql.len() + literals.iter().map(String::len).sum::<usize>());
        let mut rest = sql;
        while let Some(dollar) = rest.find('$') {
            out.push_str(&rest[..dollar]);
            let after = &rest[dollar + 1..];
            let digits = after.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                out.push('$');
                rest = after;
                continue;
            }
            let literal = after[..digits]
                .parse::<usize>()
                .ok()
                .and_then(|n| n.checked_sub(1))
                .and_then(|index| literals.get(index))
                .ok_or_else(|| {
                    InlineError(format!(
                        "the statement has no parameter ${}",
                        &after[..digits]
                    ))
                })?;
            out.push_str(literal);
            rest = &after[digits..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// The MariaDB statement with every `?` replaced by its parameter as a literal (text as
    /// [`mysql_literal`]): one self-contained text for the text protocol.
    ///
    /// # Errors
    /// When the statement has more placeholders than parameters (never for this crate's
    /// statements).
    pub fn inline_mysql(&self) -> Result<String, InlineError> {
        let sql = self.sql.as_ref();
        let mut out = String::with_capacity(sql.len() + 16 * self.params.len());
        let mut params = self.params.iter();
        let mut pieces = sql.split('?');
        if let Some(first) = pieces.next() {
            out.push_str(first);
        }
        for piece in pieces {
            match params.next() {
                Some(Param::Text(text)) => out.push_str(&mysql_literal(text)),
                Some(Param::Int(int)) => out.push_str(&format!("({int})")),
                None => {
                    return Err(InlineError(
                        "the statement has more placeholders than parameters".to_owned(),
                    ));
                }
            }
            out.push_str(piece);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    #[test]
    fn text_is_an_escape_string_with_quotes_and_backslashes_doubled() {
        assert_eq!(postgres_literal("plain").unwrap(), "E'plain'");
        assert_eq!(
            postgres_literal(r"it's \'; DROP TABLE x; --").unwrap(),
            r"E'it''s \\''; DROP TABLE x; --'"
        );
        assert_eq!(postgres_literal("🔒 é").unwrap(), "E'🔒 é'");
        assert!(postgres_literal("a\0b").is_err());
    }

    #[test]
    fn mysql_text_is_hex_of_its_bytes() {
        assert_eq!(mysql_literal("a'b"), "X'612762'");
        assert_eq!(mysql_literal(""), "X''");
        assert_eq!(mysql_literal("é\\"), "X'C3A95C'");
    }

    #[test]
    fn mysql_placeholders_are_replaced_in_order() {
        let query = Query {
            sql: Cow::Borrowed("SELECT ?, ?, ?"),
            params: vec![Param::text("?"), Param::Int(-7), Param::text("x")],
        };
        assert_eq!(query.inline_mysql().unwrap(), "SELECT X'3F', (-7), X'78'");
        let missing = Query {
            sql: Cow::Borrowed("SELECT ?, ?"),
            params: vec![Param::Int(1)],
        };
        assert!(missing.inline_mysql().is_err());
    }

    #[test]
    fn placeholders_are_replaced_in_one_pass() {
        let query = Query {
            sql: Cow::Borrowed("SELECT $1::text, $2::int8, $10, $1, '$'"),
            params: vec![
                Param::text("$2"),
                Param::Int(-5),
                Param::Int(0),
                Param::Int(0),
                Param::Int(0),
                Param::Int(0),
                Param::Int(0),
                Param::Int(0),
                Param::Int(0),
                Param::text("a'b"),
            ],
        };
        assert_eq!(
            query.inline_postgres().unwrap(),
            "SELECT E'$2'::text, (-5)::int8, E'a''b', E'$2', '$'"
        );
        let missing = Query {
            sql: Cow::Borrowed("SELECT $2"),
            params: vec![Param::Int(1)],
        };
        assert!(missing.inline_postgres().is_err());
    }
}
