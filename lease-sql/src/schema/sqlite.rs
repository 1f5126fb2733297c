//! SQLite's schema check: the catalog query (table-valued pragmas) and which types fit, by
//! SQLite's type affinity.

use super::{Column, Fit, Fix};
use crate::TableName;

/// One row per column of the table `?1` (in the attached schema `?2` when given): its name and
/// `type;nullable;default;key`. `key` says a unique index (the primary key's among them) has
/// this column alone, over every row: a partial one (`WHERE ...`) is no conflict target for the
/// store's `ON CONFLICT (name)`.
pub(super) fn columns(schema: bool) -> String {
    let (table, index) = if schema {
        (
            "pragma_table_info(?1, ?2)",
            ("pragma_index_list(?1, ?2)", ", ?2"),
        )
    } else {
        ("pragma_table_info(?1)", ("pragma_index_list(?1)", ""))
    };
    let (list, schema) = index;
    format!(
        "SELECT c.name,\n       \
             lower(c.type) || ';' || CASE WHEN c.\"notnull\" THEN 'NO' ELSE 'YES' END || ';' ||\n       \
             CASE WHEN c.dflt_value IS NOT NULL THEN '1' ELSE '0' END || ';' ||\n       \
             CASE WHEN EXISTS (\n           \
                 SELECT 1 FROM {list} AS i\n           \
                 WHERE i.\"unique\" AND NOT i.partial\n               \
                     AND (SELECT count(*) FROM pragma_index_info(i.name{schema})) = 1\n               \
                     AND (SELECT ii.name FROM pragma_index_info(i.name{schema}) AS ii) = c.name\n       \
             ) THEN '1' ELSE '0' END\n\
         FROM {table} AS c\n\
         ORDER BY c.cid"
    )
}

/// The largest Unix time in seconds that the check tells from milliseconds: 10^11 seconds is
/// the year 5138, 10^11 milliseconds March 1973. A time above zero and below it is in seconds
/// (`unixepoch()`, `strftime('%s')`), which the store's statements, comparing with
/// milliseconds, would read as long past.
const SECONDS_BELOW: i64 = 100_000_000_000;

/// Whether `column` holds a time that looks like seconds, as SQL.
fn in_seconds(column: &str) -> String {
    format!("({column} > 0 AND {column} < {SECONDS_BELOW})")
}

/// How many rows of the table `quoted` hold a `taken_at`, and how many an `expires_at`, that
/// looks like seconds: one row of two integers. It reads the table, not the catalog (SQLite
/// keeps no unit), and only where both columns are there.
pub(super) fn seconds(quoted: &str) -> String {
    format!(
        "SELECT coalesce(sum({}), 0), coalesce(sum({}), 0) FROM {quoted}",
        in_seconds("taken_at"),
        in_seconds("expires_at")
    )
}

/// The `UPDATE` that makes every time in seconds milliseconds, row by row and column by
/// column: a time already in milliseconds, zero or negative is kept, so running it twice
/// changes nothing more.
fn to_milliseconds(quoted: &str) -> String {
    let scaled = |column: &str| {
        format!(
            "{column} = CASE WHEN {} THEN {column} * 1000 ELSE {column} END",
            in_seconds(column)
        )
    };
    format!(
        "UPDATE {quoted} SET {},\n    {}\n    WHERE {} OR {};",
        scaled("taken_at"),
        scaled("expires_at"),
        in_seconds("taken_at"),
        in_seconds("expires_at")
    )
}

/// By affinity: a declared type holding `INT` stores integers, one holding `CHAR`, `CLOB` or
/// `TEXT` (and no `INT`) stores text.
pub(super) fn fit(column: Column, data_type: &str) -> Fit {
    let integer = data_type.contains("int");
    let text = !integer
        && ["char", "clob", "text"]
            .iter()
            .any(|t| data_type.contains(t));
    match column {
        Column::Name | Column::Holder if text => Fit::Fits,
        Column::Name | Column::Holder => Fit::Wrong("TEXT"),
        Column::Fence | Column::TakenAt | Column::ExpiresAt if integer => Fit::Fits,
        Column::Fence => Fit::Wrong("INTEGER"),
        Column::TakenAt | Column::ExpiresAt => Fit::Wrong("INTEGER (Unix milliseconds)"),
    }
}

/// A missing fence alone is added in place, and times in seconds are made milliseconds in
/// place (with a missing fence, in one transaction). Anything else needs the table rebuilt
/// (SQLite cannot change a column), in one transaction: times in seconds made milliseconds, the
/// store's table made anew beside it, the rows copied (a missing fence as `0`, a missing time
/// as the upgrade's), the old table dropped and the new one renamed. `None` when a rebuild is
/// needed and the table has columns of its own, which it would drop.
pub(super) fn upgrade(
    table: &TableName,
    fixes: &[Fix],
    has_fence: bool,
    extra: bool,
) -> Option<String> {
    let quoted = table.quoted('"');
    let add_fence = format!("ALTER TABLE {quoted} ADD COLUMN fence INTEGER NOT NULL DEFAULT 0;");
    let scale = if fixes.contains(&Fix::MillisecondTimes) {
        format!("{}\n", to_milliseconds(&quoted))
    } else {
        String::new()
    };
    if fixes == [Fix::AddFence] {
        return Some(add_fence);
    }
    if fixes
        .iter()
        .all(|fix| matches!(fix, Fix::AddFence | Fix::MillisecondTimes))
    {
        let add_fence = if fixes.contains(&Fix::AddFence) {
            format!("{add_fence}\n")
        } else {
            String::new()
        };
        return Some(format!("BEGIN IMMEDIATE;\n{add_fence}{scale}COMMIT;"));
    }
    if extra {
        return None;
    }
    let new_table = format!("{}_upgrade", table.table());
    let new_quoted = match table.schema() {
        Some(schema) => format!("\"{schema}\".\"{new_table}\""),
        None => format!("\"{new_table}\""),
    };
    let create = crate::sqlite::sql(&new_quoted)
        .create_table
        .replacen(" IF NOT EXISTS", "", 1);
    let fence = if has_fence { "coalesce(fence, 0)" } else { "0" };
    // A lease without a time gets the upgrade's: without an expiry, it is free from then on.
    let now = crate::sqlite::NOW;
    Some(format!(
        "BEGIN IMMEDIATE;\n\
         {scale}{create};\n\
         INSERT INTO {new_quoted} (name, holder, fence, taken_at, expires_at)\n    \
             SELECT name, holder, {fence}, coalesce(taken_at, {now}), coalesce(expires_at, {now})\n    \
             FROM {quoted};\n\
         DROP TABLE {quoted};\n\
         ALTER TABLE {new_quoted} RENAME TO \"{}\";\n\
         COMMIT;",
        table.table()
    ))
}
