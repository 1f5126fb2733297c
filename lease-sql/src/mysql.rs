//! MariaDB (10.5 and later): `?` placeholders, `DATETIME(6)` in UTC, `UTC_TIMESTAMP(6)` as the
//! clock (evaluated once per statement; the fenced check moves it on to the time it holds the
//! row's lock, which it may have waited for).
//!
//! Names and holders are `VARBINARY`, so they are compared byte for byte: no collation folds
//! case or pads spaces, and `'a'` and `'A '` are different leases.
//!
//! MySQL does not work: it has no `INSERT ... RETURNING`, which try-acquire needs to tell
//! "inserted" or "taken over" from "somebody else holds it" (the affected-rows count cannot,
//! with the `CLIENT_FOUND_ROWS` flag that sqlx and diesel set).

use crate::template::{Arg, DialectSql, Template};
use crate::{CommitMessage, NOT_HELD_MARKER, Param, TRANSACTION_ENDED_MARKER};

const NOW: &str = "UTC_TIMESTAMP(6)";

/// Microseconds since the Unix epoch of a `DATETIME(6)` expression in UTC.
fn micros(expr: &str) -> String {
    format!("TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {expr})")
}

/// The lease is free: nobody holds it, or its holder's lease has expired.
const FREE: &str = "holder IS NULL OR expires_at <= UTC_TIMESTAMP(6)";

