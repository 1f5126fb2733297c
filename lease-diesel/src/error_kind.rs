//! The [`StoreErrorKind`] of an error a diesel-async pool or connection answered.
//!
//! diesel keeps a database error's kind only for the few codes it names
//! (`ReadOnlyTransaction`, `SerializationFailure`, ...) and drops the code of every other one,
//! keeping its message; so what diesel does not name is read from the message, by the phrases
//! PostgreSQL, MariaDB and SQLite use for the conditions that matter to a retry.

use diesel::result::{DatabaseErrorKind, Error as DieselError};
use lease_core::StoreErrorKind;

/// What `error` means to whoever would try again. An error that is not diesel's comes from the
/// pool (no connection in time, a connection that could not be opened): transient, but for a
/// connection the server refused for good ([`connect_kind`]).
pub(crate) fn error_kind(
    error: &(dyn std::error::Error + Send + Sync + 'static),
) -> StoreErrorKind {
    match error.downcast_ref::<DieselError>() {
        Some(DieselError::DatabaseError(kind, information)) => match kind {
            DatabaseErrorKind::ReadOnlyTransaction => StoreErrorKind::ReadOnly,
            DatabaseErrorKind::SerializationFailure => StoreErrorKind::Conflict,
            DatabaseErrorKind::ClosedConnection | DatabaseErrorKind::UnableToSendCommand => {
                StoreErrorKind::Transient
            }
            _ => message_kind(information.message()),
        },
        Some(DieselError::BrokenTransactionManager) => StoreErrorKind::Transient,
        Some(_) => StoreErrorKind::Permanent,
        None => connect_kind(error),
    }
}

/// Phrases, lower case, of a connection the server refused for good: a wrong password or user
/// (PostgreSQL 28P01, 28000; MariaDB 1045), a database or role that does not exist (3D000;
/// MariaDB 1049), which waiting does not fix.
const REFUSED_FOR_GOOD: &[&str] = &[
    "password authentication failed",
    "no pg_hba.conf entry",
    "access denied",
    "unknown database",
    "does not exist",
];

/// What a failure of the pool means: transient (no connection in time, a server down or
/// starting), or permanent when a connection was refused for good ([`REFUSED_FOR_GOOD`],
/// anywhere in the error's chain: the pools wrap the connection's error), as lease-sqlx reads
/// their codes. A campaign then stops rather than retry a wrong password for ever.
fn connect_kind(error: &(dyn std::error::Error + 'static)) -> StoreErrorKind {
    let mut next = Some(error);
    // Bounded by the chain's length, which no error makes endless.
    while let Some(error) = next {
        let message = error.to_string().to_ascii_lowercase();
        if REFUSED_FOR_GOOD
            .iter()
            .any(|phrase| message.contains(phrase))
        {
            return StoreErrorKind::Permanent;
        }
        next = error.source();
    }
    StoreErrorKind::Transient
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
/// ([`lease_sql::ends_session`]). An error that is not diesel's (the pool's) had no answer
/// either.
pub(crate) fn answer_lost(error: &(dyn std::error::Error + Send + Sync + 'static)) -> bool {
    match error.downcast_ref::<DieselError>() {
        Some(DieselError::DatabaseError(
            DatabaseErrorKind::ClosedConnection | DatabaseErrorKind::UnableToSendCommand,
            _,
        )) => true,
        Some(DieselError::DatabaseError(_, information)) => {
            lease_sql::ends_session(information.message())
        }
        Some(_) => false,
        None => true,
    }
}

/// Phrases of the servers' messages, lower case, and what they mean; besides them, every
/// message of a session that ended ([`lease_sql::ends_session`]: a connection lost, reset,
/// killed or closed by a server shutting down, and the MariaDB driver's `Input/output error`)
/// is [`Transient`](StoreErrorKind::Transient).
const PHRASES: &[(&str, StoreErrorKind)] = &[
    // PostgreSQL 40P01; MariaDB 1213, also Galera's lost certification.
    ("deadlock", StoreErrorKind::Conflict),
    // MariaDB 1020, under `innodb_snapshot_isolation`: a row changed since the read view.
    (
        "record has changed since last read",
        StoreErrorKind::Conflict,
    ),
    // MariaDB 1290 (`--read-only`) and 1836; PostgreSQL 25006 as a standby words it.
    ("read-only", StoreErrorKind::ReadOnly),
    ("read only", StoreErrorKind::ReadOnly),
    ("during recovery", StoreErrorKind::ReadOnly),
    // MariaDB 1047: a Galera node that is not (yet) part of the primary component.
    ("wsrep", StoreErrorKind::Transient),
    ("lock wait timeout", StoreErrorKind::Transient),
    ("too many connections", StoreErrorKind::Transient),
    // MariaDB 1203 and 1226: an account's own connection limits.
    ("max_user_connections", StoreErrorKind::Transient),
    ("has exceeded the '", StoreErrorKind::Transient),
    ("shutting down", StoreErrorKind::Transient),
    ("starting up", StoreErrorKind::Transient),
    ("statement timeout", StoreErrorKind::Transient),
    ("max_statement_time", StoreErrorKind::Transient),
    // PostgreSQL 55P03 (`canceling statement due to lock timeout`) and 57014 (`... due to
    // user request`, a cancel), as lease-sqlx reads their codes.
    ("lock timeout", StoreErrorKind::Transient),
    ("canceling statement", StoreErrorKind::Transient),
    // MariaDB 4031: disconnected by the server for inactivity.
    ("inactivity", StoreErrorKind::Transient),
    // SQLite's SQLITE_BUSY and SQLITE_LOCKED.
    ("database is locked", StoreErrorKind::Transient),
    ("database table is locked", StoreErrorKind::Transient),
    // SQLite's SQLITE_IOERR, SQLITE_FULL and SQLITE_PROTOCOL, as lease-sqlx reads their codes.
    ("disk i/o error", StoreErrorKind::Transient),
    ("database or disk is full", StoreErrorKind::Transient),
    ("locking protocol", StoreErrorKind::Transient),
    // PostgreSQL's classes 53 (insufficient resources) and 58 (system error) as they word
    // them, as lease-sqlx reads their codes.
    ("out of memory", StoreErrorKind::Transient),
    ("no space left on device", StoreErrorKind::Transient),
    ("could not extend file", StoreErrorKind::Transient),
    ("could not write to file", StoreErrorKind::Transient),
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
        None if lease_sql::ends_session(message) => StoreErrorKind::Transient,
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

    #[test]
    fn connections_refused_for_good_are_permanent() {
        #[derive(Debug)]
        struct Pool(Box<dyn std::error::Error + Send + Sync>);
        impl std::fmt::Display for Pool {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("error occurred while creating a new object")
            }
        }
        impl std::error::Error for Pool {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&*self.0)
            }
        }
        let wrapped = |message: &str| -> Box<dyn std::error::Error + Send + Sync> {
            Box::new(Pool(message.to_owned().into()))
        };
        for message in [
            "db error: FATAL: password authentication failed for user \"app\"",
            "db error: FATAL: database \"app\" does not exist",
            "Server error: `ERROR 28000 (1045): Access denied for user 'app'@'localhost'",
            "Server error: `ERROR 42000 (1049): Unknown database 'app''",
        ] {
            assert_eq!(
                error_kind(&*wrapped(message)),
                StoreErrorKind::Permanent,
                "{message}"
            );
        }
        for message in [
            "error connecting to server: Connection refused (os error 111)",
            "db error: FATAL: the database system is starting up",
            "Timed out in bb8",
        ] {
            assert_eq!(
                error_kind(&*wrapped(message)),
                StoreErrorKind::Transient,
                "{message}"
            );
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
        let not_found: Box<dyn std::error::Error + Send + Sync> = Box::new(DieselError::NotFound);
        assert!(!answer_lost(&*not_found));
    }

    #[test]
    fn pool_failures_are_transient_and_other_diesel_errors_permanent() {
        let pool: Box<dyn std::error::Error + Send + Sync> =
            "timed out waiting for a connection".into();
        assert_eq!(error_kind(&*pool), StoreErrorKind::Transient);
        let not_found: Box<dyn std::error::Error + Send + Sync> = Box::new(DieselError::NotFound);
        assert_eq!(error_kind(&*not_found), StoreErrorKind::Permanent);
    }
}
