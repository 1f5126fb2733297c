//! [`Error`]: everything that can go wrong, by what it means to the caller.

use std::fmt;
use std::time::Duration;

use crate::{Fence, LeaseName, StoreErrorKind};

/// The error type of a store's own failure (driver error, I/O, pool timeout, ...).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything that can go wrong with a lease.
///
/// Input errors ([`InvalidName`](Error::InvalidName), [`InvalidTtl`](Error::InvalidTtl),
/// [`InvalidIdentifier`](Error::InvalidIdentifier), [`InvalidConfig`](Error::InvalidConfig))
/// are returned before any statement reaches a store. A store's own failure is
/// [`Store`](Error::Store), with the driver's error as its [`source`](std::error::Error::source)
/// and a [`StoreErrorKind`] that tells whether trying again may help
/// ([`is_transient`](Error::is_transient)).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A lease name was empty, too long or contained a NUL character.
    #[error("invalid lease name {name:?}: {reason}")]
    InvalidName {
        /// The rejected name, as given.
        name: String,
        /// Why it was rejected.
        reason: NameError,
    },

    /// A TTL outside [`Ttl::MIN`](crate::Ttl::MIN)..=[`Ttl::MAX`](crate::Ttl::MAX).
    #[error("invalid TTL {requested:?}: must be between {min:?} and {max:?}", min = crate::Ttl::MIN.get(), max = crate::Ttl::MAX.get())]
    InvalidTtl {
        /// The rejected duration.
        requested: Duration,
    },

    /// A table or schema name that is not a plain SQL identifier.
    #[error("invalid SQL identifier {identifier:?}: {reason}")]
    InvalidIdentifier {
        /// The rejected identifier, as given.
        identifier: String,
        /// Why it was rejected.
        reason: &'static str,
    },

    /// A client setting that cannot work, such as a renewal period not shorter than the TTL.
    #[error("invalid lease configuration: {reason}")]
    InvalidConfig {
        /// What is wrong with it.
        reason: String,
    },

    /// The lease is no longer held by this holder: it expired, was taken over, or the local
    /// deadline passed before a renewal succeeded.
    #[error("lease {name} was lost: {reason}")]
    Lost {
        /// The lease that was lost.
        name: LeaseName,
        /// How it was lost.
        reason: LossReason,
    },

    /// A fenced check found the lease no longer held by this holder with this fence: its row
    /// names another holder or fence, or has expired by the database's clock. The guard is then
    /// marked lost with [`LossReason::NotHeld`], so work under
    /// [`run_exclusive`](crate::LeaseClient::run_exclusive) is stopped at once.
    ///
    /// Made by [`LeaseHandle::mark_not_held`](crate::LeaseHandle::mark_not_held).
    #[error("lease {name:?} is no longer held with fence {fence}")]
    NotHeld {
        /// The lease that is no longer held.
        name: LeaseName,
        /// The fence the check was made with.
        fence: Fence,
    },

    /// Waiting for a lease gave up because somebody else held it for the whole time.
    #[error("timed out after {waited:?} waiting for lease {name}")]
    Timeout {
        /// The lease that was waited for.
        name: LeaseName,
        /// How long the caller waited.
        waited: Duration,
    },

    /// The client is shutting down (see [`LeaseClient::shutdown`](crate::LeaseClient::shutdown)):
    /// it takes no new leases and starts no new work or campaigns.
    #[error("the lease client is shutting down: lease {name} not taken")]
    ShuttingDown {
        /// The lease that was asked for.
        name: LeaseName,
    },

    /// The lease table exists but has not the columns, types or key the store needs: found by a
    /// SQL store's `setup` or `verify` before any lease statement runs. Nothing was changed.
    ///
    /// When the table is an earlier shape of a lease table (such as one without a `fence`
    /// column), `upgrade` is the SQL that brings it to the store's shape while keeping its
    /// rows (a lease held now stays held until it expires); when the table does not exist (a
    /// check without setup), the SQL that creates it; when it is a table of another kind,
    /// `None` and `other_kind`: give the store another table name; when it is a lease table the
    /// store cannot change (SQLite's, with columns of its own; one on storage that loses rows,
    /// such as PostgreSQL's `UNLOGGED`), `None`, and `mismatch` says what to do by hand.
    #[error(
        "lease table {table} does not fit the store: {mismatch}{}",
        DisplayUpgrade(.upgrade, *.other_kind)
    )]
    SchemaMismatch {
        /// The table, as configured (`name` or `schema.name`).
        table: String,
        /// What does not fit, for a person to read: each column or key that differs, and how.
        mismatch: String,
        /// The SQL that upgrades the table in place, when it can be upgraded.
        upgrade: Option<String>,
        /// Whether it is a table of another kind than a lease table, which no SQL makes one.
        other_kind: bool,
    },

    /// The store failed: connection refused, pool timed out, statement rejected, ...
    ///
    /// Its message names the operation and the lease, and leaves the kind to code (read it
    /// with [`store_error_kind`](Self::store_error_kind)), except
    /// [`OutcomeUnknown`](StoreErrorKind::OutcomeUnknown), which the message says too: a person
    /// who reads "failed" would take it that nothing happened.
    #[error("lease store failed to {operation}{}{}", DisplayLease(.name), DisplayOutcome(*.kind))]
    Store {
        /// The operation that failed.
        operation: Operation,
        /// The lease it concerned, if it concerned one.
        name: Option<LeaseName>,
        /// What the failure means to whoever would try again.
        kind: StoreErrorKind,
        /// The store's own error.
        #[source]
        source: BoxError,
    },
}

