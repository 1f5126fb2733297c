//! [`TableName`]: a user-given table name, validated as plain identifiers.

use std::fmt;

use lease_core::Error;

/// The name of the lease table: `table` or `schema.table`, each part a plain identifier of at
/// most [`TableName::MAX_PART_LEN`] characters matching `[A-Za-z_][A-Za-z0-9_]*`.
///
/// Nothing else is accepted, so a table name can never carry SQL: every statement quotes the
/// validated parts (`"leases"` on PostgreSQL and SQLite, `` `leases` `` on MariaDB), which also
/// makes reserved words such as `order` usable and keeps the case as written.
///
/// ```
/// use lease_sql::TableName;
///
/// assert_eq!(TableName::new("jobs.leases")?.to_string(), "jobs.leases");
/// assert!(TableName::new("leases; DROP TABLE users").is_err());
/// # Ok::<(), lease_core::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TableName {
    schema: Option<String>,
    table: String,
}

impl TableName {
    /// The longest part (schema or table), in characters: PostgreSQL truncates identifiers
    /// beyond 63 bytes, MariaDB rejects them beyond 64.
    pub const MAX_PART_LEN: usize = 63;

    /// The table used unless another is configured.
    pub const DEFAULT: &'static str = "leases";

    /// Validates `name`: `table` or `schema.table`.
    ///
    /// # Errors
    /// [`Error::InvalidIdentifier`] when a part is empty, too long, starts with a digit or holds
    /// anything but ASCII letters, digits and `_`, or when there are more than two parts.
    pub fn new(name: &str) -> Result<Self, Error> {
        let invalid = |reason| Error::InvalidIdentifier {
            identifier: name.to_owned(),
            reason,
        };
        let mut parts = name.split('.');
        let first = parts.next().unwrap_or_default();
        let second = parts.next();
        if parts.next().is_some() {
            return Err(invalid(
                "at most one `.`, between schema and table, is allowed",
            ));
        }
        for part in std::iter::once(first).chain(second) {
            check_part(part).map_err(invalid)?;
        }
        Ok(match second {
            Some(table) => Self {
                schema: Some(first.to_owned()),
                table: table.to_owned(),
            },
            None => Self {
                schema: None,
                table: first.to_owned(),
            },
        })
    }

    /// The schema, when one was given.
    pub fn schema(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    /// The table, without its schema.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The name quoted for SQL with `quote` on both sides of each part. Safe because a validated
    /// part never contains a quote character.
    pub(crate) fn quoted(&self, quote: char) -> String {
        match &self.schema {
            Some(schema) => format!("{quote}{schema}{quote}.{quote}{}{quote}", self.table),
            None => format!("{quote}{}{quote}", self.table),
        }
    }
}

fn check_part(part: &str) -> Result<(), &'static str> {
    let mut chars = part.chars();
    match chars.next() {
        None => return Err("an empty identifier"),
        Some(c) if !(c.is_ascii_alphabetic() || c == '_') => {
            return Err("an identifier must start with an ASCII letter or `_`");
        }
        Some(_) => {}
    }
    if !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err("an identifier may hold only ASCII letters, digits and `_`");
    }
    if part.len() > TableName::MAX_PART_LEN {
        return Err("an identifier may be at most 63 characters long");
    }
    Ok(())
}

impl Default for TableName {
    fn default() -> Self {
        Self {
            schema: None,
            table: Self::DEFAULT.to_owned(),
        }
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.schema {
            Some(schema) => write!(f, "{schema}.{}", self.table),
            None => f.write_str(&self.table),
        }
    }
}

impl fmt::Debug for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.to_string(), f)
    }
}

impl TryFrom<&str> for TableName {
    type Error = Error;

    fn try_from(name: &str) -> Result<Self, Error> {
        Self::new(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_and_schema_qualified_identifiers() {
        for ok in ["leases", "_x", "Leases_2", "jobs.leases", &"a".repeat(63)] {
            assert_eq!(TableName::new(ok).unwrap().to_string(), ok);
        }
        let name = TableName::new("jobs.leases").unwrap();
        assert_eq!(name.schema(), Some("jobs"));
        assert_eq!(name.table(), "leases");
        assert_eq!(name.quoted('"'), "\"jobs\".\"leases\"");
        assert_eq!(TableName::default().quoted('`'), "`leases`");
    }

    #[test]
    fn rejects_anything_that_is_not_a_plain_identifier() {
        for bad in [
            "",
            ".",
            "a.",
            ".a",
            "a.b.c",
            "1leases",
            "lea ses",
            "leases;",
            "leases\"",
            "leases`",
            "le-ases",
            "lé",
            "leases; DROP TABLE users",
            "x\0",
            &"a".repeat(64),
        ] {
            match TableName::new(bad) {
                Err(Error::InvalidIdentifier { identifier, .. }) => assert_eq!(identifier, bad),
                other => panic!("{bad:?} gave {other:?}"),
            }
        }
    }
}