pub(crate) fn sql(t: &str) -> DialectSql {
    // Fails, naming the marker, when the fenced transaction ended inside its work (see
    // `TransactionEnded`): the messages that end one begin with it.
    let ended = format!(
        "IF @@in_transaction = 0 THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{TRANSACTION_ENDED_MARKER}'; END IF"
    );
    // The same test as a statement of its own.
    let ended_probe = format!("BEGIN NOT ATOMIC\n    {ended};\nEND");
    // The expiry is compared with the time the row is read, once locked, not with the
    // statement's start (`UTC_TIMESTAMP` and `NOW` stay there): a check that waited for the
    // row's lock must find the lease expired if it expired meanwhile. `SYSDATE` is that time,
    // in the session's zone, so the statement sets the zone to UTC for itself: the check runs
    // on the caller's connection, whose zone may have summer time (two local times read across
    // its change are an hour off). It is the server's clock even where the session set
    // `@@timestamp` (which `UTC_TIMESTAMP` follows), and never earlier than the statement's
    // start (a clock stepped back, a `@@timestamp` ahead: the lease is found gone sooner, never
    // later). A server started with `--sysdate-is-now` compares with the start.
    let fence = format!(
        "SET STATEMENT time_zone = '+00:00' FOR\n\
         UPDATE {t} SET expires_at = expires_at + INTERVAL 1 MICROSECOND\n\
         WHERE name = ? AND holder = ? AND fence = ?\n    \
             AND expires_at > GREATEST({NOW}, SYSDATE(6))"
    );
    let columns = format!(
        "CONVERT(name USING utf8mb4), CONVERT(holder USING utf8mb4), fence, {}, {}, {}",
        micros("taken_at"),
        micros("expires_at"),
        micros(NOW)
    );
    DialectSql {
        create_table: format!(
            "CREATE TABLE IF NOT EXISTS {t} (\n    \
                name       VARBINARY(255) NOT NULL PRIMARY KEY,\n    \
                holder     VARBINARY(1024),\n    \
                fence      BIGINT NOT NULL,\n    \
                taken_at   DATETIME(6) NOT NULL,\n    \
                expires_at DATETIME(6) NOT NULL\n\
            ) ENGINE = InnoDB"
        ),
        // `ON DUPLICATE KEY UPDATE` decides under the row's exclusive lock. By default its
        // assignments run left to right and each sees the columns assigned before it; under
        // `sql_mode` `SIMULTANEOUS_ASSIGNMENT` (part of `ORACLE`) each sees the row as it was.
        // Every assignment means the same either way: fence, taken_at and holder test `FREE` on
        // the old holder and expiry; expires_at comes last and is set when `FREE` holds (on the
        // old row, or on the new holder and the old, passed expiry) or the row carries the
        // marker the earlier assignments left (our holder, taken at this statement's time: a
        // row released by force, its holder NULL and its expiry ahead, read left to right).
        //
        // The winner is read from `RETURNING` (MariaDB has it on `INSERT`, including the
        // duplicate-key path, where it returns the row as updated), never from the affected-rows
        // count: the row carries our holder id and this statement's time only if we took it.
        // Holder ids are new for every acquisition, so only the same id acquiring twice within
        // one microsecond could look like a win, and it would find its own lease.
        try_acquire: Template::new(
            format!(
                "INSERT INTO {t} (name, holder, fence, taken_at, expires_at)\n\
                 VALUES (?, ?, {clock}, {NOW}, {NOW} + INTERVAL ? MICROSECOND)\n\
                 ON DUPLICATE KEY UPDATE\n    \
                     fence = IF({FREE}, GREATEST(fence + 1, VALUES(fence)), fence),\n    \
                     taken_at = IF({FREE}, VALUES(taken_at), taken_at),\n    \
                     holder = IF({FREE}, VALUES(holder), holder),\n    \
                     expires_at = IF({FREE} OR (holder = VALUES(holder) AND taken_at = VALUES(taken_at)), VALUES(expires_at), expires_at)\n\
                 RETURNING fence, CAST(holder = ? AND taken_at = {NOW} AS SIGNED) AS won",
                clock = micros(NOW),
            ),
            &[Arg::Name, Arg::Holder, Arg::Micros, Arg::Holder],
        ),
        renew: Template::new(
            format!(
                "UPDATE {t} SET expires_at = GREATEST(expires_at, {NOW} + INTERVAL ? MICROSECOND)\n\
                 WHERE name = ? AND holder = ? AND expires_at > {NOW}"
            ),
            &[Arg::Micros, Arg::Name, Arg::Holder],
        ),
        // expires_at becomes the end of the minimum hold when that is still ahead, or now;
        // holder stays only when the hold is still ahead. Each reads taken_at, which neither
        // assigns, so the order of evaluation (above) does not matter. The hold counts from
        // the acquisition, or from now where the clock reads the acquisition ahead of it (the
        // clock stepped back since): without a hold the release always frees the lease.
        release: Template::new(
            format!(
                "UPDATE {t} SET\n    \
                     expires_at = GREATEST(LEAST(taken_at, {NOW}) + INTERVAL ? MICROSECOND, {NOW}),\n    \
                     holder = IF(LEAST(taken_at, {NOW}) + INTERVAL ? MICROSECOND > {NOW}, holder, NULL)\n\
                 WHERE name = ? AND holder = ? AND expires_at > {NOW}"
            ),
            &[Arg::Micros, Arg::Micros, Arg::Name, Arg::Holder],
        ),
        inspect: Template::new(
            format!("SELECT {columns} FROM {t} WHERE name = ? AND holder IS NOT NULL"),
            &[Arg::Name],
        ),
        // A binary column orders by bytes, as the memory store does.
        list: format!("SELECT {columns} FROM {t} WHERE holder IS NOT NULL ORDER BY name"),
        // A row set to the values it has is not written at all (no binary-log event, no Galera
        // write set), so the check moves expires_at by a microsecond.
        // A compound statement (MariaDB 10.1 and later, outside stored programs too) signals
        // the marker when the check matched no row; a multi-statement message stops at an
        // error, so the `COMMIT` runs only after a check that held. It first signals
        // `TRANSACTION_ENDED_MARKER` when no transaction is open any more (`ended`).
        fence_raising: Some(format!(
            "BEGIN NOT ATOMIC\n    \
                 {ended};\n    \
                 {fence};\n    \
                 IF ROW_COUNT() <> 1 THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{NOT_HELD_MARKER}'; END IF;\n\
             END"
        )),
        prepared_fence: None,
        unmatched_fence: None,
        snapshot_guard: None,
        commit_guard: None,
        commit_after_check: Some(CommitMessage::new(format!("{ended_probe};\nCOMMIT"), 2)),
        ended_probe: crate::EndedProbe::FailsWhenEnded(ended_probe),
        fence,
        prune: Template::new(
            format!(
                "DELETE FROM {t} WHERE expires_at < {NOW} - INTERVAL ? MICROSECOND AND fence < {}",
                micros(NOW)
            ),
            &[Arg::Micros],
        ),
    }
}

/// One multi-table `UPDATE` joining the pairs as a derived table. It answers only with a count
/// (see [`RenewManyResult::Count`](crate::RenewManyResult::Count)).
pub(crate) fn renew_many_sql(t: &str, pairs: usize) -> String {
    let mut rows = String::from("SELECT ? AS name, ? AS holder");
    for _ in 1..pairs {
        rows.push_str(" UNION ALL SELECT ?, ?");
    }
    format!(
        "UPDATE {t} AS l JOIN ({rows}) AS r ON l.name = r.name AND l.holder = r.holder\n\
         SET l.expires_at = GREATEST(l.expires_at, {NOW} + INTERVAL ? MICROSECOND)\n\
         WHERE l.expires_at > {NOW}"
    )
}

pub(crate) fn renew_many_params<'a>(pairs: &[(&'a str, &'a str)], micros: i64) -> Vec<Param<'a>> {
    pairs
        .iter()
        .flat_map(|&(name, holder)| [Param::text(name), Param::text(holder)])
        .chain([Param::Int(micros)])
        .collect()
}