impl Error {
    /// A store error for `operation` on `name`, wrapping the driver's error, of kind
    /// [`StoreErrorKind::Transient`]: what a store that does not classify its errors reports, so
    /// that waits and campaigns ride it out. A store that knows better says so with
    /// [`store_of_kind`](Self::store_of_kind).
    pub fn store(
        operation: Operation,
        name: Option<&LeaseName>,
        source: impl Into<BoxError>,
    ) -> Self {
        Self::store_of_kind(operation, name, StoreErrorKind::Transient, source)
    }

    /// A store error for `operation` on `name` of a known `kind`, wrapping the driver's error.
    pub fn store_of_kind(
        operation: Operation,
        name: Option<&LeaseName>,
        kind: StoreErrorKind,
        source: impl Into<BoxError>,
    ) -> Self {
        Self::Store {
            operation,
            name: name.cloned(),
            kind,
            source: source.into(),
        }
    }

    /// The kind of a store's failure; `None` for every other error.
    pub fn store_error_kind(&self) -> Option<StoreErrorKind> {
        match self {
            Self::Store { kind, .. } => Some(*kind),
            _ => None,
        }
    }

    /// Whether the same call may succeed if made again: a store failure of any kind but
    /// [`StoreErrorKind::Permanent`] and [`StoreErrorKind::OutcomeUnknown`] (a timeout, a
    /// broken connection, a read-only server after a failover, a conflict with a concurrent
    /// transaction). Input errors, lost leases, permanent store failures and commits whose
    /// answer was lost are not transient; neither is [`Timeout`](Self::Timeout), which is a
    /// wait that already gave up.
    pub fn is_transient(&self) -> bool {
        self.store_error_kind()
            .is_some_and(StoreErrorKind::is_transient)
    }

    /// Whether this is the caller's input or configuration, which retrying cannot fix.
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            Self::InvalidName { .. }
                | Self::InvalidTtl { .. }
                | Self::InvalidIdentifier { .. }
                | Self::InvalidConfig { .. }
        )
    }
}

struct DisplayLease<'a>(&'a Option<LeaseName>);

impl fmt::Display for DisplayLease<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(name) => write!(f, " lease {name:?}"),
            None => Ok(()),
        }
    }
}

struct DisplayOutcome(StoreErrorKind);

impl fmt::Display for DisplayOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            StoreErrorKind::OutcomeUnknown => write!(f, ", and {}", self.0),
            _ => Ok(()),
        }
    }
}

struct DisplayUpgrade<'a>(&'a Option<String>, bool);

