//! SQLite (3.42 and later, for `unixepoch('subsec')`; the bundled library is newer): numbered
//! `?n` placeholders, times as integer Unix milliseconds, and the clock read inside the
//! statement.
//!
//! SQLite gives one value for `'now'` throughout a statement, so every comparison and every
//! time written in one statement agree.

use std::time::Duration;

use crate::Param;
use crate::template::{Arg, DialectSql, Template};

/// How long a SQLite connection of a lease store waits for another connection's write to
/// finish before its statement fails with "database is locked".
pub const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// What every SQLite connection of a pool shared by concurrent tasks runs when it opens: the busy
/// timeout of [`SQLITE_BUSY_TIMEOUT`], so a writer waits for another instead of failing at once,
/// then the write-ahead log, so readers never wait for the writer (the timeout first: switching
/// the journal itself waits for other connections).
pub fn sqlite_pragmas() -> String {
    format!(
        "PRAGMA busy_timeout = {}; PRAGMA journal_mode = WAL;",
        SQLITE_BUSY_TIMEOUT.as_millis()
    )
}

/// The statement's time in whole Unix milliseconds. `round` rather than a plain cast, because
/// the seconds come as a floating-point number that may sit just below the millisecond.
pub(crate) const NOW: &str = "CAST(round(unixepoch('subsec') * 1000) AS INTEGER)";

pub(crate) fn sql(t: &str) -> DialectSql {
    // Durations arrive in microseconds like on every dialect; the table holds milliseconds.
    // The times are read as integers whatever the row holds: an adopted table's may be REAL (a
    // service that wrote `unixepoch('subsec') * 1000`, seconds with a fraction made
    // milliseconds by the upgrade), and a time too far out for microseconds becomes REAL when
    // multiplied; the cast truncates the fraction and holds the far one at the latest.
    let columns = format!(
        "name, holder, fence, CAST(taken_at * 1000 AS INTEGER), \
         CAST(expires_at * 1000 AS INTEGER), {NOW} * 1000"
    );
    DialectSql {
        create_table: format!(
            "CREATE TABLE IF NOT EXISTS {t} (\n    \
                name       TEXT NOT NULL PRIMARY KEY,\n    \
                holder     TEXT,\n    \
                fence      INTEGER NOT NULL,\n    \
                taken_at   INTEGER NOT NULL,\n    \
                expires_at INTEGER NOT NULL\n\
            )"
        ),
        // SQLite runs one writer at a time, so the upsert decides with the database to itself.
        try_acquire: Template::new(
            format!(
                "INSERT INTO {t} (name, holder, fence, taken_at, expires_at)\n\
                 VALUES (?1, ?2, {NOW} * 1000, {NOW}, {NOW} + ?3 / 1000)\n\
                 ON CONFLICT (name) DO UPDATE\n\
                 SET holder = excluded.holder, fence = max(fence + 1, excluded.fence), taken_at = excluded.taken_at, expires_at = excluded.expires_at\n\
                 WHERE holder IS NULL OR expires_at <= excluded.taken_at\n\
                 RETURNING fence, 1 AS won"
            ),
            &[Arg::Name, Arg::Holder, Arg::Micros],
        ),
        renew: Template::new(
            format!(
                "UPDATE {t} SET expires_at = max(expires_at, {NOW} + ?3 / 1000)\n\
                 WHERE name = ?1 AND holder = ?2 AND expires_at > {NOW}"
            ),
            &[Arg::Name, Arg::Holder, Arg::Micros],
        ),
        // The minimum hold is rounded up to the table's millisecond: a minimum, never cut
        // short (a hold of half a millisecond rounded down would free the lease at once). It
        // counts from the acquisition, or from now where the clock reads the acquisition ahead
        // of it (the clock stepped back since): without a hold the release always frees it.
        release: Template::new(
            format!(
                "UPDATE {t} SET\n    \
                     expires_at = max(min(taken_at, {NOW}) + (?3 + 999) / 1000, {NOW}),\n    \
                     holder = CASE WHEN min(taken_at, {NOW}) + (?3 + 999) / 1000 > {NOW} THEN holder END\n\
                 WHERE name = ?1 AND holder = ?2 AND expires_at > {NOW}"
            ),
            &[Arg::Name, Arg::Holder, Arg::Micros],
        ),
        inspect: Template::new(
            format!("SELECT {columns} FROM {t} WHERE name = ?1 AND holder IS NOT NULL"),
            &[Arg::Name],
        ),
        // The default BINARY collation orders by bytes, as the memory store does.
        list: format!("SELECT {columns} FROM {t} WHERE holder IS NOT NULL ORDER BY name"),
        // The first write of a deferred transaction takes the database's write lock, so the
        // transaction cannot go on with a snapshot older than the latest takeover. An
        // `UPDATE` takes it whatever it assigns, and counts the row it matched, so the check
        // leaves the expiry as it is: a step per check would add up (a renewal never moves
        // an expiry back), at a few thousand checks a second faster than the clock.
        fence: format!(
            "UPDATE {t} SET expires_at = expires_at\n\
             WHERE name = ?1 AND holder = ?2 AND fence = ?3 AND expires_at > {NOW}"
        ),
        fence_raising: None,
        prepared_fence: None,
        unmatched_fence: None,
        snapshot_guard: None,
        commit_guard: None,
        commit_after_check: None,
        ended_probe: crate::EndedProbe::BeginsWhenEnded,
        prune: Template::new(
            format!(
                "DELETE FROM {t} WHERE expires_at < {NOW} - ?1 / 1000 AND fence < {NOW} * 1000"
            ),
            &[Arg::Micros],
        ),
    }
}

/// One `UPDATE ... FROM (VALUES ...) RETURNING` for the batch: `?1` is the TTL, then each pair.
pub(crate) fn renew_many_sql(t: &str, pairs: usize) -> String {
    let rows = (0..pairs)
        .map(|i| format!("(?{}, ?{})", 2 * i + 2, 2 * i + 3))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "UPDATE {t} AS l SET expires_at = max(expires_at, {NOW} + ?1 / 1000)\n\
         FROM (VALUES {rows}) AS r\n\
         WHERE l.name = r.column1 AND l.holder = r.column2 AND l.expires_at > {NOW}\n\
         RETURNING name, holder"
    )
}

pub(crate) fn renew_many_params<'a>(pairs: &[(&'a str, &'a str)], micros: i64) -> Vec<Param<'a>> {
    std::iter::once(Param::Int(micros))
        .chain(
            pairs
                .iter()
                .flat_map(|&(name, holder)| [Param::text(name), Param::text(holder)]),
        )
        .collect()
}
