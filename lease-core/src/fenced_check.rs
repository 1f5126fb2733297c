//! [`FencedCheck`]: how a fenced check of a held lease ended, as the client counts it.

/// How a fenced check of a held lease ended: the statement, run inside the caller's
/// transaction, that lets the transaction's writes commit only while the lease is still held
/// (lease-sqlx's and lease-diesel's `fenced`, and `fence` of their stores).
///
/// A store reports it with [`LeaseHandle::record_fenced_check`](crate::LeaseHandle::record_fenced_check);
/// the lease's client counts it in [`ClientStats::fenced_checks`](crate::ClientStats::fenced_checks)
/// and, with the `metrics` feature, as `lease_fenced_checks_total{lease, store, result}`. A
/// count of [`NotHeld`](FencedCheck::NotHeld) that grows is the fence at work: a holder that had
/// lost its lease tried to write, and nothing of it committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FencedCheck {
    /// The database found the lease held by this holder and fence, and not expired.
    Passed,
    /// The lease was gone (expired, taken over or released): the transaction committed nothing.
    NotHeld,
    /// The check could not tell: the statement failed (the connection, a serialization
    /// failure, a transaction that cannot be fenced). The transaction committed nothing.
    Failed,
    /// The check went out with the commit, and their answer was lost (the connection broke,
    /// or the server ended the session, on the way): the transaction may have committed, and
    /// its caller got a store error of the kind
    /// [`OutcomeUnknown`](crate::StoreErrorKind::OutcomeUnknown). Every one calls for a look
    /// at what that transaction wrote. (A transaction checked before its commit counts its
    /// check as passed, and a lost answer to its commit shows only in the caller's error.)
    Unknown,
}

impl FencedCheck {
    /// The value of the `result` label: `passed`, `not_held`, `failed` or `unknown`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::NotHeld => "not_held",
            Self::Failed => "failed",
            Self::Unknown => "unknown",
        }
    }
}