impl fmt::Display for DisplayUpgrade<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self(Some(sql), _) => write!(f, "; the SQL that fixes it:\n{sql}"),
            Self(None, true) => {
                f.write_str("; it is not a lease table: give the store another table name")
            }
            // A lease table to change by hand: the mismatch says how.
            Self(None, false) => Ok(()),
        }
    }
}

/// Why a lease name was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NameError {
    /// The name was empty.
    #[error("it is empty")]
    Empty,
    /// The name was longer than [`LeaseName::MAX_LEN`] bytes.
    #[error("it is {len} bytes long, more than {} allowed", LeaseName::MAX_LEN)]
    TooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// The name contained a NUL character.
    #[error("it contains a NUL character")]
    ContainsNul,
}

/// How a holder learnt that its lease is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LossReason {
    /// The store answered that this holder no longer holds the lease: it expired, or somebody
    /// else took it over.
    Rejected,
    /// No renewal succeeded before the local deadline (the TTL after the last successful renewal
    /// was sent, minus the safety margin): the store may be unreachable, and may soon hand the
    /// lease to somebody else.
    DeadlinePassed,
    /// A fenced check (a statement conditioned on this holder and fence, such as a write made
    /// inside the caller's transaction) found that the lease is no longer held by this holder;
    /// see [`LeaseHandle::mark_not_held`](crate::LeaseHandle::mark_not_held).
    NotHeld,
    /// The client shut down (see [`LeaseClient::shutdown`](crate::LeaseClient::shutdown)) and
    /// gave the lease back itself, because its guard was not released within the grace period,
    /// or stopped the work that held it, or ended the campaign that led with it (the term's
    /// lease, [`Leader::lease`](crate::Leader::lease), learns of it before the release is sent).
    ShutDown,
    /// The campaign that led with this lease ended and gave it back:
    /// [`Leader::resign`](crate::Leader::resign), the last [`Leader`](crate::Leader) dropped, or
    /// the campaign's future dropped. The term's lease ([`Leader::lease`](crate::Leader::lease))
    /// learns of it before the release is sent, so work under the leadership that stops when
    /// told stops before another instance can lead. (The client's shutdown ends campaigns with
    /// [`ShutDown`](Self::ShutDown).) A leadership given back is counted as a release, not as a
    /// loss ([`Losses`](crate::Losses)).
    Resigned,
}

impl fmt::Display for LossReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Rejected => "the store no longer has it for this holder",
            Self::DeadlinePassed => "no renewal succeeded before the local deadline",
            Self::NotHeld => "a fenced check found the lease no longer held by this holder",
            Self::ShutDown => "the client shut down and gave it back",
            Self::Resigned => "the campaign resigned and gave it back",
        })
    }
}

