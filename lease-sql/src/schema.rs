//! [`SchemaCheck`]: whether an existing table has the columns, types and key a lease store
//! needs, and the SQL that upgrades an earlier shape of a lease table.
//!
//! The catalog query of each dialect (in `schema/<dialect>.rs`) answers one row per column:
//! its name and its facts as `type;nullable;default;key` (`nullable` is `YES` or `NO`,
//! `default` and `key` are `1` or `0`: the column has a default, or it alone is a unique key),
//! and on MariaDB a fifth part for a character column, its character set (`;latin1`).
//! Column names are matched as the database matches them: exactly on PostgreSQL (a quoted
//! `"NAME"` is another column than `name`), regardless of ASCII case on MariaDB and SQLite.
//! This file reads those rows and decides, the same way for every dialect: each of the store's
//! five columns fits, can be upgraded in place (a [`Fix`]), or cannot (the table is not a lease
//! table); an extra column the store's inserts would leave empty must accept that. A name or
//! holder declared shorter than the store writes them is widened (PostgreSQL's `varchar(n)`,
//! MariaDB's `VARBINARY(n)`; SQLite ignores lengths). On SQLite, whose times are integers of no
//! declared unit, a second statement counts the times that look like seconds
//! ([`SchemaCheck::times_in_other_units`]), which are made milliseconds.

use std::borrow::Cow;

use lease_core::{Error, HolderId, LeaseName};

use crate::{Dialect, Param, Query, TableName};

pub(crate) mod lock_wait;
mod mysql;
mod postgres;
mod sqlite;

/// The longest lease name, in bytes: what a `name` column must take
/// ([`LeaseName::MAX_LEN`]; MariaDB's `VARBINARY(255)`).
const NAME_LENGTH: u64 = LeaseName::MAX_LEN as u64;

/// What a `holder` column must take, in bytes: the longest holder the store writes
/// ([`HolderId::MAX_LEN`]: `host:pid:random`, a host name of up to 255 bytes, a process id of
/// up to 10 digits and 16 hexadecimal digits). A column that cuts it would fail every
/// acquisition (PostgreSQL, MariaDB in strict mode) or, truncated in silence, make two holders
/// of one host and process one. A shorter column is widened to the store's own
/// (`VARBINARY(1024)` on MariaDB, `text` on PostgreSQL).
const HOLDER_LENGTH: u64 = HolderId::MAX_LEN as u64;

/// A change that brings an earlier lease table to the store's shape, keeping its rows; the SQL
/// makes them in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Fix {
    /// Add `fence`, `0` for every row: the next acquisition of a lease counts from there.
    AddFence,
    /// Widen `fence` to a 64-bit integer.
    WidenFence,
    /// Make `fence` `NOT NULL`, setting `NULL`s to `0`.
    FenceNotNull,
    /// Let `holder` be `NULL`: a released lease has none.
    HolderNullable,
    /// Make `taken_at` `NOT NULL`, setting `NULL`s to the database's time.
    TakenAtNotNull,
    /// Make `expires_at` `NOT NULL`, setting `NULL`s to the database's time: a lease without an
    /// expiry is free from the upgrade on.
    ExpiresAtNotNull,
    /// Convert the text of `name` to UTF-8 before it becomes bytes (MariaDB: a column of
    /// another character set, such as `latin1`, whose bytes are not the UTF-8 the store sends).
    Utf8Name,
    /// Convert the text of `holder` to UTF-8 before it becomes bytes (MariaDB).
    Utf8Holder,
    /// Make `name` compare byte for byte (MariaDB: `VARBINARY`; PostgreSQL: `text COLLATE "C"`
    /// in place of a nondeterministic collation; SQLite: the table rebuilt with a binary key).
    BinaryName,
    /// Make `holder` compare byte for byte (MariaDB: `VARBINARY`; PostgreSQL: `text` in the
    /// database's default collation, which is deterministic, in place of a nondeterministic
    /// one).
    BinaryHolder,
    /// Store `taken_at` to the microsecond (MariaDB: `DATETIME(6)`; PostgreSQL: `timestamptz`
    /// without a coarser precision).
    PreciseTakenAt,
    /// Store `expires_at` to the microsecond (MariaDB: `DATETIME(6)`; PostgreSQL: `timestamptz`
    /// without a coarser precision).
    PreciseExpiresAt,
    /// Store `taken_at` as a UTC `DATETIME(6)` instead of a `TIMESTAMP` (MariaDB).
    UtcTakenAt,
    /// Store `expires_at` as a UTC `DATETIME(6)` instead of a `TIMESTAMP` (MariaDB).
    UtcExpiresAt,
    /// Let `name` take the longest lease name (PostgreSQL: `text`; MariaDB:
    /// `VARBINARY(255)`).
    WidenName,
    /// Let `holder` take the store's holders (PostgreSQL: `text`; MariaDB: `VARBINARY(1024)`).
    WidenHolder,
    /// Make times stored in Unix seconds milliseconds (SQLite), row by row.
    MillisecondTimes,
    /// Drop `ON UPDATE CURRENT_TIMESTAMP` from `taken_at` (MariaDB).
    NoOnUpdateTakenAt,
    /// Drop `ON UPDATE CURRENT_TIMESTAMP` from `expires_at` (MariaDB).
    NoOnUpdateExpiresAt,
}

/// One of the store's columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Column {
    Name,
    Holder,
    Fence,
    TakenAt,
    ExpiresAt,
}

impl Column {
    const ALL: [Column; 5] = [
        Column::Name,
        Column::Holder,
        Column::Fence,
        Column::TakenAt,
        Column::ExpiresAt,
    ];

    fn as_str(self) -> &'static str {
        match self {
            Column::Name => "name",
            Column::Holder => "holder",
            Column::Fence => "fence",
            Column::TakenAt => "taken_at",
            Column::ExpiresAt => "expires_at",
        }
    }

    /// The length the column must take, and the fix that widens a shorter one: names and
    /// holders only.
    fn needed_length(self) -> Option<(u64, Fix)> {
        match self {
            Column::Name => Some((NAME_LENGTH, Fix::WidenName)),
            Column::Holder => Some((HOLDER_LENGTH, Fix::WidenHolder)),
            Column::Fence | Column::TakenAt | Column::ExpiresAt => None,
        }
    }
}

/// A declared type and its length: `varbinary(36)` is `("varbinary", Some(36))`, `text` is
/// `("text", None)`.
fn declared_length(data_type: &str) -> (&str, Option<u64>) {
    if let Some(inner) = data_type.strip_suffix(')')
        && let Some((base, length)) = inner.rsplit_once('(')
        && let Ok(length) = length.parse()
    {
        return (base, Some(length));
    }
    (data_type, None)
}

/// What a dialect says of a column's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fit {
    /// The store works with it.
    Fits,
    /// It is an earlier lease table's: this fix upgrades it.
    Upgrade(Fix),
    /// It is another kind of column; the store needs this type.
    Wrong(&'static str),
}

/// What the catalog says of one column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Facts {
    /// The type as the catalog names it, lower case (`bigint`, `datetime(6)`, `text`).
    pub(crate) data_type: String,
    pub(crate) nullable: bool,
    pub(crate) has_default: bool,
    /// The column alone is the primary key or a unique key.
    pub(crate) key: bool,
    /// The character set of a character column, lower case, where the catalog names it
    /// (MariaDB: `latin1`, `utf8mb4`).
    pub(crate) charset: Option<String>,
    /// How the table keeps its rows, lower case, the same in every column's facts, where the
    /// catalog says it: MariaDB's storage engine (`innodb`, `myisam`), PostgreSQL's persistence
    /// (`permanent`, `unlogged`, `temporary`).
    pub(crate) storage: Option<String>,
    /// The column's collation where it is nondeterministic (PostgreSQL: an ICU collation
    /// created with `deterministic = false`, which may call two texts of other bytes equal), as
    /// the catalog spells it.
    pub(crate) nondeterministic: Option<String>,
    /// A unique index on the column alone that compares by a nondeterministic collation other
    /// than the column's (PostgreSQL): `index collate collation`, as the catalog spells them.
    pub(crate) nondeterministic_key: Option<String>,
}

impl Facts {
    fn parse(facts: &str) -> Option<Self> {
        // The last part, an index's name, may hold a `;` of its own.
        let mut parts = facts.splitn(8, ';');
        let data_type = parts.next()?.trim().to_ascii_lowercase();
        let flag = |part: Option<&str>, yes: &str| part.map(|p| p.trim() == yes);
        let nullable = flag(parts.next(), "YES")?;
        let has_default = flag(parts.next(), "1")?;
        let key = flag(parts.next(), "1")?;
        let mut text = || {
            parts
                .next()
                .map(|part| part.trim().to_ascii_lowercase())
                .filter(|part| !part.is_empty())
        };
        let charset = text();
        let storage = text();
        // Names as the catalog spells them: a collation's or an index's may have capitals.
        let mut spelled = || {
            parts
                .next()
                .map(|part| part.trim().to_owned())
                .filter(|part| !part.is_empty())
        };
        let nondeterministic = spelled();
        let nondeterministic_key = spelled();
        Some(Self {
            data_type,
            nullable,
            has_default,
            key,
            charset,
            storage,
            nondeterministic,
            nondeterministic_key,
        })
    }
}

