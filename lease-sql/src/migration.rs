//! [`Migration`]: the lease table as a migration, up and down, in the layouts of `sqlx migrate`
//! and diesel's migrations.

use std::fmt;

use crate::fnv1a::fnv1a;
use crate::{Dialect, Statements, TableName};

/// Where a migration tool looks for a migration's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Layout {
    /// `sqlx migrate` (and `sqlx::migrate!`, `sqlx::migrate::Migrator`): a reversible migration
    /// as `<version>_<description>.up.sql` and `.down.sql` in the migrations directory.
    Sqlx,
    /// diesel's migrations (`diesel migration run`, `diesel_migrations`): a directory
    /// `<version>_<name>/` holding `up.sql` and `down.sql`.
    Diesel,
}

impl Layout {
    /// Every layout.
    pub const ALL: [Layout; 2] = [Layout::Sqlx, Layout::Diesel];
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Sqlx => "sqlx",
            Self::Diesel => "diesel",
        })
    }
}

/// One file of a migration: its path inside the migrations directory, and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationFile {
    /// The path relative to the migrations directory, with `/` between its parts.
    pub path: String,
    /// The SQL.
    pub contents: String,
}

/// The lease table of one dialect and validated name, as a migration: `up` creates it exactly
/// as [`SqlStore::setup`](crate::SqlStore::setup) would, `down` drops it.
///
/// For applications whose schema changes go through `sqlx migrate` or diesel's migrations
/// rather than start-up: write [`files`](Migration::files) into the migrations directory (or
/// print them with `leasectl migrations`), run the tool, and call
/// [`SqlStore::verify`](crate::SqlStore::verify) at start instead of `setup`.
///
/// ```
/// use lease_sql::{Dialect, Layout, Migration, TableName};
///
/// let migration = Migration::new(Dialect::Postgres, &TableName::new("jobs.leases")?);
/// assert!(migration.up().starts_with("-- "));
/// assert!(migration.up().contains("CREATE TABLE \"jobs\".\"leases\""));
/// assert_eq!(migration.down(), "DROP TABLE \"jobs\".\"leases\";\n");
/// let files = migration.files(Layout::Diesel);
/// assert_eq!(files[0].path, "2026-12-01-975082_create_jobs_leases/up.sql");
/// assert_eq!(files[1].path, "2026-12-01-975082_create_jobs_leases/down.sql");
/// let files = migration.files(Layout::Sqlx);
/// assert_eq!(files[0].path, "20261201975082_create_jobs_leases.up.sql");
/// # Ok::<(), lease_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Migration {
    name: String,
    /// The six digits of the version that follow its date.
    serial: u64,
    up: String,
    down: String,
}

impl Migration {
    /// The date every version begins with, the six digits after it coming from the table's name
    /// (see [`version`](Migration::version)).
    const DATE: (u32, u32, u32) = (2026, 12, 1);

    /// The migration of `table` on `dialect`.
    pub fn new(dialect: Dialect, table: &TableName) -> Self {
        let statements = Statements::new(dialect, table);
        // A migration runs once, so it creates the table outright: on a table that exists
        // already, it fails instead of leaving a table of another shape in place.
        let create =
            statements
                .create_table()
                .replacen("CREATE TABLE IF NOT EXISTS", "CREATE TABLE", 1);
        let database = match dialect {
            Dialect::Postgres => "PostgreSQL",
            Dialect::MySql => "MariaDB",
            Dialect::Sqlite => "SQLite",
        };
        let up = format!(
            "-- The lease table {table} ({database}), as lease-sql's SqlStore::setup creates it.\n\
             -- Give the store the same table name, and call SqlStore::verify at start.\n\
             {create};\n"
        );
        let down = format!("DROP TABLE {};\n", table.quoted(dialect.quote()));
        Self {
            name: format!("create_{}", table.to_string().replace('.', "_")),
            serial: fnv1a(&table.to_string()) % 1_000_000,
            up,
            down,
        }
    }

