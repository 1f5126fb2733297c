//! PostgreSQL: `$n` placeholders, `timestamptz` columns, `statement_timestamp()` as the clock.
//!
//! The clock is `statement_timestamp()` rather than `now()`: `now()` is the start of the
//! transaction, which is only the statement's own time when the statement runs on its own.
//! `statement_timestamp()` is the statement's time even inside a transaction, and stays the same
//! for the whole statement. The fenced check alone reads `clock_timestamp()`, the time once it
//! holds the row's lock, which it may have waited for.

use crate::snapshot_isolation::{snapshot_branches, snapshot_guard};
use crate::template::{Arg, DialectSql, Template};
use crate::transaction_ended::{postgres_branch, postgres_guard};
use crate::{CommitMessage, NOT_HELD_MARKER, Param, PreparedFence, SNAPSHOT_PREDATES_MARKER};

const NOW: &str = "statement_timestamp()";

/// Microseconds since the Unix epoch of a `timestamptz` expression. `extract` gives an exact
/// `numeric` (PostgreSQL 14 and later), so the cast only drops nothing.
fn micros(expr: &str) -> String {
    format!("(extract(epoch FROM {expr}) * 1000000)::int8")
}

/// [`micros`] of a time the table holds, within `int8`: a table adopted from another service
/// may hold `'infinity'` (its "held until released") or `'-infinity'`, which no `int8` holds,
/// and would fail every read of the table; they read as the latest and earliest times the
/// microseconds hold. Only reads go through this: every statement that decides compares the
/// `timestamptz` values themselves, where `'infinity'` keeps a lease held until it is released.
fn stored_micros(column: &str) -> String {
    format!(
        "LEAST(GREATEST(extract(epoch FROM {column}) * 1000000, {min}), {max})::int8",
        min = i64::MIN,
        max = i64::MAX
    )
}

/// A duration of `$n` microseconds. The `int8` becomes `float8` for the multiplication, exact
/// below 2^53 microseconds (285 years).
fn interval(param: u8) -> String {
    format!("${param}::int8 * interval '1 microsecond'")
}