/// A store operation, as named in [`Error::Store`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Operation {
    /// [`LeaseStore::try_acquire`](crate::LeaseStore::try_acquire).
    Acquire,
    /// [`LeaseStore::renew`](crate::LeaseStore::renew).
    Renew,
    /// [`LeaseStore::renew_many`](crate::LeaseStore::renew_many).
    RenewMany,
    /// [`LeaseStore::release`](crate::LeaseStore::release).
    Release,
    /// [`LeaseStore::inspect`](crate::LeaseStore::inspect).
    Inspect,
    /// [`LeaseStore::list`](crate::LeaseStore::list).
    List,
    /// Creating the lease table, or checking the one that exists.
    Setup,
    /// [`LeaseStore::release_events`](crate::LeaseStore::release_events): subscribing to
    /// releases.
    Subscribe,
    /// A fenced check inside the caller's transaction (the SQL stores' `fence`).
    Fence,
    /// [`LeaseStore::prune`](crate::LeaseStore::prune).
    Prune,
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Acquire => "acquire",
            Self::Renew => "renew",
            Self::RenewMany => "renew many",
            Self::Release => "release",
            Self::Inspect => "inspect",
            Self::List => "list",
            Self::Setup => "set up",
            Self::Subscribe => "subscribe to releases",
            Self::Fence => "check the fence of",
            Self::Prune => "prune released leases",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn store_error_names_operation_and_lease_and_keeps_source_out_of_display() {
        let name = LeaseName::new("sweep").unwrap();
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let err = Error::store(Operation::Renew, Some(&name), io);
        assert_eq!(
            err.to_string(),
            "lease store failed to renew lease \"sweep\""
        );
        assert_eq!(err.source().unwrap().to_string(), "refused");
        assert!(!err.is_invalid_input());

        let err = Error::store(Operation::List, None, "down");
        assert_eq!(err.to_string(), "lease store failed to list");
    }

    #[test]
    fn schema_mismatch_names_the_table_and_prints_the_upgrade() {
        let err = Error::SchemaMismatch {
            table: "leases".to_owned(),
            mismatch: "column fence is missing".to_owned(),
            upgrade: Some(
                "ALTER TABLE leases ADD COLUMN fence bigint NOT NULL DEFAULT 0;".to_owned(),
            ),
            other_kind: false,
        };
        assert_eq!(
            err.to_string(),
            "lease table leases does not fit the store: column fence is missing; the SQL that \
             fixes it:\nALTER TABLE leases ADD COLUMN fence bigint NOT NULL DEFAULT 0;"
        );
        assert!(err.source().is_none());
        let err = Error::SchemaMismatch {
            table: "users".to_owned(),
            mismatch: "column holder is missing".to_owned(),
            upgrade: None,
            other_kind: true,
        };
        assert!(
            err.to_string()
                .ends_with("it is not a lease table: give the store another table name")
        );
        let err = Error::SchemaMismatch {
            table: "leases".to_owned(),
            mismatch: "rebuild the table by hand".to_owned(),
            upgrade: None,
            other_kind: false,
        };
        assert_eq!(
            err.to_string(),
            "lease table leases does not fit the store: rebuild the table by hand"
        );
    }

    #[test]
    fn store_errors_are_transient_unless_classified_permanent() {
        let name = LeaseName::new("sweep").unwrap();
        let unclassified = Error::store(Operation::Renew, Some(&name), "refused");
        assert_eq!(
            unclassified.store_error_kind(),
            Some(StoreErrorKind::Transient)
        );
        assert!(unclassified.is_transient());
        for (kind, transient) in [
            (StoreErrorKind::ReadOnly, true),
            (StoreErrorKind::Conflict, true),
            (StoreErrorKind::Transient, true),
            (StoreErrorKind::Permanent, false),
        ] {
            let err = Error::store_of_kind(Operation::Acquire, Some(&name), kind, "cause");
            assert_eq!(err.store_error_kind(), Some(kind));
            assert_eq!(err.is_transient(), transient, "{kind:?}");
            // The kind stays out of Display, as the cause does: both are for code to read.
            assert_eq!(
                err.to_string(),
                "lease store failed to acquire lease \"sweep\""
            );
        }
        // Except a lost answer, which a person must not read as "nothing happened".
        let unknown = Error::store_of_kind(
            Operation::Fence,
            Some(&name),
            StoreErrorKind::OutcomeUnknown,
            "connection reset",
        );
        assert!(!unknown.is_transient());
        assert_eq!(
            unknown.to_string(),
            "lease store failed to check the fence of lease \"sweep\", and the answer was lost: \
             whether it took effect is unknown"
        );
        let timeout = Error::Timeout {
            name: name.clone(),
            waited: Duration::from_secs(1),
        };
        assert!(!timeout.is_transient());
        assert_eq!(timeout.store_error_kind(), None);
        let lost = Error::Lost {
            name,
            reason: LossReason::Rejected,
        };
        assert!(!lost.is_transient());
    }

    #[test]
    fn not_held_names_the_lease_and_the_fence() {
        let err = Error::NotHeld {
            name: LeaseName::new("sweep").unwrap(),
            fence: Fence::new(7),
        };
        assert_eq!(
            err.to_string(),
            "lease \"sweep\" is no longer held with fence 7"
        );
        assert!(err.source().is_none());
        assert!(!err.is_invalid_input());

        let lost = Error::Lost {
            name: LeaseName::new("sweep").unwrap(),
            reason: LossReason::NotHeld,
        };
        assert_eq!(
            lost.to_string(),
            "lease sweep was lost: a fenced check found the lease no longer held by this holder"
        );
    }
}