    /// The migration's version in `layout`: the date and six digits of a hash of the table's
    /// name, `20261201142942` in sqlx's layout and `2026-12-01-142942` in diesel's for
    /// `leases`. The same at every run for the same table, so that a tool that applied the
    /// files once never applies them again; another for another table, so that two lease
    /// tables' migrations do not claim one version (which sqlx and diesel key their records
    /// by), but for one pair of names in a million.
    pub fn version(&self, layout: Layout) -> String {
        let (year, month, day) = Self::DATE;
        let serial = self.serial;
        match layout {
            Layout::Sqlx => format!("{year}{month:02}{day:02}{serial:06}"),
            Layout::Diesel => format!("{year}-{month:02}-{day:02}-{serial:06}"),
        }
    }

    /// The SQL that creates the table.
    pub fn up(&self) -> &str {
        &self.up
    }

    /// The SQL that drops it.
    pub fn down(&self) -> &str {
        &self.down
    }

    /// The migration's name without its version: `create_<table>`, with `_` for a schema's
    /// `.`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The files of the migration in `layout`: up first, then down.
    pub fn files(&self, layout: Layout) -> Vec<MigrationFile> {
        let stem = format!("{}_{}", self.version(layout), self.name);
        let (up, down) = match layout {
            Layout::Sqlx => (format!("{stem}.up.sql"), format!("{stem}.down.sql")),
            Layout::Diesel => (format!("{stem}/up.sql"), format!("{stem}/down.sql")),
        };
        vec![
            MigrationFile {
                path: up,
                contents: self.up.clone(),
            },
            MigrationFile {
                path: down,
                contents: self.down.clone(),
            },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn up_is_the_stores_ddl_without_if_not_exists_on_every_dialect() {
        for dialect in [Dialect::Postgres, Dialect::MySql, Dialect::Sqlite] {
            let table = TableName::new("Order").unwrap();
            let migration = Migration::new(dialect, &table);
            let ddl =
                Statements::new(dialect, &table)
                    .create_table()
                    .replacen(" IF NOT EXISTS", "", 1);
            assert!(
                migration.up().ends_with(&format!("{ddl};\n")),
                "{dialect:?}"
            );
            assert!(!migration.up().contains("IF NOT EXISTS"), "{dialect:?}");
            assert!(migration.down().starts_with("DROP TABLE "), "{dialect:?}");
            for layout in Layout::ALL {
                let files = migration.files(layout);
                assert_eq!(files.len(), 2);
                assert!(files[0].path.contains("create_Order"), "{layout}");
                assert_eq!(files[0].contents, migration.up());
                assert_eq!(files[1].contents, migration.down());
            }
        }
        let my = Migration::new(Dialect::MySql, &TableName::new("jobs.leases").unwrap());
        assert_eq!(my.down(), "DROP TABLE `jobs`.`leases`;\n");
    }

    #[test]
    fn each_table_has_a_version_of_its_own_the_same_at_every_run() {
        let version = |table: &str, layout| {
            Migration::new(Dialect::Postgres, &TableName::new(table).unwrap()).version(layout)
        };
        for layout in Layout::ALL {
            assert_eq!(version("leases", layout), version("leases", layout));
            assert_ne!(version("leases", layout), version("mail_leases", layout));
            assert_ne!(version("jobs.leases", layout), version("leases", layout));
        }
        let sqlx = version("leases", Layout::Sqlx);
        assert_eq!(sqlx, "20261201142942");
        assert_eq!(sqlx.len(), 14, "{sqlx}");
        assert!(sqlx.starts_with("20261201"), "{sqlx}");
        assert!(sqlx.bytes().all(|b| b.is_ascii_digit()), "{sqlx}");
        let diesel = version("leases", Layout::Diesel);
        assert_eq!(diesel, format!("2026-12-01-{}", &sqlx[8..]));
        // The dialect does not change it: the files are the table's.
        assert_eq!(
            Migration::new(Dialect::Sqlite, &TableName::new("leases").unwrap())
                .version(Layout::Sqlx),
            sqlx
        );
    }
}
