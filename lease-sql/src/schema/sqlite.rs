//! SQLite's schema check: the catalog query (table-valued pragmas) and which types fit, by
//! SQLite's type affinity.

use super::{Column, Fit, Fix};
use crate::TableName;

/// One row per column of the table `?1` (in the attached schema `?2` when given): its name and
/// `type;nullable;default;key`, the type followed by ` collate <name>` where the column's key
/// compares by a collation (`NOCASE`, `RTRIM`) rather than bytes. `key` says a unique index (the primary key's among them) has
/// this column alone, over every row: a partial one (`WHERE ...`) is no conflict target for the
/// store's `ON CONFLICT (name)`. `default` is also `1` for a column that is the table's rowid
/// (`id INTEGER PRIMARY KEY`, `NOT NULL` or not), which SQLite fills itself on an insert that
/// leaves it out: declared `INTEGER` exactly, the primary key alone, and without an index of
/// its own (which a `WITHOUT ROWID` table's, or an `INTEGER PRIMARY KEY DESC`, has: those are
/// no rowid, and need a value).
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
    // The collation of a unique index on the column alone that compares otherwise than byte
    // for byte (`name TEXT COLLATE NOCASE PRIMARY KEY`, or such an index beside a binary
    // key): names that differ in case collide there. Appended to the type as
    // ` collate nocase`. Collation names keep the case they were written in.
    let collated_key = format!(
        "SELECT ' collate ' || lower(x.coll) FROM {list} AS i, pragma_index_xinfo(i.name{schema}) AS x\n           \
         WHERE i.\"unique\" AND x.key = 1 AND x.name = c.name AND upper(x.coll) <> 'BINARY'\n               \
             AND (SELECT count(*) FROM pragma_index_info(i.name{schema})) = 1\n           \
         LIMIT 1"
    );
    format!(
        "SELECT c.name,\n       \
             lower(c.type) || coalesce(({collated_key}), '')\n       \
             || ';' || CASE WHEN c.\"notnull\" THEN 'NO' ELSE 'YES' END || ';' ||\n       \
             CASE WHEN c.dflt_value IS NOT NULL OR (\n           \
                 lower(c.type) = 'integer' AND c.pk = 1\n               \
                 AND (SELECT count(*) FROM {table} AS p WHERE p.pk > 0) = 1\n               \
                 AND NOT EXISTS (SELECT 1 FROM {list} AS i WHERE i.origin = 'pk')\n       \
             ) THEN '1' ELSE '0' END || ';' ||\n       \
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

/// The smallest time that the check reads as finer than milliseconds: 10^14 milliseconds is
/// the year 5138, 10^14 microseconds May 1973. A time from it on is in microseconds or
/// nanoseconds, which the store's statements would read as millennia ahead: such a lease
/// would never expire, and a pruned name's next fence would fall below its last.
const FINER_FROM: i64 = 100_000_000_000_000;

/// Whether `column` holds a time that looks finer than milliseconds, as SQL.
fn finer(column: &str) -> String {
    format!("({column} >= {FINER_FROM})")
}

/// How many rows of the table `quoted` hold a `taken_at`, and how many an `expires_at`, that
/// looks like seconds, then the same for times that look finer than milliseconds: two rows of
/// two integers, in that order. It reads the table, not the catalog (SQLite keeps no unit),
/// and only where both columns are there.
pub(super) fn time_units(quoted: &str) -> String {
    format!(
        "SELECT taken_at, expires_at FROM (\n    \
             SELECT 0 AS k, coalesce(sum({}), 0) AS taken_at, coalesce(sum({}), 0) AS expires_at \
             FROM {quoted}\n    \
             UNION ALL\n    \
             SELECT 1, coalesce(sum({}), 0), coalesce(sum({}), 0) FROM {quoted}\n\
         ) ORDER BY k",
        in_seconds("taken_at"),
        in_seconds("expires_at"),
        finer("taken_at"),
        finer("expires_at")
    )
}

/// The `UPDATE` that makes every time in seconds milliseconds, row by row and column by
/// column: a time already in milliseconds, zero or negative is kept, so running it twice
/// changes nothing more. Seconds with a fraction (`unixepoch('subsec')`) become whole
/// milliseconds, rounded, as the store writes them.
fn to_milliseconds(quoted: &str) -> String {
    let scaled = |column: &str| {
        format!(
            "{column} = CASE WHEN {} THEN CAST(round({column} * 1000) AS INTEGER) ELSE {column} END",
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
/// `TEXT` (and no `INT`) stores text. A ` collate <name>` the catalog query appended (a key
/// that compares by a collation) is no part of the type.
pub(super) fn fit(column: Column, data_type: &str) -> Fit {
    let (data_type, collated) = match data_type.split_once(" collate ") {
        Some((declared, _)) => (declared, true),
        None => (data_type, false),
    };
    let integer = data_type.contains("int");
    let text = !integer
        && ["char", "clob", "text"]
            .iter()
            .any(|t| data_type.contains(t));
    match column {
        // Names that differ in case (or trailing spaces) would be one lease, and a renewal's
        // `RETURNING name` would answer the spelling the row keeps, not the one renewed.
        Column::Name if text && collated => Fit::Upgrade(Fix::BinaryName),
        Column::Name | Column::Holder if text => Fit::Fits,
        Column::Name | Column::Holder => Fit::Wrong("TEXT"),
        Column::Fence | Column::TakenAt | Column::ExpiresAt if integer => Fit::Fits,
        Column::Fence => Fit::Wrong("INTEGER"),
        Column::TakenAt | Column::ExpiresAt => Fit::Wrong("INTEGER (Unix milliseconds)"),
    }
}

/// The savepoint an upgrade of more than one statement runs in.
const SAVEPOINT: &str = "lease_upgrade";

/// The first line of a rebuild's script. A failed statement does not end a SQLite transaction,
/// and the `sqlite3` shell goes on to the next statement unless told to stop (`-bail`): past a
/// failed copy (a table of the new one's name already there, a row the new key refuses) the
/// rest would drop the table it copied from, leases and all, and commit.
pub(super) const STOP_AT_FIRST_ERROR: &str = "-- Run this as a whole that stops at its first \
     error (sqlite3 -bail, or a migration): past a failed statement the rest would still drop the \
     table.";

/// A missing fence alone is added in place, and times in seconds are made milliseconds in
/// place (with a missing fence, in one transaction). Anything else needs the table rebuilt
/// (SQLite cannot change a column), in one transaction: a missing fence added in place, times
/// in seconds made milliseconds, the store's table made anew beside it, the rows copied (a
/// `NULL` fence as `0`, a missing time as the upgrade's), the old table dropped and the new one
/// renamed, after a comment that says to run it so that it stops at its first error
/// ([`STOP_AT_FIRST_ERROR`]). `None` when a rebuild is needed and the table has columns of its
/// own, which it would drop.
///
/// The transaction is a savepoint (`SAVEPOINT lease_upgrade` to `RELEASE lease_upgrade`), not
/// `BEGIN IMMEDIATE` to `COMMIT`: the SQL is printed for migrations, and sqlx's and diesel's
/// migrations run each in a transaction of their own, inside which a `BEGIN` fails. A savepoint
/// works both ways: inside a transaction it nests in it (the migration's commits or rolls back
/// the whole), outside any it is a transaction of its own, committed by its `RELEASE`. Every
/// script's first statement writes (`ALTER TABLE`, `UPDATE`, `CREATE TABLE`), so it takes the
/// database's write lock, waiting for it by the busy timeout, before it reads anything, as
/// `BEGIN IMMEDIATE` would: the rows it copies are the latest, and no writer comes between the
/// copy and the rename. Removing the savepoint to run the statements one by one would lose
/// that: a lease written between the copy and the `DROP TABLE` would be lost.
///
/// Several instances may upgrade at once, each with the script it made from the shape it read
/// ([`SqlStore::upgrade`](crate::SqlStore::upgrade)), and the second runs once the first has
/// committed. A script never rests on the shape it was made from where that would lose
/// anything: the rebuild of a table without a fence does not copy its fences as `0` (which
/// would reset every fence the first upgrade's store handed out since, and let an old holder's
/// fenced writes through), it adds the fence in place under the write lock, then copies
/// `coalesce(fence, 0)`: on a table that has a fence by then the `ALTER TABLE` fails (a
/// duplicate column), and the transaction with it; and times in seconds are scaled only where
/// they still look like seconds. (Choosing the copy's fence by the table's shape in the script
/// itself is not possible: a `SELECT` that names a missing column fails to prepare.)
pub(super) fn upgrade(
    table: &TableName,
    fixes: &[Fix],
    has_fence: bool,
    extra: bool,
) -> Option<String> {
    let quoted = table.quoted('"');
    let add_fence = format!("ALTER TABLE {quoted} ADD COLUMN fence INTEGER NOT NULL DEFAULT 0;");
    if fixes == [Fix::AddFence] {
        return Some(add_fence);
    }
    let add_fence = if has_fence {
        String::new()
    } else {
        format!("{add_fence}\n")
    };
    let scale = if fixes.contains(&Fix::MillisecondTimes) {
        format!("{}\n", to_milliseconds(&quoted))
    } else {
        String::new()
    };
    let begin = format!("SAVEPOINT {SAVEPOINT};\n");
    let end = format!("RELEASE {SAVEPOINT};");
    if fixes
        .iter()
        .all(|fix| matches!(fix, Fix::AddFence | Fix::MillisecondTimes))
    {
        return Some(format!("{begin}{add_fence}{scale}{end}"));
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
    // A lease without a time gets the upgrade's: without an expiry, it is free from then on.
    let now = crate::sqlite::NOW;
    Some(format!(
        "{STOP_AT_FIRST_ERROR}\n{begin}{add_fence}{scale}{create};\n\
         INSERT INTO {new_quoted} (name, holder, fence, taken_at, expires_at)\n    \
             SELECT name, holder, coalesce(fence, 0), coalesce(taken_at, {now}), coalesce(expires_at, {now})\n    \
             FROM {quoted};\n\
         DROP TABLE {quoted};\n\
         ALTER TABLE {new_quoted} RENAME TO \"{}\";\n\
         {end}",
        table.table()
    ))
}
