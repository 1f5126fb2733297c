//! [`FencedBegin`]: where the begin of a fenced transaction stands among its tries.

use lease_core::LeaseHandle;
use tracing::Span;

use crate::{Attempt, CheckAt};

/// The begin of a fenced transaction, try by try: where its check goes ([`CheckAt`]) and how
/// the message reaches the check ([`Attempt`]).
///
/// [`SqlStore::fenced_begin`](crate::SqlStore::fenced_begin) makes the first try,
/// [`SqlStore::begin_message`](crate::SqlStore::begin_message) gives each try's message, and
/// after a try failed [`SqlStore::after_failed_begin`](crate::SqlStore::after_failed_begin)
/// moves it on or gives up. Every move goes one way: the check from the commit to the `BEGIN`
/// (the transaction reads from a snapshot, see [`SnapshotIsolation`](crate::SnapshotIsolation)),
/// from the prepared statements to preparing them, then to the check's text, and, once, the
/// same try again after the check in the `BEGIN`'s message lost to a concurrent update of the
/// lease's row (the holder's own renewal, under a snapshot). So a begin sends at most
/// [`MOST_TRIES`](FencedBegin::MOST_TRIES) begin messages (with the `ROLLBACK`s and the
/// preparation between them).
///
/// Once a try's message carries the check, the begin holds the check's `lease.store` span
/// ([`span`](FencedBegin::span)), the one every fenced check runs in, across the tries that
/// follow: a check that goes again after a move is one check, with one outcome.
#[derive(Debug, Clone)]
pub struct FencedBegin {
    at: CheckAt,
    attempt: Attempt,
    again: bool,
    span: Span,
}

impl FencedBegin {
    /// The most messages a begin sends: one try, and one after each move.
    pub const MOST_TRIES: usize = 5;

    pub(crate) fn new(at: CheckAt, attempt: Attempt) -> Self {
        Self {
            at,
            attempt,
            again: false,
            span: Span::none(),
        }
    }

    /// Where this try checks the lease.
    pub fn at(&self) -> CheckAt {
        self.at
    }

    /// How this try reaches the check.
    pub fn attempt(&self) -> Attempt {
        self.attempt
    }

    /// The `lease.store` span of the check this begin's messages carry (`lease.operation` =
    /// `fence`); a span that records nothing before the first message that carries it
    /// ([`SqlStore::begin_message`](crate::SqlStore::begin_message) opens it), and when the
    /// check goes elsewhere. A driver that sends the message itself sends it in this span.
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// Opens the span of the check of `lease` that this try's message carries, unless an
    /// earlier try's did.
    pub(crate) fn carry_check(&mut self, lease: &LeaseHandle) {
        if self.span.is_none() {
            self.span = crate::fence_span::span(lease);
        }
    }

    /// The check moves to the `BEGIN`; `false` when it is there already.
    pub(crate) fn check_at_begin(&mut self) -> bool {
        let moved = self.at == CheckAt::Commit;
        self.at = CheckAt::Begin;
        moved
    }

    /// The same try once more, after its check lost to a concurrent update; `false` when it
    /// was tried again already.
    pub(crate) fn again(&mut self) -> bool {
        !std::mem::replace(&mut self.again, true)
    }

    /// The next way to reach the check; `false` after the last ([`Attempt::Text`]).
    pub(crate) fn next_attempt(&mut self) -> bool {
        let next = match self.attempt {
            Attempt::Prepared => Attempt::PreparedAgain,
            Attempt::PreparedAgain => Attempt::Text,
            Attempt::Text => return false,
        };
        self.attempt = next;
        true
    }
}

/// What a begin does before its next try, once a try failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BeginMove {
    /// Rolls back the failed try's transaction.
    RollBack,
    /// Prepares the check's statements on the connection (their preparation ends the failed
    /// try's transaction).
    Prepare,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_move_goes_one_way_and_the_tries_are_bounded() {
        let mut begin = FencedBegin::new(CheckAt::Commit, Attempt::Prepared);
        let mut tries = 1;
        while begin.check_at_begin() || begin.next_attempt() || begin.again() {
            tries += 1;
        }
        assert_eq!(tries, FencedBegin::MOST_TRIES);
        assert_eq!(begin.at(), CheckAt::Begin);
        assert_eq!(begin.attempt(), Attempt::Text);
        assert!(!begin.check_at_begin());
        assert!(!begin.next_attempt());
        assert!(!begin.again());
    }
}