/// The schema check of one dialect and table: the catalog query, and the verdict on its rows.
///
/// [`SqlStore::verify`](crate::SqlStore::verify) and [`SqlStore::setup`](crate::SqlStore::setup)
/// run it; it is public for those who check a table their own way.
///
/// ```
/// use lease_sql::{Dialect, SchemaCheck, TableName};
///
/// let check = SchemaCheck::new(Dialect::Postgres, &TableName::new("leases")?);
/// // The story's table: no fence, a holder that cannot be NULL.
/// let rows = [
///     ("name", "text;NO;0;1"),
///     ("holder", "text;NO;0;0"),
///     ("taken_at", "timestamp with time zone;NO;1;0"),
///     ("expires_at", "timestamp with time zone;NO;0;0"),
/// ]
/// .map(|(column, facts)| (column.to_owned(), facts.to_owned()));
/// match check.verdict(&rows) {
///     Err(lease_core::Error::SchemaMismatch { upgrade: Some(sql), .. }) => {
///         assert!(sql.contains("ADD COLUMN fence bigint NOT NULL DEFAULT 0"));
///         assert!(sql.contains("ALTER COLUMN holder DROP NOT NULL"));
///     }
///     other => panic!("{other:?}"),
/// }
/// # Ok::<(), lease_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct SchemaCheck {
    dialect: Dialect,
    table: TableName,
    quoted: String,
    columns_sql: String,
}

impl SchemaCheck {
    /// The check of `table` on `dialect`.
    pub fn new(dialect: Dialect, table: &TableName) -> Self {
        let quoted = table.quoted(dialect.quote());
        let columns_sql = match dialect {
            Dialect::Postgres => postgres::COLUMNS.to_owned(),
            Dialect::MySql => mysql::columns(table.schema().is_some()),
            Dialect::Sqlite => sqlite::columns(table.schema().is_some()),
        };
        Self {
            dialect,
            table: table.clone(),
            quoted,
            columns_sql,
        }
    }

