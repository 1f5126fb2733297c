//! The [`StoreErrorKind`] of an error a diesel-async pool or connection answered.
//!
//! diesel keeps a database error's kind only for the few codes it names
//! (`ReadOnlyTransaction`, `SerializationFailure`, ...) and drops the code of every other one,
//! keeping its message; so what diesel does not name is read from the message, by the phrases
//! PostgreSQL, MariaDB and SQLite use for the conditions that matter to a retry, as lease-sqlx
//! reads their codes ([`lease_sql::postgres_error_kind`] and its siblings). The pools' own
//! failures are read by their types: deadpool's and bb8's, as diesel-async re-exports them, and
//! the connection their manager could not make. An error of any other origin (lease-sql's own: a
//! row it cannot read, an answer it did not ask for) is permanent, as the [`Execute`] contract
//! and lease-sqlx read it: asking again reads the same.
//!
//! [`Execute`]: lease_sql::Execute

use diesel::result::{DatabaseErrorKind, Error as DieselError};
use lease_core::StoreErrorKind;

/// What `error` means to whoever would try again: a diesel error by its kind or its message
/// ([`diesel_kind`]), a pool's failure by its type ([`pool_kind`]), and anything else
/// [`Permanent`](StoreErrorKind::Permanent).
pub(crate) fn error_kind(
    error: &(dyn std::error::Error + Send + Sync + 'static),
) -> StoreErrorKind {
    if let Some(error) = error.downcast_ref::<DieselError>() {
        return diesel_kind(error);
    }
    pool_kind(error).unwrap_or(StoreErrorKind::Permanent)
}

/// What a diesel error means: the kinds diesel names, else the database's message
/// ([`message_kind`]); diesel's own failures (a row it could not read, ...) are permanent.
fn diesel_kind(error: &DieselError) -> StoreErrorKind {
    match error {
        DieselError::DatabaseError(kind, information) => match kind {
            DatabaseErrorKind::ReadOnlyTransaction => StoreErrorKind::ReadOnly,
            DatabaseErrorKind::SerializationFailure => StoreErrorKind::Conflict,
            DatabaseErrorKind::ClosedConnection | DatabaseErrorKind::UnableToSendCommand => {
                StoreErrorKind::Transient
            }
            _ => message_kind(information.message()),
        },
        DieselError::BrokenTransactionManager => StoreErrorKind::Transient,
        _ => StoreErrorKind::Permanent,
    }
}

/// What a failure of a pool means, by its type; `None` for an error no pool answered. A
/// timeout is transient, as sqlx's `PoolTimedOut` is; a closed pool never opens again
/// (deadpool's `Closed`, as sqlx's `PoolClosed`), so retrying it waits for nothing: permanent,
/// and so is a pool built without a runtime or failed by a `post_create` hook's own message. A
/// connection the pool could not make is read by [`connection_kind`]. bb8 has no closed state:
/// its pool lives as long as its handles.
#[cfg(any(feature = "deadpool", feature = "bb8"))]
fn pool_kind(error: &(dyn std::error::Error + 'static)) -> Option<StoreErrorKind> {
    use diesel_async::pooled_connection as pooled;

    // A store's dedicated connection (`DieselPool::dedicated`), and the reason bb8 timed out.
    if let Some(error) = error.downcast_ref::<pooled::PoolError>() {
        return Some(connection_kind(error));
    }
    #[cfg(feature = "deadpool")]
    if let Some(error) = error.downcast_ref::<pooled::deadpool::PoolError>() {
        use deadpool::managed::{HookError, PoolError};
        return Some(match error {
            PoolError::Timeout(_) => StoreErrorKind::Transient,
            PoolError::Backend(error) | PoolError::PostCreateHook(HookError::Backend(error)) => {
                connection_kind(error)
            }
            PoolError::Closed
            | PoolError::NoRuntimeSpecified
            | PoolError::PostCreateHook(HookError::Message(_)) => StoreErrorKind::Permanent,
        });
    }
    #[cfg(feature = "bb8")]
    if let Some(error) = error.downcast_ref::<pooled::bb8::RunError>() {
        return Some(match error {
            pooled::bb8::RunError::TimedOut => StoreErrorKind::Transient,
            pooled::bb8::RunError::User(error) => connection_kind(error),
        });
    }
    None
}

/// Without a pool feature no pool answers.
#[cfg(not(any(feature = "deadpool", feature = "bb8")))]
fn pool_kind(_: &(dyn std::error::Error + 'static)) -> Option<StoreErrorKind> {
    None
}

/// Phrases, lower case, of a connection the server refused for good, as lease-sqlx reads their
/// codes: a failed authentication of any method (PostgreSQL's class 28: a password, `peer`,
/// `ident`, a `pg_hba.conf` line that rejects or is missing, a role that may not log in;
/// MariaDB 1045), a database or role that does not exist (3D000; MariaDB 1049), a database
/// the role may not connect to (42501), a host the server does not let in (MariaDB 1130), a
/// SQLite file that cannot be opened, which waiting does not fix.
#[cfg(any(feature = "deadpool", feature = "bb8"))]
const REFUSED_FOR_GOOD: &[&str] = &[
    "authentication failed",
    "no pg_hba.conf entry",
    "pg_hba.conf rejects connection",
    "is not permitted to log in",
    "permission denied for database",
    "is not allowed to connect to this",
    "access denied",
    "unknown database",
    "does not exist",
    // SQLite's SQLITE_CANTOPEN (a directory missing, a path it may not open), which lease-sqlx
    // reads as permanent by its code: there is no other server to find.
    "unable to open database file",
    // tokio-postgres's own refusals, before any server answers: a URL it cannot read (a port
    // that is no number), and settings it cannot use (no password where the server asks for
    // one). lease-sqlx reads the first as a configuration error, and its empty password
    // draws the server's 28P01.
    "invalid connection string",
    "invalid configuration",
];

/// What a connection the pool's manager could not make (or whose check failed) means:
/// transient (a server down or starting, a host that does not answer), or permanent when the
/// server refused it for good ([`REFUSED_FOR_GOOD`]: its text holds the server's answer, as
/// diesel-async words it) or the URL cannot be read. A campaign then stops rather than retry a
/// wrong password for ever.
#[cfg(any(feature = "deadpool", feature = "bb8"))]
fn connection_kind(error: &diesel_async::pooled_connection::PoolError) -> StoreErrorKind {
    use diesel::ConnectionError;
    use diesel_async::pooled_connection::PoolError;

    if let PoolError::ConnectionError(
        ConnectionError::InvalidCString(_) | ConnectionError::InvalidConnectionUrl(_),
    ) = error
    {
        return StoreErrorKind::Permanent;
    }
    let message = error.to_string().to_ascii_lowercase();
    if REFUSED_FOR_GOOD
        .iter()
        .any(|phrase| message.contains(phrase))
    {
        StoreErrorKind::Permanent
    } else {
        StoreErrorKind::Transient
    }
}

/// The database's own message in a diesel database error; `None` for diesel's own failures.
pub(crate) fn database_message<'e>(
    error: &'e (dyn std::error::Error + Send + Sync + 'static),
) -> Option<&'e str> {
    match error.downcast_ref::<DieselError>()? {
        DieselError::DatabaseError(_, information) => Some(information.message()),
        _ => None,
    }
}