pub(crate) fn sql(t: &str) -> DialectSql {
    // The expiry is read in `RETURNING`, after the row is locked, not in the `WHERE`: under a
    // snapshot (`REPEATABLE READ`, `SERIALIZABLE`) the `WHERE` reads the row as the snapshot
    // saw it, and an expiry that a renewal has pushed back since would match no row there,
    // reporting a lease still held as gone. Matched on holder and fence alone, the row is
    // locked first, so a renewal since the snapshot fails the statement with a serialization
    // failure, and otherwise `RETURNING` reads the row's latest version (moved on by the
    // microsecond the check adds).
    let update = format!(
        "UPDATE {t} SET expires_at = expires_at + interval '1 microsecond'\n\
         WHERE name = $1::text AND holder = $2::text AND fence = $3::int8"
    );
    // Compared with the time it is read, not the statement's: a check that waited for the
    // row's lock (held by a fenced transaction checked at its start, a console) must find the
    // lease expired if it expired meanwhile.
    let live = "expires_at - interval '1 microsecond' > clock_timestamp()";
    // A lease past its expiry makes the cast fail, naming the marker; `name` is not a constant,
    // so the planner cannot fold the `ELSE` branch into an error of its own.
    let fence = format!(
        "{update}\n\
         RETURNING CAST(CASE WHEN {live} THEN '1' ELSE '{NOT_HELD_MARKER}' || left(name, 0) END AS int)"
    );
    // The fenced commit's check: the cast fails, naming the marker, when the check matched no
    // row or an expired one; the aggregates are not constants, so the planner cannot fold the
    // `ELSE` branch into an error of its own. `first` goes before that test: the prepared check
    // at the commit first fails when the work ended the transaction (`TransactionEnded`), in
    // the same statement, so that the guard costs the commit no statement of its own. Its
    // `UPDATE` runs first all the same, so there it is also gated on the transaction's being
    // open (`gate`, a test without a column, which the planner runs once, before the scan):
    // once the work ended the transaction, the check must not wait for the lease's row, held
    // by a new holder, and answer a lock timeout as a failure that committed nothing.
    let checked_after = |gate: &str, first: &str| {
        format!(
            "WITH checked AS ({update}{gate} RETURNING {live} AS live)\n\
             SELECT CAST(CASE {first}WHEN count(*) = 1 AND bool_and(live) THEN '1' ELSE '{NOT_HELD_MARKER}' END AS int) \
             FROM checked"
        )
    };
    let checked = checked_after("", "");
    let checked_at_commit = checked_after(
        " AND statement_timestamp() <> transaction_timestamp()",
        &format!("{} ", postgres_branch()),
    );
    // Why `fence` matched no row, asked in the same transaction: under `READ COMMITTED`, or
    // when the row holds a fence as great as the lease's (taken over or released: fences only
    // grow), the lease is gone; under a snapshot that shows an older fence, or no row, the
    // snapshot was taken before the lease was acquired, and the cast fails naming
    // `SNAPSHOT_PREDATES_MARKER` and the level (not a constant, so never folded).
    let level = "current_setting('transaction_isolation')";
    let unmatched_fence = format!(
        "SELECT CAST(CASE WHEN {level} IN ('read committed', 'read uncommitted')\n    \
             OR EXISTS (SELECT 1 FROM {t} WHERE name = $1::text AND fence >= $2::int8) THEN '1'\n    \
             ELSE '{SNAPSHOT_PREDATES_MARKER}' || {level} END AS int)"
    );
    let guard = snapshot_guard();
    let ended = postgres_guard();
    // The text check with the commit is preceded by both guards in one statement: the ended
    // transaction's first, since once the work ended it the message runs at the session's
    // default isolation level, where the snapshot guard would answer that nothing committed.
    let commit_guard = format!(
        "SELECT CAST(CASE {} {} END AS int)",
        postgres_branch(),
        snapshot_branches()
    );
    let columns = format!(
        "name, holder, fence, {}, {}, {}",
        stored_micros("taken_at"),
        stored_micros("expires_at"),
        micros(NOW)
    );
    DialectSql {
        create_table: format!(
            "CREATE TABLE IF NOT EXISTS {t} (\n    \
                name       text COLLATE \"C\" NOT NULL PRIMARY KEY,\n    \
                holder     text,\n    \
                fence      bigint NOT NULL,\n    \
                taken_at   timestamptz NOT NULL,\n    \
                expires_at timestamptz NOT NULL\n\
            )"
        ),
        // The `WHERE NOT EXISTS` guard reads the row from the statement's snapshot first: when
        // the lease is held (the common, contended case) nothing is inserted, so the statement
        // takes no row lock, gets no transaction id and writes no WAL, and its commit waits for
        // no flush. When the snapshot shows the lease free, the upsert decides again under the
        // row lock with the `DO UPDATE ... WHERE`, which sees the latest committed row: two
        // callers can never both win. A guard that misses a lease released a moment ago answers
        // "held", which was true when the snapshot was taken.
        try_acquire: Template::new(
            format!(
                "INSERT INTO {t} AS l (name, holder, fence, taken_at, expires_at)\n\
                 SELECT $1::text, $2::text, {clock}, {NOW}, {NOW} + {ttl}\n\
                 WHERE NOT EXISTS (\n    \
                     SELECT 1 FROM {t} AS held\n    \
                     WHERE held.name = $1::text AND held.holder IS NOT NULL AND held.expires_at > {NOW}\n\
                 )\n\
                 ON CONFLICT (name) DO UPDATE\n\
                 SET holder = excluded.holder, fence = GREATEST(l.fence + 1, excluded.fence), taken_at = excluded.taken_at, expires_at = excluded.expires_at\n\
                 WHERE l.holder IS NULL OR l.expires_at <= excluded.taken_at\n\
                 RETURNING l.fence, 1::int8 AS won",
                ttl = interval(3),
                clock = micros(NOW),
            ),
            &[Arg::Name, Arg::Holder, Arg::Micros],
        ),
        renew: Template::new(
            format!(
                "UPDATE {t} SET expires_at = GREATEST(expires_at, {NOW} + {ttl})\n\
                 WHERE name = $1::text AND holder = $2::text AND expires_at > {NOW}",
                ttl = interval(3)
            ),
            &[Arg::Name, Arg::Holder, Arg::Micros],
        ),
        // The minimum hold counts from the acquisition, or from now where the clock reads the
        // acquisition ahead of it (the clock stepped back since): without a hold the release
        // always frees the lease.
        release: Template::new(
            format!(
                "UPDATE {t} SET\n    \
                     expires_at = GREATEST(LEAST(taken_at, {NOW}) + {hold}, {NOW}),\n    \
                     holder = CASE WHEN LEAST(taken_at, {NOW}) + {hold} > {NOW} THEN holder END\n\
                 WHERE name = $1::text AND holder = $2::text AND expires_at > {NOW}",
                hold = interval(3)
            ),
            &[Arg::Name, Arg::Holder, Arg::Micros],
        ),
        inspect: Template::new(
            format!("SELECT {columns} FROM {t} WHERE name = $1::text AND holder IS NOT NULL"),
            &[Arg::Name],
        ),
        // `COLLATE "C"` orders by bytes, as the memory store does, whatever the table's collation.
        list: format!(
            "SELECT {columns} FROM {t} WHERE holder IS NOT NULL ORDER BY name COLLATE \"C\""
        ),
        prepared_fence: Some(PreparedFence::new(
            &checked,
            &checked_at_commit,
            &guard,
            &ended,
        )),
        snapshot_guard: Some(guard),
        commit_guard: Some(commit_guard),
        // The guard also fails in a transaction a failed statement aborted, where a `COMMIT`
        // alone would answer `ROLLBACK` without an error.
        commit_after_check: Some(CommitMessage::new(format!("{ended};\nCOMMIT"), 2)),
        ended_probe: crate::EndedProbe::FailsWhenEnded(ended.clone()),
        fence_raising: Some(checked),
        fence,
        unmatched_fence: Some(unmatched_fence),
        prune: Template::new(
            format!(
                "DELETE FROM {t} WHERE expires_at < {NOW} - {} AND fence < {}",
                interval(1),
                micros(NOW)
            ),
            &[Arg::Micros],
        ),
    }
}