    /// The catalog query: one row `(column, facts)` per column of the table, none when it does
    /// not exist. It reads only the catalog: on PostgreSQL (`pg_attribute`) it needs no right
    /// on the table itself; MariaDB's `information_schema` lists only the columns the account
    /// has some right on (the store's own are enough), so without any the table reads as missing.
    /// Parameters: PostgreSQL the quoted table name (resolved like the store's statements, by
    /// the search path); MariaDB and SQLite the table, then the schema when one is given.
    pub fn columns(&self) -> Query<'_> {
        let params = match self.dialect {
            Dialect::Postgres => vec![Param::text(self.quoted.as_str())],
            Dialect::MySql | Dialect::Sqlite => std::iter::once(Param::text(self.table.table()))
                .chain(self.table.schema().map(Param::text))
                .collect(),
        };
        Query {
            sql: Cow::Borrowed(&self.columns_sql),
            params,
        }
    }

    /// The statement the check needs besides [`columns`](SchemaCheck::columns), given its
    /// rows: on SQLite, where times are integers of no declared unit, how many rows hold a
    /// `taken_at`, and how many an `expires_at`, that looks like Unix seconds (above zero and
    /// below 10^11) rather than the store's milliseconds, then the same for times that look
    /// finer than milliseconds (10^14 and above: microseconds, nanoseconds): two rows of two
    /// integers ([`Execute::int_pairs`](crate::Execute::int_pairs)), for
    /// [`verdict_with_times`](SchemaCheck::verdict_with_times). It reads the table itself.
    /// `None` on PostgreSQL and MariaDB, and when the table lacks either time column or it is
    /// not an integer.
    pub fn times_in_other_units(&self, rows: &[(String, String)]) -> Option<Query<'static>> {
        if self.dialect != Dialect::Sqlite {
            return None;
        }
        let integer = |column: Column| {
            rows.iter().any(|(name, facts)| {
                self.names(name, column.as_str())
                    && Facts::parse(facts)
                        .is_some_and(|facts| sqlite::fit(column, &facts.data_type) == Fit::Fits)
            })
        };
        (integer(Column::TakenAt) && integer(Column::ExpiresAt)).then(|| Query {
            sql: Cow::Owned(sqlite::time_units(&self.quoted)),
            params: Vec::new(),
        })
    }

    /// The verdict on the rows of [`columns`](SchemaCheck::columns) alone: without the counts of
    /// [`times_in_other_units`](SchemaCheck::times_in_other_units), so on SQLite it cannot
    /// tell times in another unit (use [`verdict_with_times`](SchemaCheck::verdict_with_times),
    /// as [`SqlStore::verify`](crate::SqlStore::verify) does).
    ///
    /// # Errors
    /// [`Error::SchemaMismatch`] when the table does not exist (with the SQL that creates it),
    /// is an earlier shape of a lease table (with the SQL that upgrades it, keeping its rows),
    /// or is a table of another kind (without SQL).
    pub fn verdict(&self, rows: &[(String, String)]) -> Result<(), Error> {
        self.verdict_with_times(rows, &[])
    }

    /// The verdict on the rows of [`columns`](SchemaCheck::columns) and, on SQLite, the rows of
    /// [`times_in_other_units`](SchemaCheck::times_in_other_units) (empty where it was not
    /// asked), each `(taken_at, expires_at)`: first how many rows hold each time in seconds,
    /// then how many hold it finer than milliseconds. Times in seconds are an earlier lease
    /// table's: the store would read every lease as long expired, and hand a lease held now to
    /// another holder; the upgrade multiplies them by 1000, row by row. Times finer than
    /// milliseconds are refused without SQL: the store would read every such lease as held for
    /// millennia, and only who wrote them knows their unit.
    ///
    /// # Errors
    /// As [`verdict`](SchemaCheck::verdict); [`Error::SchemaMismatch`] with the SQL that makes
    /// them milliseconds when times are in seconds, and without SQL when they are finer.
    pub fn verdict_with_times(
        &self,
        rows: &[(String, String)],
        times: &[(i64, i64)],
    ) -> Result<(), Error> {
        let seconds = times.first().copied();
        if rows.is_empty() {
            return Err(self.mismatch(
                "the table does not exist".to_owned(),
                Some(format!("{};", self.create_table())),
                false,
            ));
        }
        let mut problems = Vec::new();
        let mut fixes = Vec::new();
        let mut found = Vec::new();
        for (column, facts) in rows {
            let Some(facts) = Facts::parse(facts) else {
                problems.push(format!(
                    "the catalog described column {column} as {facts:?}"
                ));
                continue;
            };
            found.push((column.as_str(), facts));
        }
        // The catalog's facts of one of the store's columns, as the database names columns.
        let facts_of = |column: Column| {
            found
                .iter()
                .find(|(name, _)| self.names(name, column.as_str()))
                .map(|(_, facts)| facts)
        };
        for column in Column::ALL {
            let Some(facts) = facts_of(column) else {
                if column == Column::Fence {
                    fixes.push((Fix::AddFence, "column fence is missing".to_owned()));
                } else {
                    problems.push(format!("column {} is missing", column.as_str()));
                }
                continue;
            };
            let name = column.as_str();
            // SQLite ignores a declared length; elsewhere a name's or holder's is read apart.
            let (data_type, length) = match column.needed_length() {
                Some(_) if self.dialect != Dialect::Sqlite => declared_length(&facts.data_type),
                _ => (facts.data_type.as_str(), None),
            };
            let fit = self.fit(column, data_type);
            // A column of text in another character set than UTF-8 is converted to it first,
            // as part of its upgrade to bytes (MariaDB's alone).
            if let Fit::Upgrade(_) = fit
                && self.dialect == Dialect::MySql
                && let Some((fix, charset)) = mysql::recode(column, facts)
            {
                fixes.push((
                    fix,
                    format!("column {name} holds {charset} text: {}", describe(fix)),
                ));
            }
            // A time set on every update loses that, whatever else its type needs (MariaDB's
            // alone).
            if !matches!(fit, Fit::Wrong(_))
                && self.dialect == Dialect::MySql
                && let Some(fix) = mysql::set_on_update(column, facts)
            {
                fixes.push((
                    fix,
                    format!("column {name} is {}: {}", facts.data_type, describe(fix)),
                ));
            }
            // A column of text that compares by a nondeterministic collation is made to
            // compare bytes (PostgreSQL's alone).
            if let Fit::Fits = fit
                && self.dialect == Dialect::Postgres
                && let Some((fix, collation)) = postgres::nondeterministic(column, facts)
            {
                fixes.push((
                    fix,
                    format!(
                        "column {name} is {} with the nondeterministic collation {collation}: {}",
                        facts.data_type,
                        describe(fix)
                    ),
                ));
            }
            match fit {
                Fit::Fits => {}
                Fit::Upgrade(fix) => fixes.push((
                    fix,
                    format!("column {name} is {}: {}", facts.data_type, describe(fix)),
                )),
                Fit::Wrong(needed) => problems.push(format!(
                    "column {name} is {}, the store needs {needed}",
                    facts.data_type
                )),
            }
            if let (Some(length), Some((needed, fix))) = (length, column.needed_length())
                && length < needed
                && !matches!(fit, Fit::Wrong(_))
            {
                fixes.push((
                    fix,
                    format!("column {name} is {}: {}", facts.data_type, describe(fix)),
                ));
            }
            match column {
                Column::Name if !facts.key => problems.push(
                    "column name is not the primary key (nor alone a unique key, checked at once \
                     and valid)"
                        .to_owned(),
                ),
                Column::Holder if !facts.nullable => fixes.push((
                    Fix::HolderNullable,
                    "column holder is NOT NULL: a released lease has no holder".to_owned(),
                )),
                Column::Fence if facts.nullable => {
                    fixes.push((Fix::FenceNotNull, "column fence may be NULL".to_owned()))
                }
                Column::TakenAt if facts.nullable => fixes.push((
                    Fix::TakenAtNotNull,
                    "column taken_at may be NULL: the store reads a time from every lease"
                        .to_owned(),
                )),
                Column::ExpiresAt if facts.nullable => fixes.push((
                    Fix::ExpiresAtNotNull,
                    "column expires_at may be NULL: a lease without an expiry could never be \
                     taken over (the upgrade frees such leases at once: stop the service that \
                     holds them first)"
                        .to_owned(),
                )),
                _ => {}
            }
        }
        if self.dialect == Dialect::Sqlite
            && let Some((taken_at, expires_at)) = seconds
            && let Some(counted) = rows_counted(taken_at, expires_at)
        {
            fixes.push((
                Fix::MillisecondTimes,
                format!(
                    "the times look like Unix seconds ({counted}: above zero and below 10^11), \
                     and {}: it would read every such lease as long expired and hand it to \
                     another holder; convert them once no service writes seconds into the \
                     table any more",
                    describe(Fix::MillisecondTimes)
                ),
            ));
        }
        let finer = match times.get(1) {
            Some(&(taken_at, expires_at)) if self.dialect == Dialect::Sqlite => {
                rows_counted(taken_at, expires_at).map(|counted| {
                    format!(
                        "the times look finer than milliseconds ({counted}: 10^14 and above, \
                         microseconds or nanoseconds), and the store keeps milliseconds: it \
                         would read every such lease as held for millennia; convert them by \
                         hand, as their unit says, once no service writes them"
                    )
                })
            }
            _ => None,
        };
        // How the table keeps its rows: every column's facts say the same.
        let storage = found.iter().find_map(|(_, facts)| facts.storage.as_deref());
        let mut unfit: Vec<String> = match self.dialect {
            Dialect::Postgres => postgres::unfit_storage(storage, &self.quoted),
            Dialect::MySql => mysql::unfit_storage(storage, &self.quoted),
            Dialect::Sqlite => None,
        }
        .into_iter()
        .chain(finer)
        .collect();
        // A unique index on the name beside the key that calls other names equal: no change of
        // the column's type changes it (PostgreSQL's alone).
        if self.dialect == Dialect::Postgres
            && let Some(facts) = facts_of(Column::Name)
        {
            unfit.extend(postgres::unfit_key(facts.nondeterministic_key.as_deref()));
        }
        let ours = |column: &str| Column::ALL.iter().any(|c| self.names(column, c.as_str()));
        for (column, facts) in &found {
            let ours = ours(column);
            if !ours && !facts.nullable && !facts.has_default {
                problems.push(format!(
                    "column {column} is NOT NULL without a default, and the store's inserts do \
                     not set it"
                ));
            }
        }
        // A table whose storage or key alone is unfit is a lease table all the same, perhaps the one
        // the running instances use: its mismatch says how to change it, never to use another
        // table (instances on two tables would each hold every lease).
        let other_kind = !problems.is_empty();
        if other_kind || !unfit.is_empty() {
            let mut all = problems;
            all.extend(unfit);
            all.extend(fixes.into_iter().map(|(_, why)| why));
            return Err(self.mismatch(all.join("; "), None, other_kind));
        }
        if fixes.is_empty() {
            return Ok(());
        }
        fixes.sort_by_key(|(fix, _)| *fix);
        let extra: Vec<&str> = found
            .iter()
            .map(|(column, _)| *column)
            .filter(|column| !ours(column))
            .collect();
        let (why, fixes): (Vec<String>, Vec<Fix>) =
            fixes.into_iter().map(|(fix, why)| (why, fix)).unzip();
        let upgrade = match self.dialect {
            Dialect::Postgres => Some(postgres::upgrade(&self.quoted, &fixes)),
            Dialect::MySql => {
                let holder = facts_of(Column::Holder).map_or("", |facts| facts.data_type.as_str());
                Some(mysql::upgrade(
                    &self.quoted,
                    &fixes,
                    mysql::HolderWidth::of(holder),
                ))
            }
            Dialect::Sqlite => sqlite::upgrade(
                &self.table,
                &fixes,
                facts_of(Column::Fence).is_some(),
                !extra.is_empty(),
            ),
        };
        let mut why = why.join("; ");
        if upgrade.is_none() {
            // SQLite's alone: an earlier lease table with columns of its own.
            why.push_str(&format!(
                "; this is an earlier lease table, but SQLite cannot change a column in place, \
                 and the store's rebuild of the table would drop the columns that are not the \
                 store's ({}), so there is no SQL to run: rebuild the table by hand, keeping \
                 them (in one transaction: the store's table, as `leasectl migrations` prints \
                 it, under a new name with those columns added, every row copied into it, a \
                 missing fence as 0, then this table dropped and the new one renamed to it)",
                extra.join(", ")
            ));
        }
        // A lease table, with SQL or without (SQLite's with columns of its own).
        Err(self.mismatch(why, upgrade, false))
    }

    /// Whether the catalog's column `found` is the store's `column`: as the database compares
    /// column names, exactly on PostgreSQL (a quoted identifier keeps its case), regardless of
    /// ASCII case on MariaDB and SQLite, where `NAME` and `name` are one column and every
    /// statement of the store works on a table that declares `NAME`.
    fn names(&self, found: &str, column: &str) -> bool {
        match self.dialect {
            Dialect::Postgres => found == column,
            Dialect::MySql | Dialect::Sqlite => found.eq_ignore_ascii_case(column),
        }
    }

    fn fit(&self, column: Column, data_type: &str) -> Fit {
        match self.dialect {
            Dialect::Postgres => postgres::fit(column, data_type),
            Dialect::MySql => mysql::fit(column, data_type),
            Dialect::Sqlite => sqlite::fit(column, data_type),
        }
    }

    fn create_table(&self) -> String {
        crate::Statements::new(self.dialect, &self.table)
            .create_table()
            .to_owned()
    }

    /// The error for a table that does not fit; `other_kind` when it is not a lease table.
    fn mismatch(&self, mismatch: String, upgrade: Option<String>, other_kind: bool) -> Error {
        Error::SchemaMismatch {
            table: self.table.to_string(),
            mismatch,
            upgrade,
            other_kind,
        }
    }
}

/// `taken_at in 3 rows, expires_at in 1 row`: the time columns that many rows of the table hold
/// in a wrong unit, those with none left out; `None` when neither has any.
fn rows_counted(taken_at: i64, expires_at: i64) -> Option<String> {
    let counted: Vec<String> = [("taken_at", taken_at), ("expires_at", expires_at)]
        .into_iter()
        .filter(|(_, rows)| *rows > 0)
        .map(|(column, rows)| format!("{column} in {rows} row{}", if rows == 1 { "" } else { "s" }))
        .collect();
    (!counted.is_empty()).then(|| counted.join(", "))
}

/// The `UPDATE` that gives every row both times before they become `NOT NULL`, `now` (the
/// dialect's clock) where one is missing: a lease without an expiry is free from the upgrade on.
fn fill_times(t: &str, now: &str) -> String {
    format!(
        "UPDATE {t} SET taken_at = coalesce(taken_at, {now}), expires_at = coalesce(expires_at, {now})\n    \
             WHERE taken_at IS NULL OR expires_at IS NULL;\n"
    )
}

