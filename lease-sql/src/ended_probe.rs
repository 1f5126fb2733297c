//! [`EndedProbe`]: how a dialect tells whether fenced work ended its transaction.

/// A statement that tells, sent in a fenced transaction as a message of its own, whether the
/// work had ended the transaction ([`TransactionEnded`](crate::TransactionEnded)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndedProbe {
    /// A statement that fails, naming
    /// [`TRANSACTION_ENDED_MARKER`](crate::TRANSACTION_ENDED_MARKER), when no transaction is
    /// open any more, and answers otherwise (PostgreSQL, MariaDB).
    FailsWhenEnded(String),
    /// `BEGIN`: it fails in the open transaction, and begins one where the work had ended it
    /// (SQLite, which has no other way to tell); the transaction it begins is then rolled back
    /// with the fenced one, as a driver's transaction object expects one to be open.
    BeginsWhenEnded,
}
