//! What a database's error codes mean to whoever would try again: the [`StoreErrorKind`] of a
//! PostgreSQL SQLSTATE, a MariaDB/MySQL error number or a SQLite result code, written once for
//! every driver that reports them.

use lease_core::StoreErrorKind;

/// The kind of a PostgreSQL error, by its SQLSTATE (five characters, such as `"25006"`).
///
/// - `25006` (read-only SQL transaction, also what a standby or a server in recovery answers to
///   a write) is [`ReadOnly`](StoreErrorKind::ReadOnly);
/// - `40001` (serialization failure) and `40P01` (deadlock) are
///   [`Conflict`](StoreErrorKind::Conflict);
/// - `40003` (statement completion unknown: a `COMMIT` whose outcome the server cannot tell,
///   which CockroachDB answers as "result is ambiguous") is
///   [`OutcomeUnknown`](StoreErrorKind::OutcomeUnknown), not transient: it may have committed;
/// - class `08` (connection exception), class `53` (insufficient resources, such as too many
///   connections), class `58` (system error), the rest of class `40`, `25P03` and `25P04` (a
///   transaction left idle too long, or open too long: rolled back, the session ended),
///   `55P03` (lock not available), `57014` (statement timeout or cancel), `57P01`..`57P03` and
///   `57P05` (shutdown, crash of another backend, cannot connect now, idle session timeout)
///   are [`Transient`](StoreErrorKind::Transient);
/// - everything else (permission denied, undefined table or column, syntax, `57P04`: the
///   database was dropped, ...) is [`Permanent`](StoreErrorKind::Permanent).
pub fn postgres_error_kind(sqlstate: &str) -> StoreErrorKind {
    match sqlstate {
        "25006" => StoreErrorKind::ReadOnly,
        "40001" | "40P01" => StoreErrorKind::Conflict,
        "40003" => StoreErrorKind::OutcomeUnknown,
        "25P03" | "25P04" | "55P03" | "57014" | "57P01" | "57P02" | "57P03" | "57P05" => {
            StoreErrorKind::Transient
        }
        _ => match sqlstate.get(..2) {
            Some("08" | "40" | "53" | "58") => StoreErrorKind::Transient,
            _ => StoreErrorKind::Permanent,
        },
    }
}

/// The kind of a MariaDB or MySQL error, by its number.
///
/// - 1290 (the server runs with `--read-only`), 1836 (read-only mode) and 1792 (a read-only
///   transaction) are [`ReadOnly`](StoreErrorKind::ReadOnly);
/// - 1213 (deadlock, also how Galera reports a write that lost certification) and 1020
///   (`Record has changed since last read`: under `innodb_snapshot_isolation`, the default
///   from MariaDB 11.6.2, a locking read of a row a concurrent transaction changed since the
///   transaction's read view; the transaction is rolled back) are
///   [`Conflict`](StoreErrorKind::Conflict);
/// - 1040 (too many connections), 1203 and 1226 (an account's own connection limits,
///   `max_user_connections` and the hourly ones), 1047 (a Galera node not ready for
///   statements), 1053 (server shutdown), 1180 (an error during `COMMIT`: on Galera, a node
///   that lost the cluster as its write set went out; see [`mysql_ends_session`]), 1205 (lock
///   wait timeout), 1317 (query interrupted: `KILL QUERY`, or Galera aborting a transaction
///   for a conflicting write set; rolled back), 1927 (connection killed), 1969 and 3024
///   (statement timeouts), 4031 (disconnected for inactivity) and the client's 2002, 2003,
///   2006 and 2013 (cannot connect, server gone, connection lost) are
///   [`Transient`](StoreErrorKind::Transient);
/// - 1021 (disk full) and 1114 (`The table 'leases' is full`: a tablespace that cannot grow)
///   are [`Transient`](StoreErrorKind::Transient), as PostgreSQL's `53100` and SQLite's
///   `SQLITE_FULL` are: they pass when space is freed;
/// - everything else is [`Permanent`](StoreErrorKind::Permanent).
///
/// A few numbers wrap a failure of the operating system whose cause only the message tells (3
/// and 1026, `Error writing file`; 1030, `Got error 28 "No space left on device" from storage
/// engine`): [`mysql_error_kind_with_message`] reads them with it.
pub fn mysql_error_kind(number: u16) -> StoreErrorKind {
    match number {
        1290 | 1792 | 1836 => StoreErrorKind::ReadOnly,
        1020 | 1213 => StoreErrorKind::Conflict,
        1021 | 1040 | 1047 | 1053 | 1114 | 1180 | 1203 | 1205 | 1226 | 1317 | 1927 | 1969
        | 2002 | 2003 | 2006 | 2013 | 3024 | 4031 => StoreErrorKind::Transient,
        _ => StoreErrorKind::Permanent,
    }
}