/// Whether `error` leaves unknown what its statement did
/// ([`Execute::answer_lost`](lease_sql::Execute::answer_lost)): diesel words a connection that
/// closed or could not take the statement as a database error of its own kind, and a broken
/// socket's or a server's farewell as one of an unknown kind with the message
/// ([`lease_sql::ends_session`]). An error that is not diesel's lost no answer: the pool's
/// (no connection was handed out, so nothing was sent; an acquisition read as lost would be
/// given back for nothing, two more waits on a pool that had none to give), or lease-sql's own
/// (an answer that came and could not be read).
pub(crate) fn answer_lost(error: &(dyn std::error::Error + Send + Sync + 'static)) -> bool {
    match error.downcast_ref::<DieselError>() {
        Some(DieselError::DatabaseError(
            DatabaseErrorKind::ClosedConnection | DatabaseErrorKind::UnableToSendCommand,
            _,
        )) => true,
        Some(DieselError::DatabaseError(_, information)) => {
            lease_sql::ends_session(information.message())
        }
        Some(_) | None => false,
    }
}

/// Whether the connection a statement failed on is of no more use: its answer was lost
/// ([`answer_lost`]), or the server had closed the session before the statement came (MariaDB's
/// 4031, a connection idle past `wait_timeout`; PostgreSQL's end of a session whose
/// transaction stayed idle or open too long, [`lease_sql::rolled_back_first`]). diesel-async's
/// connections do not reconnect and report themselves healthy, so the pool must be told.
pub(crate) fn session_over(error: &(dyn std::error::Error + Send + Sync + 'static)) -> bool {
    answer_lost(error)
        || database_message(error).is_some_and(|message| {
            lease_sql::rolled_back_first(message)
                || message.to_ascii_lowercase().contains(INACTIVITY)
        })
}

/// MariaDB's 4031 in its own words: the server disconnected the client for inactivity.
const INACTIVITY: &str = "disconnected by the server because of inactivity";

/// Phrases of the servers' messages, lower case, and what they mean, the first a message holds
/// deciding (a narrower phrase comes before the wider one it would otherwise lose to); besides
/// them, every
/// message of a session that ended ([`lease_sql::ends_session`]: a connection lost, reset,
/// killed or closed by a server shutting down, and the MariaDB driver's `Input/output error`)
/// is [`Transient`](StoreErrorKind::Transient).
const PHRASES: &[(&str, StoreErrorKind)] = &[
    // MariaDB 1180, a commit that failed on its way out (`Got error 149 "Lock deadlock; Retry
    // transaction" during COMMIT`), which may have reached the other Galera nodes: its answer
    // is lost (`lease_sql::ends_session`), and a transient failure, whatever the engine's error
    // inside it says, as lease-sqlx reads its number. First: read as a deadlock, an
    // acquisition that may have taken the lease was answered "not acquired" and sent again.
    ("during commit", StoreErrorKind::Transient),
    // PostgreSQL 40P01; MariaDB 1213, also Galera's lost certification.
    ("deadlock", StoreErrorKind::Conflict),
    // MariaDB 1020, under `innodb_snapshot_isolation`: a row changed since the read view.
    (
        "record has changed since last read",
        StoreErrorKind::Conflict,
    ),
    // A file the server may not write or read, for a file system mounted read-only under it
    // or for the file's permissions (`could not extend file "...": Read-only file system`,
    // `...: Permission denied`: PostgreSQL's 42501 by `errcode_for_file_access`; MariaDB's
    // 1030, `Got error 30 "Read-only file system"`): permanent, as lease-sqlx reads both
    // codes; before the failures these end (`could not extend file`, ...) and before
    // `read-only`: the server is not in read-only mode, and another connection to it does no
    // better.
    ("read-only file system", StoreErrorKind::Permanent),
    ("permission denied", StoreErrorKind::Permanent),
    // A server in read-only mode, and only that: MariaDB 1290 (`--read-only`) and 1836;
    // PostgreSQL 25006 as a standby words it. Not MariaDB 1036 (`Table 'leases' is read
    // only`: a table opened read-only, on a server that takes writes), which lease-sqlx reads
    // as permanent and no phrase here matches.
    ("read-only", StoreErrorKind::ReadOnly),
    ("during recovery", StoreErrorKind::ReadOnly),
    // MariaDB 1047: a Galera node that is not (yet) part of the primary component.
    ("wsrep", StoreErrorKind::Transient),
    // MariaDB 1317: a statement interrupted (`KILL QUERY`, a Galera abort), rolled back, as
    // lease-sqlx reads its number. (1180, `... during COMMIT`, reads as a session that ended:
    // transient, its outcome unknown.)
    ("query execution was interrupted", StoreErrorKind::Transient),
    ("lock wait timeout", StoreErrorKind::Transient),
    ("too many connections", StoreErrorKind::Transient),
    // MariaDB 1203 and 1226: an account's own connection limits.
    ("max_user_connections", StoreErrorKind::Transient),
    ("has exceeded the '", StoreErrorKind::Transient),
    ("shutting down", StoreErrorKind::Transient),
    ("starting up", StoreErrorKind::Transient),
    ("statement timeout", StoreErrorKind::Transient),
    ("max_statement_time", StoreErrorKind::Transient),
    // PostgreSQL 55P03 (`canceling statement due to lock timeout`, and `could not obtain
    // lock on row in relation "leases"` for `NOWAIT`) and 57014 (`... due to user request`, a
    // cancel), as lease-sqlx reads their codes.
    ("lock timeout", StoreErrorKind::Transient),
    ("could not obtain lock", StoreErrorKind::Transient),
    ("canceling statement", StoreErrorKind::Transient),
    // MariaDB 4031: disconnected by the server for inactivity.
    (INACTIVITY, StoreErrorKind::Transient),
    // SQLite's SQLITE_BUSY and SQLITE_LOCKED.
    ("database is locked", StoreErrorKind::Transient),
    ("database table is locked", StoreErrorKind::Transient),
    // SQLite's SQLITE_IOERR, SQLITE_FULL and SQLITE_PROTOCOL, as lease-sqlx reads their codes.
    ("disk i/o error", StoreErrorKind::Transient),
    ("database or disk is full", StoreErrorKind::Transient),
    ("locking protocol", StoreErrorKind::Transient),
    // MariaDB 1037 and 1041 (`Out of memory; restart server ...`, `Out of memory; check if
    // mysqld ...`), which lease-sqlx reads as permanent; before PostgreSQL's own below.
    ("out of memory;", StoreErrorKind::Permanent),
    // PostgreSQL's classes 53 (insufficient resources) and 58 (system error) as they word
    // them, as lease-sqlx reads their codes. SQLite's SQLITE_NOMEM, which lease-sqlx reads as
    // permanent, says `out of memory` in the very words of PostgreSQL's 53200, so it reads
    // transient here: the message cannot tell them apart, and a campaign that stopped on a
    // server's passing memory pressure would be the worse mistake.
    ("out of memory", StoreErrorKind::Transient),
    // MariaDB 1114 (`The table 'leases' is full`: a tablespace that cannot grow) and 1021
    // (`Disk full (...); waiting for someone to free some space...`), as lease-sqlx reads
    // their numbers.
    ("' is full", StoreErrorKind::Transient),
    ("disk full", StoreErrorKind::Transient),
    ("could not extend file", StoreErrorKind::Transient),
    ("could not write to file", StoreErrorKind::Transient),
    // PostgreSQL's failures to read a block, as lease-sqlx reads their codes: one that reads
    // short (`could not read block 7 in file "...": read only 0 of 8192 bytes`) is XX001, data
    // corrupted, permanent; any other (`...: Input/output error`, 58030; `...: No such file or
    // directory`, 58P01) is class 58, transient.
    (": read only ", StoreErrorKind::Permanent),
    ("could not read block", StoreErrorKind::Transient),
    // PgBouncer's class 08 before a statement went out, as lease-sqlx reads the class: no
    // server connection came free in time (`query_wait_timeout`), or none can be opened
    // (`pgbouncer cannot connect to server`, `server login has been failing`).
    ("query_wait_timeout", StoreErrorKind::Transient),
    ("cannot connect to server", StoreErrorKind::Transient),
    ("server login has been failing", StoreErrorKind::Transient),
    // 40003 (statement completion unknown), as CockroachDB words it for a commit: it may
    // have committed.
    ("result is ambiguous", StoreErrorKind::OutcomeUnknown),
];

fn message_kind(message: &str) -> StoreErrorKind {
    let lower = message.to_ascii_lowercase();
    match PHRASES.iter().find(|(phrase, _)| lower.contains(phrase)) {
        Some(&(_, kind)) => kind,
        // A disk full or a quota exhausted, as lease-sqlx reads PostgreSQL's 53100 and
        // MariaDB's numbers that wrap it (`lease_sql::mysql_error_kind_with_message`).
        None if lease_sql::out_of_space(message) => StoreErrorKind::Transient,
        // PostgreSQL 25P03 and 25P04: the transaction was rolled back before the statement
        // came, so nothing committed and a new session may succeed, as lease-sqlx reads their
        // codes; `ends_session` leaves them out (the statement never ran: no answer lost).
        None if lease_sql::ends_session(message) || lease_sql::rolled_back_first(message) => {
            StoreErrorKind::Transient
        }
        None => StoreErrorKind::Permanent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn database(
        kind: DatabaseErrorKind,
        message: &str,
    ) -> Box<dyn std::error::Error + Send + Sync> {
        Box::new(DieselError::DatabaseError(
            kind,
            Box::new(message.to_owned()),
        ))
    }

    /// A connection the pool's manager could not make, `message` as diesel-async words it.
    #[cfg(any(feature = "deadpool", feature = "bb8"))]
    fn not_made(message: &str) -> diesel_async::pooled_connection::PoolError {
        diesel_async::pooled_connection::PoolError::ConnectionError(
            diesel::ConnectionError::BadConnection(message.to_owned()),
        )
    }

    /// `not_made(message)` as each pool answers it: bare (a store's dedicated connection, the
    /// reason bb8 timed out), and wrapped by deadpool and bb8.
    #[cfg(any(feature = "deadpool", feature = "bb8"))]
    fn as_each_pool_answers(message: &str) -> Vec<Box<dyn std::error::Error + Send + Sync>> {
        let mut answers: Vec<Box<dyn std::error::Error + Send + Sync>> =
            vec![Box::new(not_made(message))];
        #[cfg(feature = "deadpool")]
        answers.push(Box::new(deadpool::managed::PoolError::Backend(not_made(
            message,
        ))));
        #[cfg(feature = "bb8")]
        answers.push(Box::new(
            diesel_async::pooled_connection::bb8::RunError::User(not_made(message)),
        ));
        answers
    }

    #[test]
    #[cfg(any(feature = "deadpool", feature = "bb8"))]
    fn connections_refused_for_good_are_permanent() {
        use diesel::ConnectionError;
        use diesel_async::pooled_connection::PoolError;

        for message in [
            "error connecting to server: db error: FATAL: password authentication failed for user \"app\"",
            "error connecting to server: db error: FATAL: database \"app\" does not exist",
            "Access denied for user 'app'@'localhost' (using password: YES)",
            "Unknown database 'app'",
            "unable to open database file",
            // The other refusals lease-sqlx reads as permanent by their codes (PostgreSQL's
            // class 28 and 42501, MariaDB 1130).
            "error connecting to server: db error: FATAL: Peer authentication failed for user \"app\"",
            "error connecting to server: db error: FATAL: Ident authentication failed for user \"app\"",
            "error connecting to server: db error: FATAL: pg_hba.conf rejects connection for host \"10.0.0.5\", user \"app\", database \"app\", no encryption",
            "error connecting to server: db error: FATAL: role \"app\" is not permitted to log in",
            "error connecting to server: db error: FATAL: permission denied for database \"app\"",
            "Host '10.0.0.5' is not allowed to connect to this MariaDB server",
            // tokio-postgres's, as lease-diesel's connection words them with their causes.
            "invalid connection string: invalid port",
            "invalid configuration: password missing",
        ] {
            for error in as_each_pool_answers(message) {
                assert_eq!(error_kind(&*error), StoreErrorKind::Permanent, "{error:?}");
            }
        }
        for message in [
            "error connecting to server: Connection refused (os error 111)",
            "db error: FATAL: the database system is starting up",
            "Input/output error: Connection refused (os error 111)",
        ] {
            for error in as_each_pool_answers(message) {
                assert_eq!(error_kind(&*error), StoreErrorKind::Transient, "{error:?}");
            }
        }
        // MariaDB's answer at connection, which diesel-async keeps as a database error.
        let server = |message: &str| -> Box<dyn std::error::Error + Send + Sync> {
            Box::new(PoolError::ConnectionError(
                ConnectionError::CouldntSetupConfiguration(DieselError::DatabaseError(
                    DatabaseErrorKind::Unknown,
                    Box::new(message.to_owned()),
                )),
            ))
        };
        let denied = server("Access denied for user 'app'@'localhost' (using password: YES)");
        assert_eq!(error_kind(&*denied), StoreErrorKind::Permanent);
        let crowded = server("Too many connections");
        assert_eq!(error_kind(&*crowded), StoreErrorKind::Transient);
        // A URL that cannot be read never can.
        let url: Box<dyn std::error::Error + Send + Sync> = Box::new(PoolError::ConnectionError(
            ConnectionError::InvalidConnectionUrl("invalid port number".to_owned()),
        ));
        assert_eq!(error_kind(&*url), StoreErrorKind::Permanent);
    }

    #[test]
    #[cfg(feature = "deadpool")]
    fn the_pools_own_failures_lost_no_answer() {
        type PoolError = diesel_async::pooled_connection::deadpool::PoolError;
        for error in [
            PoolError::Timeout(deadpool::managed::TimeoutType::Wait),
            PoolError::Closed,
            PoolError::Backend(not_made("Connection refused (os error 111)")),
        ] {
            assert!(!answer_lost(&error), "{error:?}");
        }
        // The control: a connection that closed under a statement did lose its answer.
        assert!(answer_lost(&*database(
            DatabaseErrorKind::ClosedConnection,
            "connection closed"
        )));
    }

    #[cfg(feature = "deadpool")]
    #[test]
    fn deadpool_failures_are_read_by_their_variant() {
        use deadpool::managed::{HookError, TimeoutType};
        type PoolError = diesel_async::pooled_connection::deadpool::PoolError;

        let kind = |error: PoolError| error_kind(&error);
        for timeout in [TimeoutType::Wait, TimeoutType::Create, TimeoutType::Recycle] {
            assert_eq!(
                kind(PoolError::Timeout(timeout)),
                StoreErrorKind::Transient,
                "{timeout:?}"
            );
        }
        // Closed for good: `Pool::close`, after which every `get` answers so at once.
        assert_eq!(kind(PoolError::Closed), StoreErrorKind::Permanent);
        assert_eq!(
            kind(PoolError::NoRuntimeSpecified),
            StoreErrorKind::Permanent
        );
        assert_eq!(
            kind(PoolError::PostCreateHook(HookError::message("no"))),
            StoreErrorKind::Permanent
        );
        assert_eq!(
            kind(PoolError::PostCreateHook(HookError::Backend(not_made(
                "Connection refused (os error 111)"
            )))),
            StoreErrorKind::Transient
        );
    }

    #[test]
    #[cfg(feature = "bb8")]
    fn bb8_failures_are_read_by_their_variant() {
        use diesel_async::pooled_connection::bb8::RunError;

        assert_eq!(error_kind(&RunError::TimedOut), StoreErrorKind::Transient);
        let refused = RunError::User(not_made("Connection refused (os error 111)"));
        assert_eq!(error_kind(&refused), StoreErrorKind::Transient);
    }

    /// lease-sql's own errors, and any other that neither diesel nor a pool answered, are
    /// permanent: reading the same row again fails the same way.
    #[test]
    fn errors_of_another_origin_are_permanent() {
        let negative_fence = lease_sql::acquired(Some((-1, 1))).unwrap_err();
        let bad_name = lease_sql::LeaseRow::from((String::new(), "holder".to_owned(), 1, 0, 0, 0))
            .into_info()
            .unwrap_err();
        let position: lease_core::BoxError = "renew-many answered position 7".into();
        // Words alone are no pool's, whatever they say.
        let wording: lease_core::BoxError = "timed out waiting for a connection".into();
        let not_found: lease_core::BoxError = Box::new(DieselError::NotFound);
        for error in [negative_fence, bad_name, position, wording, not_found] {
            assert_eq!(error_kind(&*error), StoreErrorKind::Permanent, "{error}");
        }
    }

    #[test]
    fn kinds_diesel_names() {
        let read_only = database(
            DatabaseErrorKind::ReadOnlyTransaction,
            "cannot execute UPDATE in a read-only transaction",
        );
        assert_eq!(error_kind(&*read_only), StoreErrorKind::ReadOnly);
        let serialization = database(
            DatabaseErrorKind::SerializationFailure,
            "could not serialize",
        );
        assert_eq!(error_kind(&*serialization), StoreErrorKind::Conflict);
        let closed = database(DatabaseErrorKind::ClosedConnection, "closed");
        assert_eq!(error_kind(&*closed), StoreErrorKind::Transient);
    }

    #[test]
    fn kinds_read_from_messages() {
        for (message, kind) in [
            ("deadlock detected", StoreErrorKind::Conflict),
            (
                "Deadlock found when trying to get lock; try restarting transaction",
                StoreErrorKind::Conflict,
            ),
            (
                "The MariaDB server is running with the --read-only option so it cannot execute this statement",
                StoreErrorKind::ReadOnly,
            ),
            (
                "WSREP has not yet prepared node for application use",
                StoreErrorKind::Transient,
            ),
            ("database is locked", StoreErrorKind::Transient),
            ("query_wait_timeout", StoreErrorKind::Transient),
            (
                "User app already has more than 'max_user_connections' active connections",
                StoreErrorKind::Transient,
            ),
            (
                "User 'app' has exceeded the 'max_connections_per_hour' resource (current value: 10)",
                StoreErrorKind::Transient,
            ),
            (
                "pgbouncer cannot connect to server",
                StoreErrorKind::Transient,
            ),
            (
                "canceling statement due to lock timeout",
                StoreErrorKind::Transient,
            ),
            (
                "canceling statement due to user request",
                StoreErrorKind::Transient,
            ),
            (
                "The client was disconnected by the server because of inactivity. See wait_timeout and interactive_timeout for configuring this behavior.",
                StoreErrorKind::Transient,
            ),
            (
                "Record has changed since last read in table 'leases'",
                StoreErrorKind::Conflict,
            ),
            (
                "terminating connection due to administrator command",
                StoreErrorKind::Transient,
            ),
            // A MariaDB connection cut or killed under the statement.
            (
                "Input/output error: Input/output error: connection closed",
                StoreErrorKind::Transient,
            ),
            ("Connection was killed", StoreErrorKind::Transient),
            ("Query execution was interrupted", StoreErrorKind::Transient),
            (
                "Got error 6 \"No such device or address\" during COMMIT",
                StoreErrorKind::Transient,
            ),
            (
                "Got error 149 \"Lock deadlock; Retry transaction\" during COMMIT",
                StoreErrorKind::Transient,
            ),
            ("disk I/O error", StoreErrorKind::Transient),
            ("database or disk is full", StoreErrorKind::Transient),
            ("out of memory", StoreErrorKind::Transient),
            (
                "could not extend file \"base/16384/16385\": No space left on device",
                StoreErrorKind::Transient,
            ),
            (
                "result is ambiguous (error=rpc error: ...)",
                StoreErrorKind::OutcomeUnknown,
            ),
            (
                "permission denied for table leases",
                StoreErrorKind::Permanent,
            ),
            ("column \"fence\" does not exist", StoreErrorKind::Permanent),
        ] {
            let error = database(DatabaseErrorKind::Unknown, message);
            assert_eq!(error_kind(&*error), kind, "{message}");
        }
    }

    #[test]
    fn lost_answers() {
        let closed = database(DatabaseErrorKind::ClosedConnection, "closed");
        assert!(answer_lost(&*closed));
        let cut = database(
            DatabaseErrorKind::Unknown,
            "Input/output error: Input/output error: connection closed",
        );
        assert!(answer_lost(&*cut));
        let answered = database(DatabaseErrorKind::Unknown, "deadlock detected");
        assert!(!answer_lost(&*answered));
        // MariaDB 1180: a commit that failed on its way out may have reached other Galera
        // nodes; 1317: interrupted, rolled back.
        let during_commit = database(
            DatabaseErrorKind::Unknown,
            "Got error 6 \"No such device or address\" during COMMIT",
        );
        assert!(answer_lost(&*during_commit));
        let deadlock_during_commit = database(
            DatabaseErrorKind::Unknown,
            "Got error 149 \"Lock deadlock; Retry transaction\" during COMMIT",
        );
        assert!(answer_lost(&*deadlock_during_commit));
        let interrupted = database(
            DatabaseErrorKind::Unknown,
            "Query execution was interrupted",
        );
        assert!(!answer_lost(&*interrupted));
        // A PostgreSQL PANIC after the commit reached the log, and SQLite's I/O error (a
        // failed `fsync` of the log on a commit): either may have committed.
        for message in [
            "cannot abort transaction 812, it was already committed",
            "disk I/O error",
        ] {
            assert!(
                answer_lost(&*database(DatabaseErrorKind::Unknown, message)),
                "{message}"
            );
        }
        let not_found: Box<dyn std::error::Error + Send + Sync> = Box::new(DieselError::NotFound);
        assert!(!answer_lost(&*not_found));
    }

    #[test]
    fn sessions_the_server_closed_first_are_over_too() {
        for message in [
            "The client was disconnected by the server because of inactivity. See wait_timeout and interactive_timeout for configuring this behavior.",
            "terminating connection due to idle-in-transaction timeout",
            "Input/output error: Input/output error: connection closed",
        ] {
            assert!(
                session_over(&*database(DatabaseErrorKind::Unknown, message)),
                "{message}"
            );
        }
        for message in ["deadlock detected", "Query execution was interrupted"] {
            assert!(
                !session_over(&*database(DatabaseErrorKind::Unknown, message)),
                "{message}"
            );
        }
    }

    /// PostgreSQL's 25P03 and 25P04 end the session after rolling its transaction back: nothing
    /// committed, so transient as lease-sqlx reads their codes, and no answer was lost.
    #[test]
    fn sessions_ended_for_a_transaction_left_open_are_transient() {
        for message in [
            "terminating connection due to idle-in-transaction timeout",
            "FATAL: terminating connection due to transaction timeout",
        ] {
            let error = database(DatabaseErrorKind::Unknown, message);
            assert_eq!(error_kind(&*error), StoreErrorKind::Transient, "{message}");
            assert_eq!(
                error_kind(&*error),
                lease_sql::postgres_error_kind(if message.contains("idle") {
                    "25P03"
                } else {
                    "25P04"
                }),
                "{message}"
            );
            assert!(!answer_lost(&*error), "{message}");
        }
    }

    /// The same error reads the same through diesel, by its words, as through lease-sqlx, by
    /// its code, wherever the words tell the code.
    #[test]
    fn messages_read_as_lease_sqlx_reads_their_codes() {
        use lease_sql::{
            mysql_error_kind, mysql_error_kind_with_message, postgres_error_kind, sqlite_error_kind,
        };

        for (message, code_kind) in [
            // A table opened read-only, on a server that takes writes.
            ("Table 'leases' is read only", mysql_error_kind(1036)),
            // A server in read-only mode.
            (
                "The MariaDB server is running with the --read-only option so it cannot execute this statement",
                mysql_error_kind(1290),
            ),
            ("Running in read-only mode", mysql_error_kind(1836)),
            (
                "Out of memory; restart server and try again (needed 65536 bytes)",
                mysql_error_kind(1037),
            ),
            (
                "Got error 30 \"Read-only file system\" from storage engine InnoDB",
                mysql_error_kind(1030),
            ),
            // Out of space, as PostgreSQL's 53100 and SQLite's SQLITE_FULL.
            ("The table 'leases' is full", mysql_error_kind(1114)),
            (
                "Disk full (./test/leases.ibd); waiting for someone to free some space... (errno: 28 \"No space left on device\")",
                mysql_error_kind(1021),
            ),
            (
                "Got error 28 \"No space left on device\" from storage engine InnoDB",
                mysql_error_kind_with_message(
                    1030,
                    "Got error 28 \"No space left on device\" from storage engine InnoDB",
                ),
            ),
            (
                "Error writing file './mysql-bin.000004' (Errcode: 122 \"Disk quota exceeded\")",
                mysql_error_kind_with_message(
                    3,
                    "Error writing file './mysql-bin.000004' (Errcode: 122 \"Disk quota exceeded\")",
                ),
            ),
            (
                "Error writing file './mysql-bin.000004' (Errcode: 13 \"Permission denied\")",
                mysql_error_kind_with_message(
                    3,
                    "Error writing file './mysql-bin.000004' (Errcode: 13 \"Permission denied\")",
                ),
            ),
            ("database or disk is full", sqlite_error_kind(13)),
            ("attempt to write a readonly database", sqlite_error_kind(8)),
            (
                "could not obtain lock on row in relation \"leases\"",
                postgres_error_kind("55P03"),
            ),
            (
                "could not read block 7 in file \"base/16384/16385\": No such file or directory",
                postgres_error_kind("58P01"),
            ),
            (
                "could not read block 7 in file \"base/16384/16385\": Input/output error",
                postgres_error_kind("58030"),
            ),
            (
                "could not read blocks 7..7 in file \"base/16384/16385\": read only 0 of 8192 bytes",
                postgres_error_kind("XX001"),
            ),
            (
                "could not extend file \"base/16384/16385\": Read-only file system",
                postgres_error_kind("42501"),
            ),
            (
                "cannot execute UPDATE in a read-only transaction",
                postgres_error_kind("25006"),
            ),
            // PostgreSQL's 53200; SQLite's SQLITE_NOMEM says the same words, and reads so too.
            ("out of memory", postgres_error_kind("53200")),
        ] {
            let error = database(DatabaseErrorKind::Unknown, message);
            assert_eq!(error_kind(&*error), code_kind, "{message}");
        }
    }
}
