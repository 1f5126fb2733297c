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

/// A missing fence alone is added in place. Anything else needs the table rebuilt (SQLite
/// cannot change a column), in one transaction: the store's table made anew beside it, the
/// rows copied (a missing fence as `0`, a missing time as the upgrade's), the old table
/// dropped and the new one renamed. `None` when the table has
/// columns of its own, which a rebuild would drop.
pub(super) fn upgrade(
    table: &TableName,
    fixes: &[Fix],
    has_fence: bool,
    extra: bool,
) -> Option<String> {
    let quoted = table.quoted('"');
    if fixes == [Fix::AddFence] {
        return Some(format!(
            "ALTER TABLE {quoted} ADD COLUMN fence INTEGER NOT NULL DEFAULT 0;"
        ));
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
         {create};\n\
         INSERT INTO {new_quoted} (name, holder, fence, taken_at, expires_at)\n    \
             SELECT name, holder, {fence}, coalesce(taken_at, {now}), coalesce(expires_at, {now})\n    \
             FROM {quoted};\n\
         DROP TABLE {quoted};\n\
         ALTER TABLE {new_quoted} RENAME TO \"{}\";\n\
         COMMIT;",
        table.table()
    ))
}