/// The kind of a MariaDB or MySQL error, by its number and, where the number only wraps a
/// failure of the operating system, its message: 3 and 1026 (`Error writing file '...'
/// (Errcode: 28 "No space left on device")`) and 1030 (`Got error 28 "No space left on
/// device" from storage engine InnoDB`) are [`Transient`](StoreErrorKind::Transient) when the
/// failure is a full disk or an exhausted quota (`ENOSPC`, `EDQUOT`), as [`mysql_error_kind`]
/// reads the server's own disk-full numbers, and [`Permanent`](StoreErrorKind::Permanent)
/// otherwise (a read-only file system, a file's permissions). Every other number reads as
/// [`mysql_error_kind`] reads it. For a driver that has both; one that has only the message
/// reads the same words.
pub fn mysql_error_kind_with_message(number: u16, message: &str) -> StoreErrorKind {
    match number {
        3 | 1026 | 1030 if out_of_space(message) => StoreErrorKind::Transient,
        _ => mysql_error_kind(number),
    }
}

/// Whether `message` names a failure of the operating system for want of space: `ENOSPC` or
/// `EDQUOT`, as `strerror` words them (MariaDB and PostgreSQL quote it in the messages that
/// wrap them). For a driver that reads messages only; one with MariaDB's number reads it
/// through [`mysql_error_kind_with_message`].
pub fn out_of_space(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    OUT_OF_SPACE.iter().any(|phrase| lower.contains(phrase))
}

/// `strerror`'s words for `ENOSPC` and `EDQUOT`, lower case.
const OUT_OF_SPACE: &[&str] = &["no space left on device", "disk quota exceeded"];

/// Whether a PostgreSQL error, by its SQLSTATE, may say that the server ended the session while
/// the statement it answers was in flight, so that whether the statement took effect is
/// unknown: `57P01`, `57P02`, `57P05` (a shutdown, `pg_terminate_backend`, a crash of another
/// backend, an idle session's timeout) and class `08` (connection exception), read cautiously
/// as a whole: PgBouncer answers `08P01` both after a statement went out (`query_timeout`, a
/// server connection that crashed) and before (`query_wait_timeout`), and a code cannot tell
/// which, so a commit answered with any of them is not claimed to have failed. [`ends_session`] reads the same in a message's words; the code reads it
/// whatever language the server writes its messages in (`lc_messages`).
pub fn postgres_ends_session(sqlstate: &str) -> bool {
    matches!(sqlstate, "57P01" | "57P02" | "57P05") || sqlstate.starts_with("08")
}

/// Whether a PostgreSQL error, by its SQLSTATE and its severity as the protocol names it
/// (`ERROR`, `FATAL`, `PANIC`; never translated), may say that the session ended while the
/// statement it answers was in flight: a `FATAL` error ends the session as it answers and a
/// `PANIC` the whole server, whatever the code, and either may come after a `COMMIT` reached
/// the log (`PANIC: cannot abort transaction ..., it was already committed`, XX000; a log
/// flush whose `fsync` failed, 58030), so whether it committed is unknown; except 25P03 and
/// 25P04, the end of a session whose transaction PostgreSQL rolled back before the statement
/// came. Other severities as [`postgres_ends_session`] reads the code. For a driver that reads
/// the severity.
pub fn postgres_error_ends_session(sqlstate: &str, severity: &str) -> bool {
    match severity {
        "FATAL" | "PANIC" => !matches!(sqlstate, "25P03" | "25P04"),
        _ => postgres_ends_session(sqlstate),
    }
}