/// The release statement that also tells listeners, when it frees the lease: the same update
/// as `release` and, for each row it frees (not one a minimum hold keeps taken),
/// `pg_notify(channel, name)`. The notification is sent when the statement's implicit
/// transaction commits, so a listener never hears of a release that did not happen. The text
/// cast only gives the column a type every driver reads; nobody reads it.
pub(crate) fn release_notifying(release: &Template, channel_literal: &str) -> Template {
    Template::new(
        format!(
            "{}\nRETURNING (CASE WHEN holder IS NULL THEN pg_notify({channel_literal}, name) END)::text",
            release.sql
        ),
        release.args,
    )
}

/// The channel of `table`'s release notifications: `lease:<table>`, or where that is longer
/// than PostgreSQL's 63-byte limit on channel names, the start of it and a hash of the whole.
pub(crate) fn release_channel(table: &str) -> String {
    const LIMIT: usize = 63;
    let channel = format!("lease:{table}");
    if channel.len() <= LIMIT {
        return channel;
    }
    // FNV-1a: stable across builds and platforms, unlike the standard library's hasher.
    let hash = table.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    // Table names are ASCII, so any byte index is a character boundary.
    format!("{}~{hash:016x}", &channel[..LIMIT - 17])
}

/// `LISTEN` on `channel`, a table's release channel
/// ([`Statements::release_channel`](crate::Statements::release_channel)), quoted as an
/// identifier: for a driver that listens with a statement of its own (lease-diesel; sqlx's
/// `PgListener` quotes the channel itself). Sent on a connection outside the store's pool, which
/// then receives the releases' notifications until it closes.
pub fn listen(channel: &str) -> String {
    format!("LISTEN \"{}\"", channel.replace('"', "\"\""))
}

/// The DDL under a transaction-level advisory lock, in one message that is one implicit
/// transaction, so the lock is held until the table exists. The key is the one every lease
/// store takes for setup, whatever its driver, so their setups wait for each other too.
pub(crate) fn setup(create_table: &str) -> String {
    format!("SELECT pg_advisory_xact_lock(hashtext('lease-sqlx setup'));\n{create_table};")
}

/// One statement for any number of pairs: the names and the holders travel as two JSON arrays of
/// text, unpacked side by side `WITH ORDINALITY`, so the text is the same for every batch (it is
/// prepared once) and each renewed row answers with its position in the batch, from 0. The
/// names also filter the table as an array on its key (`name = ANY (...)`), so the rows are
/// found through the primary-key index whatever the planner guesses of the unpacked lists (a
/// join on them alone may hash the whole table).
pub(crate) fn renew_many_sql(t: &str) -> String {
    format!(
        "UPDATE {t} AS l SET expires_at = GREATEST(l.expires_at, {NOW} + {ttl})\n\
         FROM ROWS FROM (jsonb_array_elements_text($1::jsonb), jsonb_array_elements_text($2::jsonb))\n    \
             WITH ORDINALITY AS r(name, holder, position)\n\
         WHERE l.name = ANY (ARRAY(SELECT jsonb_array_elements_text($1::jsonb)))\n    \
             AND l.name = r.name AND l.holder = r.holder AND l.expires_at > {NOW}\n\
         RETURNING r.position - 1",
        ttl = interval(3)
    )
}

pub(crate) fn renew_many_params<'a>(pairs: &[(&'a str, &'a str)], micros: i64) -> Vec<Param<'a>> {
    vec![
        Param::Text(crate::json::text_array(pairs.iter().map(|(name, _)| *name)).into()),
        Param::Text(crate::json::text_array(pairs.iter().map(|(_, holder)| *holder)).into()),
        Param::Int(micros),
    ]
}