fn describe(fix: Fix) -> &'static str {
    match fix {
        Fix::AddFence => "the store needs a fence",
        Fix::WidenFence => "fences need a signed 64-bit integer",
        Fix::FenceNotNull => "every lease needs a fence",
        Fix::HolderNullable => "a released lease has no holder",
        Fix::TakenAtNotNull | Fix::ExpiresAtNotNull => "every lease needs its times",
        Fix::Utf8Name => {
            "its bytes are not the UTF-8 the store sends, so a lease held under a name with a \
             character beyond ASCII would be another row than the store's, with a holder of its \
             own; the text is converted to UTF-8 before it becomes bytes"
        }
        Fix::Utf8Holder => {
            "its bytes are not the UTF-8 the store sends, so a holder with a character beyond \
             ASCII (in its host name) would not find its own lease to renew or release; the \
             text is converted to UTF-8 before it becomes bytes"
        }
        Fix::BinaryName => {
            "compared by a collation, so names that differ in case, accents or trailing spaces would be \
             one lease; the store compares bytes"
        }
        Fix::BinaryHolder => {
            "compared by a collation, so holders that differ in case, accents or trailing spaces would be \
             one holder, renewing and releasing each other's lease; the store compares bytes"
        }
        Fix::PreciseTakenAt | Fix::PreciseExpiresAt => "the store needs microseconds",
        Fix::UtcTakenAt | Fix::UtcExpiresAt => {
            "a TIMESTAMP is read and written in the session's time zone, to the second, and ends \
             in 2038; the store keeps DATETIME(6) in UTC"
        }
        Fix::WidenName => {
            "shorter than a lease name may be (255 bytes): acquiring such a lease would fail, or \
             store a cut name"
        }
        Fix::WidenHolder => {
            "shorter than the store's holders may be (host:pid:random, up to 283 bytes): \
             acquisitions would fail, or store cut holders that two acquisitions could share"
        }
        Fix::MillisecondTimes => "the store keeps milliseconds",
        Fix::NoOnUpdateTakenAt => {
            "MariaDB sets it to the session's local time whenever a statement changes the row \
             without setting it (ON UPDATE CURRENT_TIMESTAMP): every renewal would move the \
             time the lease was taken, and a release's minimum hold would count from there"
        }
        Fix::NoOnUpdateExpiresAt => {
            "MariaDB sets it to the session's local time whenever a statement changes the row \
             without setting it (ON UPDATE CURRENT_TIMESTAMP): any other change of a lease row, \
             the upgrade's own included, would move its expiry there, at once on a server at \
             UTC, and hand the lease to another holder"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(columns: &[(&str, &str)]) -> Vec<(String, String)> {
        columns
            .iter()
            .map(|(c, f)| ((*c).to_owned(), (*f).to_owned()))
            .collect()
    }

    fn mismatch(result: Result<(), Error>) -> (String, Option<String>) {
        match result {
            Err(Error::SchemaMismatch {
                mismatch, upgrade, ..
            }) => (mismatch, upgrade),
            other => panic!("expected a mismatch, got {other:?}"),
        }
    }

    const TZ: &str = "timestamp with time zone";

    #[test]
    fn the_stores_own_table_fits_and_a_missing_one_gets_its_ddl() {
        let check = SchemaCheck::new(Dialect::Postgres, &TableName::default());
        let ours = rows(&[
            ("name", "text;NO;0;1"),
            ("holder", "text;YES;0;0"),
            ("fence", "bigint;NO;0;0"),
            ("taken_at", &format!("{TZ};NO;0;0")),
            ("expires_at", &format!("{TZ};NO;0;0")),
            ("note", "text;YES;0;0"),
        ]);
        assert!(check.verdict(&ours).is_ok());
        let (why, sql) = mismatch(check.verdict(&[]));
        assert_eq!(why, "the table does not exist");
        assert!(
            sql.unwrap()
                .starts_with("CREATE TABLE IF NOT EXISTS \"leases\"")
        );
    }

    #[test]
    fn postgres_times_coarser_than_microseconds_are_given_theirs() {
        let check = SchemaCheck::new(Dialect::Postgres, &TableName::default());
        let table = |taken_at: &str, expires_at: &str, fence: &str| {
            rows(&[
                ("name", "text;NO;0;1"),
                ("holder", "text;YES;0;0"),
                ("fence", fence),
                ("taken_at", taken_at),
                ("expires_at", expires_at),
            ])
        };
        // Six digits, declared or by default, fit.
        let declared = "timestamp(6) with time zone;NO;0;0";
        assert!(
            check
                .verdict(&table(declared, &format!("{TZ};NO;0;0"), "bigint;NO;0;0"))
                .is_ok()
        );
        // Fewer, on one column, beside a nullable time and fence: one ALTER TABLE, after the
        // lock and the UPDATEs the NOT NULLs need.
        let (why, sql) = mismatch(check.verdict(&table(
            "timestamp(3) with time zone;YES;0;0",
            declared,
            "bigint;YES;0;0",
        )));
        assert!(
            why.contains(
                "column taken_at is timestamp(3) with time zone: the store needs microseconds"
            ),
            "{why}"
        );
        assert!(!why.contains("column expires_at is"), "{why}");
        let sql = sql.expect("an upgrade");
        assert_eq!(sql.matches("ALTER TABLE").count(), 1, "{sql}");
        assert!(
            sql.contains("ALTER COLUMN taken_at SET NOT NULL")
                && sql.contains("ALTER COLUMN taken_at TYPE timestamptz")
                && sql.contains("ALTER COLUMN fence SET NOT NULL")
                && !sql.contains("expires_at TYPE"),
            "{sql}"
        );
        assert!(
            sql.find("LOCK TABLE") < sql.find("UPDATE")
                && sql.find("UPDATE") < sql.find("ALTER TABLE"),
            "{sql}"
        );
        // A time without a zone is another kind of column.
        let (why, sql) = mismatch(check.verdict(&table(
            "timestamp without time zone;NO;0;0",
            declared,
            "bigint;NO;0;0",
        )));
        assert_eq!(sql, None, "{why}");
    }

    #[test]
    fn a_lease_table_on_unfit_storage_is_refused_as_a_lease_table() {
        // The store's own table, UNLOGGED: perhaps the one the instances use now. The refusal
        // says how to make it logged, and never to give the store another table, which would
        // put instances on two tables that each hand out every lease.
        let check = SchemaCheck::new(Dialect::Postgres, &TableName::default());
        let unlogged = rows(&[
            ("name", "text;NO;0;1;;unlogged"),
            ("holder", "text;YES;0;0;;unlogged"),
            ("fence", "bigint;NO;0;0;;unlogged"),
            ("taken_at", &format!("{TZ};NO;0;0;;unlogged")),
            ("expires_at", &format!("{TZ};NO;0;0;;unlogged")),
        ]);
        let refused = check.verdict(&unlogged);
        let (why, sql) = mismatch(check.verdict(&unlogged));
        assert_eq!(sql, None);
        assert!(why.contains("ALTER TABLE \"leases\" SET LOGGED"), "{why}");
        assert!(
            matches!(
                refused,
                Err(Error::SchemaMismatch {
                    other_kind: false,
                    ..
                })
            ),
            "{refused:?}"
        );
        let message = refused.unwrap_err().to_string();
        assert!(!message.contains("another table name"), "{message}");
        // Beside a problem of another kind, the table is of another kind.
        let mut no_key = unlogged.clone();
        no_key[0].1 = "text;NO;0;0;;unlogged".to_owned();
        assert!(matches!(
            check.verdict(&no_key),
            Err(Error::SchemaMismatch {
                other_kind: true,
                ..
            })
        ));
    }

    #[test]
    fn a_postgres_name_or_holder_by_a_nondeterministic_collation_is_made_to_compare_bytes() {
        let check = SchemaCheck::new(Dialect::Postgres, &TableName::default());
        let table = |name: &str, holder: &str| {
            rows(&[
                ("name", name),
                ("holder", holder),
                ("fence", "bigint;NO;0;0;;permanent;;"),
                ("taken_at", &format!("{TZ};NO;0;0;;permanent;;")),
                ("expires_at", &format!("{TZ};NO;0;0;;permanent;;")),
            ])
        };
        let plain_holder = "text;YES;0;0;;permanent;;";
        // Deterministic collations leave the two parts empty: the table fits.
        assert!(
            check
                .verdict(&table("text;NO;0;1;;permanent;;", plain_holder))
                .is_ok()
        );
        let (why, sql) = mismatch(check.verdict(&table(
            "text;NO;0;1;;permanent;Case_Blind;",
            "text;YES;0;0;;permanent;\"und-ci\";",
        )));
        assert!(
            why.contains(
                "column name is text with the nondeterministic collation Case_Blind: compared by \
                 a collation, so names that differ in case"
            ),
            "{why}"
        );
        assert!(
            why.contains("column holder is text with the nondeterministic collation \"und-ci\""),
            "{why}"
        );
        assert_eq!(
            sql.unwrap(),
            "SET LOCAL lock_timeout = '5s';\n\
             ALTER TABLE \"leases\"\n    \
             ALTER COLUMN name TYPE text COLLATE \"C\",\n    \
             ALTER COLUMN holder TYPE text;"
        );
        // A short name by such a collation: widened and made to compare bytes by one action.
        let (why, sql) = mismatch(check.verdict(&table(
            "character varying(64);NO;0;1;;permanent;ci;",
            plain_holder,
        )));
        assert!(why.contains("shorter than a lease name"), "{why}");
        assert!(why.contains("nondeterministic collation ci"), "{why}");
        assert_eq!(
            sql.unwrap(),
            "SET LOCAL lock_timeout = '5s';\n\
             ALTER TABLE \"leases\"\n    \
             ALTER COLUMN name TYPE text COLLATE \"C\";"
        );
    }

    #[test]
    fn a_postgres_unique_index_on_name_by_a_nondeterministic_collation_is_refused_without_sql() {
        // A binary key, and beside it a unique index that calls `Sweep` and `sweep` equal: no
        // change of the column helps, so there is no SQL, and the table is a lease table all
        // the same (the one the instances may use now).
        let check = SchemaCheck::new(Dialect::Postgres, &TableName::default());
        let beside = rows(&[
            (
                "name",
                "text;NO;0;1;;permanent;;\"Leases_ci\" collate case_blind",
            ),
            ("holder", "text;YES;0;0;;permanent;;"),
            ("fence", "bigint;NO;0;0;;permanent;;"),
            ("taken_at", &format!("{TZ};NO;0;0;;permanent;;")),
            ("expires_at", &format!("{TZ};NO;0;0;;permanent;;")),
        ]);
        let refused = check.verdict(&beside);
        assert!(
            matches!(
                refused,
                Err(Error::SchemaMismatch {
                    upgrade: None,
                    other_kind: false,
                    ..
                })
            ),
            "{refused:?}"
        );
        let (why, _) = mismatch(refused);
        assert!(
            why.contains(
                "the unique index \"Leases_ci\" on name compares by the nondeterministic \
                 collation case_blind"
            ),
            "{why}"
        );
        // An index whose name holds the catalog row's separator and the word before the
        // collation is named whole.
        let mut odd = beside.clone();
        odd[0].1 = "text;NO;0;1;;permanent;;\"lease;s collate x\" collate case_blind".to_owned();
        let (why, sql) = mismatch(check.verdict(&odd));
        assert_eq!(sql, None);
        assert!(
            why.contains(
                "the unique index \"lease;s collate x\" on name compares by the nondeterministic \
                 collation case_blind"
            ),
            "{why}"
        );
        // With a fix of the column beside it, still no SQL: the index would stay.
        let mut both = beside.clone();
        both[1].1 = "text;YES;0;0;;permanent;case_blind;".to_owned();
        let (why, sql) = mismatch(check.verdict(&both));
        assert_eq!(sql, None);
        assert!(
            why.contains("column holder is text with the nondeterministic"),
            "{why}"
        );
    }

    #[test]
    fn an_unrelated_table_is_refused_without_sql() {
        let check = SchemaCheck::new(Dialect::Postgres, &TableName::default());
        let users = rows(&[("id", "integer;NO;1;1"), ("email", "text;NO;0;0")]);
        let (why, sql) = mismatch(check.verdict(&users));
        assert_eq!(sql, None);
        assert!(why.contains("column name is missing"), "{why}");
        assert!(
            why.contains("column email is NOT NULL without a default"),
            "{why}"
        );
        let times_as_text = rows(&[
            ("name", "text;NO;0;1"),
            ("holder", "text;YES;0;0"),
            ("fence", "bigint;NO;0;0"),
            ("taken_at", "text;NO;0;0"),
            ("expires_at", &format!("{TZ};NO;0;0")),
        ]);
        let (why, sql) = mismatch(check.verdict(&times_as_text));
        assert_eq!(sql, None);
        assert!(
            why.contains("column taken_at is text, the store needs timestamptz"),
            "{why}"
        );
        let no_key = rows(&[
            ("name", "text;NO;0;0"),
            ("holder", "text;YES;0;0"),
            ("fence", "bigint;NO;0;0"),
            ("taken_at", &format!("{TZ};NO;0;0")),
            ("expires_at", &format!("{TZ};NO;0;0")),
        ]);
        assert!(
            mismatch(check.verdict(&no_key))
                .0
                .contains("not the primary key")
        );
    }

    #[test]
    fn nullable_times_are_filled_then_made_not_null_on_each_dialect() {
        let table = TableName::default();
        for (dialect, text, fence, time, fill, not_null) in [
            (
                Dialect::Postgres,
                "text",
                "bigint",
                TZ,
                "coalesce(expires_at, statement_timestamp())",
                "ALTER COLUMN expires_at SET NOT NULL",
            ),
            (
                Dialect::MySql,
                "varbinary",
                "bigint",
                "datetime(6)",
                "coalesce(expires_at, UTC_TIMESTAMP(6))",
                "MODIFY expires_at DATETIME(6) NOT NULL",
            ),
            (
                Dialect::Sqlite,
                "text",
                "integer",
                "integer",
                "coalesce(expires_at, CAST(round(unixepoch('subsec') * 1000) AS INTEGER))",
                "CREATE TABLE \"leases_upgrade\"",
            ),
        ] {
            let nullable = rows(&[
                ("name", &format!("{text};NO;0;1")),
                ("holder", &format!("{text};YES;0;0")),
                ("fence", &format!("{fence};NO;0;0")),
                ("taken_at", &format!("{time};NO;0;0")),
                ("expires_at", &format!("{time};YES;0;0")),
            ]);
            let (why, sql) = mismatch(SchemaCheck::new(dialect, &table).verdict(&nullable));
            assert!(
                why.contains("column expires_at may be NULL") && !why.contains("taken_at"),
                "{dialect:?}: {why}"
            );
            let sql = sql.unwrap();
            assert!(sql.contains(fill), "{dialect:?}: {sql}");
            assert!(sql.contains(not_null), "{dialect:?}: {sql}");
            if dialect != Dialect::Sqlite {
                assert!(
                    sql.find(fill) < sql.find("ALTER TABLE"),
                    "{dialect:?}: the rows are filled after the column is changed: {sql}"
                );
            }
        }
    }

    #[test]
    fn an_earlier_lease_table_gets_the_sql_of_each_dialect() {
        let story = |dialect| {
            let (text, time) = match dialect {
                Dialect::Postgres => ("text", TZ),
                Dialect::MySql => ("varchar", "datetime(6)"),
                Dialect::Sqlite => ("text", "integer"),
            };
            rows(&[
                ("name", &format!("{text};NO;0;1")),
                ("holder", &format!("{text};NO;0;0")),
                ("taken_at", &format!("{time};NO;1;0")),
                ("expires_at", &format!("{time};NO;0;0")),
            ])
        };
        let table = TableName::new("jobs.leases").unwrap();
        let (why, sql) = mismatch(
            SchemaCheck::new(Dialect::Postgres, &table).verdict(&story(Dialect::Postgres)),
        );
        assert!(why.contains("column fence is missing"), "{why}");
        assert_eq!(
            sql.unwrap(),
            "SET LOCAL lock_timeout = '5s';\n\
             ALTER TABLE \"jobs\".\"leases\"\n    ADD COLUMN fence bigint NOT NULL DEFAULT 0,\n    \
             ALTER COLUMN holder DROP NOT NULL;"
        );
        let (why, sql) =
            mismatch(SchemaCheck::new(Dialect::MySql, &table).verdict(&story(Dialect::MySql)));
        assert!(
            why.contains("column name is varchar: compared by a collation"),
            "{why}"
        );
        let sql = sql.unwrap();
        assert!(
            sql.starts_with("ALTER TABLE `jobs`.`leases` WAIT 5\n"),
            "{sql}"
        );
        assert!(
            sql.contains("ADD COLUMN fence BIGINT NOT NULL DEFAULT 0"),
            "{sql}"
        );
        assert!(sql.contains("MODIFY name VARBINARY(255) NOT NULL"), "{sql}");
        assert_eq!(
            sql.matches("MODIFY holder VARBINARY(1024) NULL").count(),
            1,
            "{sql}"
        );
        let (_, sql) =
            mismatch(SchemaCheck::new(Dialect::Sqlite, &table).verdict(&story(Dialect::Sqlite)));
        let sql = sql.unwrap();
        assert!(
            sql.contains("INSERT INTO \"jobs\".\"leases_upgrade\""),
            "{sql}"
        );
        // The missing fence is added in place under the write lock, then copied: a table that
        // has one by then (another upgrade's) fails the script rather than lose its fences,
        // which the first line says to run so that it stops at its first error.
        assert!(
            sql.starts_with(
                "-- Run this as a whole that stops at its first error (sqlite3 -bail, or a \
                 migration): past a failed statement the rest would still drop the table.\n\
                 SAVEPOINT lease_upgrade;\n\
                 ALTER TABLE \"jobs\".\"leases\" ADD COLUMN fence INTEGER NOT NULL DEFAULT 0;\n"
            ),
            "{sql}"
        );
        assert!(
            sql.contains("SELECT name, holder, coalesce(fence, 0), coalesce(taken_at, "),
            "{sql}"
        );
        assert!(sql.ends_with("\nRELEASE lease_upgrade;"), "{sql}");
        assert!(!sql.contains("BEGIN") && !sql.contains("COMMIT"), "{sql}");
        assert!(sql.contains("\n    FROM \"jobs\".\"leases\";"), "{sql}");
        assert!(
            sql.contains("ALTER TABLE \"jobs\".\"leases_upgrade\" RENAME TO \"leases\""),
            "{sql}"
        );
    }

    #[test]
    fn a_mariadb_port_with_text_holders_and_timestamps_is_upgraded_in_utc() {
        let check = SchemaCheck::new(Dialect::MySql, &TableName::default());
        let port = rows(&[
            ("name", "varchar;NO;0;1"),
            ("holder", "text;NO;0;0"),
            ("taken_at", "timestamp(0);NO;1;0"),
            ("expires_at", "timestamp(0);NO;0;0"),
        ]);
        let (why, sql) = mismatch(check.verdict(&port));
        assert!(
            why.contains("column holder is text: compared by a collation"),
            "{why}"
        );
        assert!(
            why.contains("column expires_at is timestamp(0): a TIMESTAMP is read and written in the session's time zone"),
            "{why}"
        );
        assert_eq!(
            sql.unwrap(),
            "SET @lease_time_zone = @@session.time_zone;\n\
             SET time_zone = '+00:00';\n\
             ALTER TABLE `leases` WAIT 5\n    \
             ADD COLUMN fence BIGINT NOT NULL DEFAULT 0,\n    \
             MODIFY holder VARBINARY(1024) NULL,\n    \
             MODIFY name VARBINARY(255) NOT NULL,\n    \
             MODIFY taken_at DATETIME(6) NOT NULL,\n    \
             MODIFY expires_at DATETIME(6) NOT NULL;\n\
             SET time_zone = @lease_time_zone;"
        );
        // Without a TIMESTAMP, the session's time zone is left alone.
        let mut datetimes = port.clone();
        datetimes[2].1 = "datetime(6);NO;1;0".to_owned();
        datetimes[3].1 = "datetime(6);NO;0;0".to_owned();
        let (_, sql) = mismatch(check.verdict(&datetimes));
        assert!(!sql.unwrap().contains("time_zone"));
        // A time of another kind is still refused, naming the type to change it to by hand.
        let mut dates = port;
        dates[3].1 = "date;NO;0;0".to_owned();
        let (why, sql) = mismatch(check.verdict(&dates));
        assert_eq!(sql, None);
        assert!(
            why.contains("column expires_at is date, the store needs DATETIME(6), in UTC"),
            "{why}"
        );
    }

    #[test]
    fn a_mariadb_fence_that_is_unsigned_or_narrow_is_made_a_signed_bigint() {
        let check = SchemaCheck::new(Dialect::MySql, &TableName::default());
        let table = |fence: &str| {
            rows(&[
                ("name", "varbinary;NO;0;1"),
                ("holder", "varbinary;YES;0;0"),
                ("fence", fence),
                ("taken_at", "datetime(6);NO;0;0"),
                ("expires_at", "datetime(6);NO;0;0"),
            ])
        };
        assert!(check.verdict(&table("bigint;NO;0;0")).is_ok());
        for fence in [
            "bigint unsigned;NO;0;0",
            "int unsigned;NO;0;0",
            "int;NO;0;0",
        ] {
            let (why, sql) = mismatch(check.verdict(&table(fence)));
            assert!(why.contains("signed 64-bit"), "{fence}: {why}");
            assert_eq!(
                sql.unwrap(),
                "ALTER TABLE `leases` WAIT 5\n    MODIFY fence BIGINT NOT NULL;",
                "{fence}"
            );
        }
    }

    #[test]
    fn sqlite_adds_a_fence_in_place_and_refuses_to_rebuild_over_other_columns() {
        let check = SchemaCheck::new(Dialect::Sqlite, &TableName::default());
        let no_fence = rows(&[
            ("name", "text;YES;0;1"),
            ("holder", "text;YES;0;0"),
            ("taken_at", "integer;NO;0;0"),
            ("expires_at", "integer;NO;0;0"),
            ("note", "text;YES;0;0"),
        ]);
        let (_, sql) = mismatch(check.verdict(&no_fence));
        assert_eq!(
            sql.unwrap(),
            "ALTER TABLE \"leases\" ADD COLUMN fence INTEGER NOT NULL DEFAULT 0;"
        );
        let mut holder_not_null = no_fence.clone();
        holder_not_null[1].1 = "text;NO;0;0".to_owned();
        let (why, sql) = mismatch(check.verdict(&holder_not_null));
        assert_eq!(sql, None);
        // An earlier lease table with a column of its own: said so, with what to do by hand,
        // and nothing in the mismatch that calls it a table of another kind.
        assert!(why.contains("this is an earlier lease table"), "{why}");
        assert!(
            why.contains("would drop the columns that are not the store's (note)"),
            "{why}"
        );
        assert!(
            why.contains("rebuild the table by hand, keeping them"),
            "{why}"
        );
        assert!(!why.contains("not a lease table"), "{why}");
        assert!(!why.contains("another table name"), "{why}");
        // Nor in the whole message, which lease-core ends for a table of another kind.
        let message = check.verdict(&holder_not_null).unwrap_err().to_string();
        assert!(!message.contains("another table name"), "{message}");
        assert!(
            message.ends_with("to it)"),
            "the message ends with what to do by hand: {message}"
        );
    }

    #[test]
    fn short_names_and_holders_are_widened_and_long_enough_ones_fit() {
        // What the store's own DDL declares is what the check asks for, or more.
        let mariadb = crate::Statements::new(Dialect::MySql, &TableName::default());
        assert!(
            mariadb
                .create_table()
                .contains(&format!("VARBINARY({NAME_LENGTH})"))
        );
        assert!(mariadb.create_table().contains(&format!(
            "holder     VARBINARY({}),",
            mysql::HolderWidth::STORE
        )));
        assert_eq!(NAME_LENGTH, 255);
        // A holder column sized for the longest holder fits: 283 bytes.
        assert_eq!(HOLDER_LENGTH, 283);
        let table = |name: &str, holder: &str, dialect| {
            let (fence, time) = match dialect {
                Dialect::Postgres => ("bigint", TZ),
                _ => ("bigint", "datetime(6)"),
            };
            rows(&[
                ("name", &format!("{name};NO;0;1")),
                ("holder", &format!("{holder};YES;0;0")),
                ("fence", &format!("{fence};NO;0;0")),
                ("taken_at", &format!("{time};NO;0;0")),
                ("expires_at", &format!("{time};NO;0;0")),
            ])
        };
        let postgres = SchemaCheck::new(Dialect::Postgres, &TableName::default());
        for (name, holder) in [
            ("text", "text"),
            ("character varying", "character varying"),
            ("character varying(255)", "character varying(1024)"),
            ("character varying(4000)", "text"),
        ] {
            assert!(
                postgres
                    .verdict(&table(name, holder, Dialect::Postgres))
                    .is_ok(),
                "{name}, {holder}"
            );
        }
        let (why, sql) = mismatch(postgres.verdict(&table(
            "character varying(64)",
            "character varying(36)",
            Dialect::Postgres,
        )));
        assert!(
            why.contains("column name is character varying(64): shorter than a lease name"),
            "{why}"
        );
        assert!(
            why.contains(
                "column holder is character varying(36): shorter than the store's holders"
            ),
            "{why}"
        );
        assert_eq!(
            sql.unwrap(),
            "SET LOCAL lock_timeout = '5s';\n\
             ALTER TABLE \"leases\"\n    \
             ALTER COLUMN name TYPE text COLLATE \"C\",\n    \
             ALTER COLUMN holder TYPE text;"
        );
        // A holder one byte short of the longest is widened too, one that takes it fits (a
        // `varchar(300)` of an earlier service); a wrong type is refused, not widened.
        let (why, _) =
            mismatch(postgres.verdict(&table("text", "character varying(282)", Dialect::Postgres)));
        assert!(
            why.contains("column holder is character varying(282)"),
            "{why}"
        );
        for holder in ["character varying(283)", "character varying(300)"] {
            assert!(
                postgres
                    .verdict(&table("text", holder, Dialect::Postgres))
                    .is_ok(),
                "{holder}"
            );
        }
        assert!(
            SchemaCheck::new(Dialect::MySql, &TableName::default())
                .verdict(&table("varbinary(255)", "varbinary(512)", Dialect::MySql))
                .is_ok()
        );
        let (why, sql) =
            mismatch(postgres.verdict(&table("character(36)", "text", Dialect::Postgres)));
        assert_eq!(sql, None);
        assert!(
            why.contains("column name is character(36), the store needs text")
                && !why.contains("shorter"),
            "{why}"
        );

        let mysql = SchemaCheck::new(Dialect::MySql, &TableName::default());
        assert!(
            mysql
                .verdict(&table("varbinary(255)", "varbinary(1024)", Dialect::MySql))
                .is_ok()
        );
        assert!(
            mysql
                .verdict(&table("varbinary(3072)", "varbinary(2048)", Dialect::MySql))
                .is_ok()
        );
        let (why, sql) =
            mismatch(mysql.verdict(&table("varbinary(100)", "varbinary(36)", Dialect::MySql)));
        assert!(
            why.contains("column name is varbinary(100): shorter than a lease name"),
            "{why}"
        );
        assert!(
            why.contains("column holder is varbinary(36): shorter than the store's holders"),
            "{why}"
        );
        assert_eq!(
            sql.unwrap(),
            "ALTER TABLE `leases` WAIT 5\n    \
             MODIFY name VARBINARY(255) NOT NULL,\n    \
             MODIFY holder VARBINARY(1024) NULL;"
        );
        // A collated, short holder: both said, one MODIFY.
        let (why, sql) =
            mismatch(mysql.verdict(&table("varbinary(255)", "varchar(36)", Dialect::MySql)));
        assert!(
            why.contains("compared by a collation") && why.contains("shorter"),
            "{why}"
        );
        assert_eq!(
            sql.unwrap(),
            "ALTER TABLE `leases` WAIT 5\n    MODIFY holder VARBINARY(1024) NULL;"
        );

        // SQLite ignores declared lengths.
        let sqlite = SchemaCheck::new(Dialect::Sqlite, &TableName::default());
        let short = rows(&[
            ("name", "varchar(10);NO;0;1"),
            ("holder", "varchar(10);YES;0;0"),
            ("fence", "integer;NO;0;0"),
            ("taken_at", "integer;NO;0;0"),
            ("expires_at", "integer;NO;0;0"),
        ]);
        assert!(sqlite.verdict(&short).is_ok());
    }

    #[test]
    fn mariadb_upgrade_keeps_a_holder_wider_than_the_stores() {
        let mysql = SchemaCheck::new(Dialect::MySql, &TableName::default());
        let holder = |facts: &str| {
            let (_, sql) = mismatch(mysql.verdict(&rows(&[
                ("name", "varbinary(255);NO;0;1"),
                ("holder", facts),
                ("fence", "bigint;NO;0;0"),
                ("taken_at", "datetime(6);NO;0;0"),
                ("expires_at", "datetime(6);NO;0;0"),
            ])));
            sql.unwrap()
        };
        // Made nullable: its 2048 bytes kept.
        assert_eq!(
            holder("varbinary(2048);NO;0;0"),
            "ALTER TABLE `leases` WAIT 5\n    MODIFY holder VARBINARY(2048) NULL;"
        );
        // 1500 characters of latin1: 1500 of UTF-8, then the 6000 bytes they may take.
        assert_eq!(
            holder("varchar(1500);NO;0;0;latin1"),
            "ALTER TABLE `leases` WAIT 5\n    \
             MODIFY holder VARCHAR(1500) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NULL;\n\
             ALTER TABLE `leases` WAIT 5\n    MODIFY holder VARBINARY(6000) NULL;"
        );
        // Wider than a row takes: as wide as one does.
        assert_eq!(
            holder("varchar(20000);NO;0;0;latin1"),
            "ALTER TABLE `leases` WAIT 5\n    \
             MODIFY holder VARCHAR(15000) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NULL;\n\
             ALTER TABLE `leases` WAIT 5\n    MODIFY holder VARBINARY(60000) NULL;"
        );
        // Narrower than the store's, in bytes or as text: the store's width.
        for facts in [
            "varbinary(16);NO;0;0",
            "varchar(255);YES;0;0;utf8mb4",
            "char(36);YES;0;0;latin1",
            "text;YES;0;0;latin1",
        ] {
            let sql = holder(facts);
            assert!(
                sql.ends_with("MODIFY holder VARBINARY(1024) NULL;"),
                "{facts}: {sql}"
            );
            assert!(
                !sql.contains("VARCHAR(") || sql.contains("VARCHAR(1024)"),
                "{facts}: {sql}"
            );
        }
    }

    #[test]
    fn column_names_match_as_each_database_matches_them() {
        let upper = |fence: &str, time: &str| {
            rows(&[
                ("NAME", "text;NO;0;1"),
                ("Holder", "text;YES;0;0"),
                ("FENCE", &format!("{fence};NO;0;0")),
                ("TAKEN_AT", &format!("{time};NO;0;0")),
                ("Expires_At", &format!("{time};NO;0;0")),
            ])
        };
        // MariaDB and SQLite compare column names regardless of case.
        let sqlite = SchemaCheck::new(Dialect::Sqlite, &TableName::default());
        sqlite.verdict(&upper("integer", "integer")).unwrap();
        assert!(
            sqlite
                .times_in_other_units(&upper("integer", "integer"))
                .is_some()
        );
        let mut binary = upper("bigint", "datetime(6)");
        binary[0].1 = "varbinary(255);NO;0;1".to_owned();
        binary[1].1 = "varbinary(1024);YES;0;0".to_owned();
        let mysql = SchemaCheck::new(Dialect::MySql, &TableName::default());
        mysql.verdict(&binary).unwrap();
        // Without the fence, it alone is added; an extra column in capitals is still not the
        // store's (a rebuild would drop it).
        let mut no_fence = upper("integer", "integer");
        no_fence.remove(2);
        let (_, sql) = mismatch(sqlite.verdict(&no_fence));
        assert_eq!(
            sql.unwrap(),
            "ALTER TABLE \"leases\" ADD COLUMN fence INTEGER NOT NULL DEFAULT 0;"
        );
        no_fence[1].1 = "text;NO;0;0".to_owned();
        no_fence.push(("NOTE".to_owned(), "text;YES;0;0".to_owned()));
        let (why, sql) = mismatch(sqlite.verdict(&no_fence));
        assert_eq!(sql, None);
        assert!(why.contains("that are not the store's (NOTE)"), "{why}");
        // On PostgreSQL a quoted "NAME" is another column than name.
        let postgres = SchemaCheck::new(Dialect::Postgres, &TableName::default());
        let (why, sql) = mismatch(postgres.verdict(&upper("bigint", TZ)));
        assert_eq!(sql, None);
        assert!(why.contains("column name is missing"), "{why}");
    }

    #[test]
    fn a_mariadb_time_set_on_every_update_loses_that_and_the_update_before_keeps_it() {
        let check = SchemaCheck::new(Dialect::MySql, &TableName::default());
        let table = |fence: &str, taken_at: &str, expires_at: &str| {
            rows(&[
                ("name", "varbinary(255);NO;0;1"),
                ("holder", "varbinary(1024);YES;0;0"),
                ("fence", fence),
                ("taken_at", taken_at),
                ("expires_at", expires_at),
            ])
        };
        let (why, sql) = mismatch(check.verdict(&table(
            "bigint;YES;0;0",
            "datetime(6) on update;NO;0;0",
            "datetime(6) on update;NO;0;0",
        )));
        assert!(
            why.contains("column taken_at is datetime(6) on update: MariaDB sets it"),
            "{why}"
        );
        assert!(
            why.contains("column expires_at is datetime(6) on update")
                && why.contains("would move its expiry there"),
            "{why}"
        );
        let sql = sql.unwrap();
        assert!(
            sql.contains(
                "UPDATE `leases` SET fence = 0, taken_at = taken_at, expires_at = expires_at \
                 WHERE fence IS NULL;"
            ),
            "{sql}"
        );
        assert!(
            sql.ends_with(
                "ALTER TABLE `leases` WAIT 5\n    \
                 MODIFY fence BIGINT NOT NULL,\n    \
                 MODIFY taken_at DATETIME(6) NOT NULL,\n    \
                 MODIFY expires_at DATETIME(6) NOT NULL;"
            ),
            "{sql}"
        );
        // A TIMESTAMP set on every update (older servers' default for the first one): made a
        // UTC DATETIME(6) by the same MODIFY, the UPDATE keeping the times all the same.
        let (why, sql) = mismatch(check.verdict(&table(
            "bigint;YES;0;0",
            "datetime(6);NO;0;0",
            "timestamp(0) on update;NO;0;0",
        )));
        assert!(why.contains("a TIMESTAMP is read and written"), "{why}");
        assert!(why.contains("would move its expiry there"), "{why}");
        let sql = sql.unwrap();
        assert!(
            sql.contains("expires_at = expires_at WHERE fence IS NULL;"),
            "{sql}"
        );
        assert_eq!(
            sql.matches("MODIFY expires_at DATETIME(6) NOT NULL")
                .count(),
            1,
            "{sql}"
        );
        // Without a time set on every update, the fence's UPDATE is as it was.
        let (_, sql) = mismatch(check.verdict(&table(
            "bigint;YES;0;0",
            "datetime(6);NO;0;0",
            "datetime(6);NO;0;0",
        )));
        assert!(
            sql.unwrap()
                .contains("UPDATE `leases` SET fence = 0 WHERE fence IS NULL;")
        );
    }

    #[test]
    fn a_mariadb_name_or_holder_of_another_charset_is_made_utf8_before_bytes() {
        let check = SchemaCheck::new(Dialect::MySql, &TableName::default());
        let table = |charset: &str| {
            rows(&[
                ("name", &format!("varchar(255);NO;0;1;{charset}")),
                ("holder", &format!("varchar(255);YES;0;0;{charset}")),
                ("fence", "bigint;NO;0;0"),
                ("taken_at", "datetime(6);NO;0;0"),
                ("expires_at", "datetime(6);NO;0;0"),
            ])
        };
        let (why, sql) = mismatch(check.verdict(&table("latin1")));
        assert!(
            why.contains("column name holds latin1 text: its bytes are not the UTF-8"),
            "{why}"
        );
        assert!(why.contains("column holder holds latin1 text"), "{why}");
        assert_eq!(
            sql.unwrap(),
            "ALTER TABLE `leases` WAIT 5\n    \
             MODIFY name VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,\n    \
             MODIFY holder VARCHAR(1024) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NULL;\n\
             ALTER TABLE `leases` WAIT 5\n    \
             MODIFY name VARBINARY(255) NOT NULL,\n    \
             MODIFY holder VARBINARY(1024) NULL;"
        );
        // UTF-8 text (and ASCII, its subset) keeps its bytes as they are.
        for charset in ["utf8mb4", "utf8mb3", "ascii"] {
            let (why, sql) = mismatch(check.verdict(&table(charset)));
            assert!(!why.contains("holds"), "{charset}: {why}");
            assert_eq!(
                sql.unwrap(),
                "ALTER TABLE `leases` WAIT 5\n    \
                 MODIFY name VARBINARY(255) NOT NULL,\n    \
                 MODIFY holder VARBINARY(1024) NULL;",
                "{charset}"
            );
        }
        // Bytes have no character set to convert; a type that is refused is not converted.
        let mut refused = table("latin1");
        refused[0].1 = "enum;NO;0;1;latin1".to_owned();
        let (why, sql) = mismatch(check.verdict(&refused));
        assert_eq!(sql, None);
        assert!(!why.contains("column name holds"), "{why}");
    }

    #[test]
    fn postgres_locks_the_table_before_the_updates_of_an_upgrade() {
        let check = SchemaCheck::new(Dialect::Postgres, &TableName::default());
        let nullable = rows(&[
            ("name", "text;NO;0;1"),
            ("holder", "text;YES;0;0"),
            ("fence", "bigint;YES;0;0"),
            ("taken_at", &format!("{TZ};NO;0;0")),
            ("expires_at", &format!("{TZ};NO;0;0")),
        ]);
        let (_, sql) = mismatch(check.verdict(&nullable));
        assert_eq!(
            sql.unwrap(),
            "SET LOCAL lock_timeout = '5s';\n\
             LOCK TABLE \"leases\" IN ACCESS EXCLUSIVE MODE;\n\
             UPDATE \"leases\" SET fence = 0 WHERE fence IS NULL;\n\
             ALTER TABLE \"leases\"\n    ALTER COLUMN fence SET NOT NULL;"
        );
    }

    #[test]
    fn sqlite_times_in_other_units_are_counted_and_made_milliseconds() {
        let check = SchemaCheck::new(Dialect::Sqlite, &TableName::default());
        let ours = rows(&[
            ("name", "text;NO;0;1"),
            ("holder", "text;YES;0;0"),
            ("fence", "integer;NO;0;0"),
            ("taken_at", "integer;NO;0;0"),
            ("expires_at", "integer;NO;0;0"),
            ("note", "text;YES;0;0"),
        ]);
        let query = check
            .times_in_other_units(&ours)
            .expect("SQLite counts its times");
        assert_eq!(
            query.sql(),
            "SELECT taken_at, expires_at FROM (\n    \
             SELECT 0 AS k, coalesce(sum((taken_at > 0 AND taken_at < 100000000000)), 0) AS \
             taken_at, coalesce(sum((expires_at > 0 AND expires_at < 100000000000)), 0) AS \
             expires_at FROM \"leases\"\n    \
             UNION ALL\n    \
             SELECT 1, coalesce(sum((taken_at >= 100000000000000)), 0), \
             coalesce(sum((expires_at >= 100000000000000)), 0) FROM \"leases\"\n\
             ) ORDER BY k"
        );
        assert!(query.params().is_empty());
        // Elsewhere the catalog says the unit; without the times, nothing to count.
        let postgres = SchemaCheck::new(Dialect::Postgres, &TableName::default());
        assert!(postgres.times_in_other_units(&ours).is_none());
        assert!(check.times_in_other_units(&ours[..4]).is_none());

        assert!(check.verdict_with_times(&ours, &[(0, 0)]).is_ok());
        assert!(check.verdict_with_times(&ours, &[(0, 0), (0, 0)]).is_ok());
        // Finer than milliseconds: refused, without SQL (only who wrote them knows the unit),
        // beside times in seconds too.
        for times in [[(0, 0), (0, 2)], [(1, 0), (0, 2)]] {
            let (why, sql) = mismatch(check.verdict_with_times(&ours, &times));
            assert!(
                why.contains(
                    "the times look finer than milliseconds (expires_at in 2 rows: 10^14 and \
                     above, microseconds or nanoseconds)"
                ),
                "{why}"
            );
            assert_eq!(sql, None, "{why}");
        }
        let (why, sql) = mismatch(check.verdict_with_times(&ours, &[(3, 1)]));
        assert!(
            why.contains(
                "the times look like Unix seconds (taken_at in 3 rows, expires_at in 1 row: above \
                 zero and below 10^11), and the store keeps milliseconds"
            ),
            "{why}"
        );
        // In place, extra column and all.
        assert_eq!(
            sql.unwrap(),
            "SAVEPOINT lease_upgrade;\n\
             UPDATE \"leases\" SET taken_at = CASE WHEN (taken_at > 0 AND taken_at < 100000000000) \
             THEN CAST(round(taken_at * 1000) AS INTEGER) ELSE taken_at END,\n    \
             expires_at = CASE WHEN (expires_at > 0 AND expires_at < 100000000000) THEN \
             CAST(round(expires_at * 1000) AS INTEGER) ELSE expires_at END\n    \
             WHERE (taken_at > 0 AND taken_at < 100000000000) OR (expires_at > 0 AND expires_at \
             < 100000000000);\n\
             RELEASE lease_upgrade;"
        );
        // With a missing fence, in the same transaction.
        let no_fence: Vec<_> = ours.iter().filter(|(c, _)| c != "fence").cloned().collect();
        let (_, sql) = mismatch(check.verdict_with_times(&no_fence, &[(0, 2)]));
        let sql = sql.unwrap();
        assert!(
            sql.starts_with(
                "SAVEPOINT lease_upgrade;\nALTER TABLE \"leases\" ADD COLUMN fence INTEGER NOT \
                 NULL DEFAULT 0;\nUPDATE \"leases\" SET taken_at"
            ) && sql.ends_with(";\nRELEASE lease_upgrade;"),
            "{sql}"
        );
        // With a rebuild, before the rows are copied.
        let mut rebuilt = no_fence[..4].to_vec();
        rebuilt[1].1 = "text;NO;0;0".to_owned();
        let (_, sql) = mismatch(check.verdict_with_times(&rebuilt, &[(1, 1)]));
        let sql = sql.unwrap();
        let update = sql.find("UPDATE \"leases\" SET taken_at").expect(&sql);
        assert!(update < sql.find("INSERT INTO").unwrap(), "{sql}");
        // The count is SQLite's alone.
        let pg_ours = rows(&[
            ("name", "text;NO;0;1"),
            ("holder", "text;YES;0;0"),
            ("fence", "bigint;NO;0;0"),
            ("taken_at", &format!("{TZ};NO;0;0")),
            ("expires_at", &format!("{TZ};NO;0;0")),
        ]);
        assert!(postgres.verdict_with_times(&pg_ours, &[(1, 1)]).is_ok());
    }
}