/// Whether a MariaDB or MySQL error, by its number, leaves unknown whether the statement it
/// answers took effect: the session ended while it was in flight, 1053 (server shutdown),
/// 1927 (connection killed) and the client's 2006 and 2013 (server gone, connection lost); or
/// 1180, a `COMMIT` that failed on its way out, which on Galera is how a node that lost the
/// cluster (the provider's connection failed) answers a write set it may already have sent to
/// the nodes that commit it. As [`postgres_ends_session`], in any language the server speaks.
/// Not MySQL's 4031 (disconnected for inactivity): the server closed the session before the
/// statement came, which it never ran.
pub fn mysql_ends_session(number: u16) -> bool {
    matches!(number, 1053 | 1180 | 1927 | 2006 | 2013)
}

/// Whether a SQLite error, by its result code (primary or extended), leaves unknown whether
/// the statement it answers took effect: `SQLITE_IOERR` (10), an I/O failure, which on a
/// `COMMIT` (an autocommit statement's included) may come after the commit's frames reached
/// the log file (a failed `fsync`), where recovery finds them, so it may have committed. As
/// [`postgres_ends_session`] for a server, with no session to end.
pub fn sqlite_ends_session(code: i32) -> bool {
    code & 0xff == 10
}

/// The kind of a SQLite error, by its result code (primary or extended).
///
/// `SQLITE_BUSY` (5), `SQLITE_LOCKED` (6), `SQLITE_IOERR` (10), `SQLITE_FULL` (13) and
/// `SQLITE_PROTOCOL` (15) are [`Transient`](StoreErrorKind::Transient); everything else, a
/// read-only database file included (there is no other server to find), is
/// [`Permanent`](StoreErrorKind::Permanent).
pub fn sqlite_error_kind(code: i32) -> StoreErrorKind {
    match code & 0xff {
        5 | 6 | 10 | 13 | 15 => StoreErrorKind::Transient,
        _ => StoreErrorKind::Permanent,
    }
}

/// Phrases, lower case, of the messages with which a server, or a driver that words a broken
/// connection as a database error, ends the session: PostgreSQL's `terminating connection`
/// (57P01 and 57P02, a shutdown or `pg_terminate_backend`) and `server closed the connection`;
/// MariaDB's 1053 (`Server shutdown in progress`), 1927 (`Connection was killed`) and the
/// client's 2006 and 2013 (`server has gone away`, `Lost connection`); a socket's reset or
/// broken pipe, and a failure of the socket as a driver words it as a database error
/// (diesel-async's MariaDB connection: `Input/output error: ... connection closed`); and
/// PgBouncer's farewells when the server connection under a statement in flight died
/// (`server conn crashed?`) or outlived its `query_timeout` (08P01 both, which PgBouncer sends
/// after the statement went out, so a `COMMIT` may have committed); and MariaDB's 1180
/// (`Got error 6 "..." during COMMIT`), whose session goes on but whose commit may have
/// reached other Galera nodes (see [`mysql_ends_session`]); and PostgreSQL's `PANIC` after a
/// commit reached the log (`cannot abort transaction ..., it was already committed`, see
/// [`postgres_error_ends_session`]); and SQLite's `disk I/O error` (see
/// [`sqlite_ends_session`]).
const SESSION_ENDED: &[&str] = &[
    "during commit",
    "it was already committed",
    "disk i/o error",
    "server conn crashed",
    "query_timeout",
    "input/output error",
    "connection closed",
    "terminating connection",
    "server closed the connection",
    "shutdown in progress",
    "connection was killed",
    "gone away",
    "lost connection",
    "connection reset",
    "broken pipe",
];

/// Whether a database's `message` says that the session ended while the statement it answers
/// was in flight, so that whether the statement took effect is unknown: a server shutting
/// down or killing the connection may do so after a `COMMIT` committed and before its answer
/// went out. What [`Execute::answer_lost`](crate::Execute::answer_lost) reads in the messages
/// of the database's errors. Not PostgreSQL's end of a session whose transaction stayed idle,
/// or open, too long (25P03, 25P04: `terminating connection due to idle-in-transaction
/// timeout`, `... due to transaction timeout`): the transaction was rolled back before the
/// statement came, which never ran.
pub fn ends_session(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    SESSION_ENDED.iter().any(|phrase| message.contains(phrase)) && !rolled_back_first(&message)
}

/// Whether `message` is PostgreSQL's farewell to a session whose transaction it rolled back for
/// staying idle or open too long (25P03, 25P04), before any later statement came: nothing that
/// statement sent committed, and a new session may succeed
/// ([`Transient`](StoreErrorKind::Transient), as [`postgres_error_kind`] reads the codes). For a
/// driver that keeps only the message; [`ends_session`] leaves these out.
pub fn rolled_back_first(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    ROLLED_BACK_FIRST
        .iter()
        .any(|phrase| message.contains(phrase))
}

/// Phrases, lower case, of PostgreSQL's farewells to a session whose transaction it rolled back
/// for staying idle or open too long, before any later statement came (25P03, 25P04).
const ROLLED_BACK_FIRST: &[&str] = &["idle-in-transaction timeout", "due to transaction timeout"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_that_end_the_session() {
        for code in ["57P01", "57P02", "57P05", "08006", "08003", "08P01"] {
            assert!(postgres_ends_session(code), "{code}");
        }
        // A transaction left idle (or open) too long: rolled back before the next statement.
        for code in [
            "57014", "40001", "23505", "25006", "57P03", "25P03", "25P04", "",
        ] {
            assert!(!postgres_ends_session(code), "{code}");
        }
        // By severity: a FATAL or PANIC answer ended the session whatever its code (a PANIC
        // after the commit reached the log is XX000), but for a transaction rolled back first.
        for (code, severity) in [("XX000", "PANIC"), ("58030", "PANIC"), ("XX000", "FATAL")] {
            assert!(
                postgres_error_ends_session(code, severity),
                "{code} {severity}"
            );
        }
        for (code, severity) in [
            ("XX000", "ERROR"),
            ("25P03", "FATAL"),
            ("25P04", "FATAL"),
            ("40001", "ERROR"),
        ] {
            assert!(
                !postgres_error_ends_session(code, severity),
                "{code} {severity}"
            );
        }
        assert!(postgres_error_ends_session("57P01", "FATAL"));
        assert!(postgres_error_ends_session("08006", "ERROR"));
        assert!(ends_session(
            "PANIC: cannot abort transaction 812, it was already committed"
        ));
        // SQLite's I/O errors, extended codes included (SQLITE_IOERR_FSYNC, 1034); not a full
        // disk (13) nor a busy database (5), which commit nothing.
        for code in [10, 1034, 266] {
            assert!(sqlite_ends_session(code), "{code}");
        }
        for code in [13, 5, 8, 1] {
            assert!(!sqlite_ends_session(code), "{code}");
        }
        assert!(ends_session("disk I/O error"));
        for number in [1053, 1180, 1927, 2006, 2013] {
            assert!(mysql_ends_session(number), "{number}");
        }
        // 4031: disconnected for inactivity, before the statement came; 1317: interrupted,
        // rolled back.
        for number in [1205, 1213, 1290, 1064, 1317, 4031] {
            assert!(!mysql_ends_session(number), "{number}");
        }
    }

    #[test]
    fn postgres_codes() {
        assert_eq!(postgres_error_kind("25006"), StoreErrorKind::ReadOnly);
        assert_eq!(postgres_error_kind("40001"), StoreErrorKind::Conflict);
        assert_eq!(postgres_error_kind("40P01"), StoreErrorKind::Conflict);
        assert_eq!(postgres_error_kind("40003"), StoreErrorKind::OutcomeUnknown);
        for transient in [
            "08006", "08001", "53300", "57P01", "57P03", "57014", "40002", "25P03", "25P04",
        ] {
            assert_eq!(
                postgres_error_kind(transient),
                StoreErrorKind::Transient,
                "{transient}"
            );
        }
        // 57P04: the database was dropped, which no retry brings back.
        for permanent in [
            "42501", "42P01", "42703", "23505", "57P04", "XX000", "", "4",
        ] {
            assert_eq!(
                postgres_error_kind(permanent),
                StoreErrorKind::Permanent,
                "{permanent}"
            );
        }
    }

    #[test]
    fn mysql_numbers() {
        assert_eq!(mysql_error_kind(1290), StoreErrorKind::ReadOnly);
        assert_eq!(mysql_error_kind(1213), StoreErrorKind::Conflict);
        assert_eq!(mysql_error_kind(1020), StoreErrorKind::Conflict);
        assert_eq!(mysql_error_kind(1047), StoreErrorKind::Transient);
        assert_eq!(mysql_error_kind(2013), StoreErrorKind::Transient);
        // A commit that failed on its way out (Galera: the node lost the cluster), and a
        // statement interrupted (`KILL QUERY`, a Galera abort): another try may succeed.
        assert_eq!(mysql_error_kind(1180), StoreErrorKind::Transient);
        assert_eq!(mysql_error_kind(1317), StoreErrorKind::Transient);
        // An account's connection limits, as the server-wide one (1040).
        assert_eq!(mysql_error_kind(1203), StoreErrorKind::Transient);
        assert_eq!(mysql_error_kind(1226), StoreErrorKind::Transient);
        assert_eq!(mysql_error_kind(1054), StoreErrorKind::Permanent);
        assert_eq!(mysql_error_kind(1142), StoreErrorKind::Permanent);
        // Out of space, as PostgreSQL's 53100 and SQLite's SQLITE_FULL.
        assert_eq!(mysql_error_kind(1021), StoreErrorKind::Transient);
        assert_eq!(mysql_error_kind(1114), StoreErrorKind::Transient);
    }

    #[test]
    fn mysql_numbers_that_wrap_a_system_error_read_its_words() {
        for (number, message, kind) in [
            (
                1030,
                "Got error 28 \"No space left on device\" from storage engine InnoDB",
                StoreErrorKind::Transient,
            ),
            (
                3,
                "Error writing file './mysql-bin.000004' (Errcode: 28 \"No space left on device\")",
                StoreErrorKind::Transient,
            ),
            (
                1026,
                "Error writing file '/tmp/MYfd=42' (errno: 122 \"Disk quota exceeded\")",
                StoreErrorKind::Transient,
            ),
            (
                1030,
                "Got error 30 \"Read-only file system\" from storage engine InnoDB",
                StoreErrorKind::Permanent,
            ),
            (
                3,
                "Error writing file './mysql-bin.000004' (Errcode: 13 \"Permission denied\")",
                StoreErrorKind::Permanent,
            ),
            // The number decides where it says more than the words.
            (
                1213,
                "Deadlock found; No space left on device",
                StoreErrorKind::Conflict,
            ),
            (
                1054,
                "Unknown column 'no space left on device'",
                StoreErrorKind::Permanent,
            ),
            (
                1114,
                "The table 'leases' is full",
                StoreErrorKind::Transient,
            ),
        ] {
            assert_eq!(
                mysql_error_kind_with_message(number, message),
                kind,
                "{number}: {message}"
            );
        }
    }

    #[test]
    fn session_ending_messages() {
        for ended in [
            "terminating connection due to administrator command",
            "FATAL: terminating connection due to unexpected postmaster exit",
            "Server shutdown in progress",
            "Connection was killed",
            "MySQL server has gone away",
            "Lost connection to server during query",
            "Connection reset by peer (os error 104)",
            "Input/output error: Input/output error: connection closed",
            "server conn crashed?",
            "query_timeout",
            "Got error 6 \"No such device or address\" during COMMIT",
        ] {
            assert!(ends_session(ended), "{ended}");
        }
        for answered in [
            "deadlock detected",
            "lease_not_held",
            "cannot execute UPDATE in a read-only transaction",
            "Lock wait timeout exceeded; try restarting transaction",
            // PgBouncer, before anything was sent: the wait for a server connection.
            "query_wait_timeout",
            // The transaction was rolled back before the statement came.
            "terminating connection due to idle-in-transaction timeout",
            "FATAL: terminating connection due to transaction timeout",
        ] {
            assert!(!ends_session(answered), "{answered}");
        }
    }

    #[test]
    fn sqlite_codes() {
        assert_eq!(sqlite_error_kind(5), StoreErrorKind::Transient);
        // SQLITE_BUSY_SNAPSHOT, an extended code of SQLITE_BUSY.
        assert_eq!(sqlite_error_kind(517), StoreErrorKind::Transient);
        assert_eq!(sqlite_error_kind(1), StoreErrorKind::Permanent);
        assert_eq!(sqlite_error_kind(8), StoreErrorKind::Permanent);
    }
}
