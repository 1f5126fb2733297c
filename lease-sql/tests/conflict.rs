//! What `SqlStore` makes of a statement the database rolled back for a conflict (a deadlock, a
//! serialization failure, a write that lost a Galera certification), on an executor that answers
//! what each test scripts: try-acquire sends the statement once more, and a second conflict
//! means "not acquired"; any other error is an error, sent once; renew sends a conflict once
//! more too, but a second one is an error (only an acquisition can lose to the other write).
//! A statement refused as read-only is sent again on the pool's other connections (each
//! closed as it answers the refusal), and twice with none idle, as after a demotion that left the
//! old server's sessions open.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::pin;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

use async_trait::async_trait;
use lease_core::{
    BoxError, Error, Fence, HolderId, LeaseName, LeaseStore, Operation, StoreErrorKind, Ttl,
};
use lease_sql::{Dialect, Execute, LeaseRow, PoolState, Query, SqlStore};

/// A database error of one kind, as the scripted executor answers it.
#[derive(Debug)]
struct Refused(StoreErrorKind);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "refused: {}", self.0)
    }
}

impl std::error::Error for Refused {}

/// One scripted answer: try-acquire's `(fence, won)` row, or an error of a kind.
type Answer = Result<(i64, i64), StoreErrorKind>;

/// An executor that answers try-acquire and renew from a script, one answer per statement, and
/// counts the statements it was sent. Its pool holds `open` idle connections (and, where a test
/// says so, `busy` ones other calls are using); a read-only refusal closes the idle one that
/// answered it, as a real executor does, and once none is idle each statement goes out on a
/// connection the pool opens for it (`opened` counts them).
#[derive(Debug, Default)]
struct Scripted {
    answers: Mutex<VecDeque<Answer>>,
    sent: Mutex<usize>,
    open: Mutex<u32>,
    busy: u32,
    opened: Mutex<usize>,
    /// A refused connection stays counted idle (deadpool's way: dropped at its next checkout).
    keeps_refused: bool,
}

impl Scripted {
    fn new(answers: impl IntoIterator<Item = Answer>) -> Self {
        Self::with_pool(0, answers)
    }

    /// A pool that holds `open` idle connections.
    fn with_pool(open: u32, answers: impl IntoIterator<Item = Answer>) -> Self {
        Self {
            answers: Mutex::new(answers.into_iter().collect()),
            sent: Mutex::new(0),
            open: Mutex::new(open),
            busy: 0,
            opened: Mutex::new(0),
            keeps_refused: false,
        }
    }

    /// The same pool, keeping a refused connection counted idle.
    fn keeping_refused(mut self) -> Self {
        self.keeps_refused = true;
        self
    }

    /// The same pool with `busy` more connections, which other calls are using.
    fn with_busy(mut self, busy: u32) -> Self {
        self.busy = busy;
        self
    }

    fn next(&self) -> Result<(i64, i64), BoxError> {
        *self.sent.lock().unwrap() += 1;
        // An idle connection if there is one, else a new one.
        let on_idle = *self.open.lock().unwrap() > 0;
        if !on_idle {
            *self.opened.lock().unwrap() += 1;
        }
        match self.answers.lock().unwrap().pop_front() {
            Some(Ok(row)) => Ok(row),
            Some(Err(kind)) => {
                if kind == StoreErrorKind::ReadOnly && on_idle && !self.keeps_refused {
                    *self.open.lock().unwrap() -= 1;
                }
                Err(Box::new(Refused(kind)))
            }
            None => Err("the script has no answer left".into()),
        }
    }
}

#[async_trait]
impl Execute for Scripted {
    type Pool = ();

    fn dialect(&self) -> Dialect {
        Dialect::MySql
    }

    fn pool(&self) -> &() {
        &()
    }

    fn pool_state(&self) -> PoolState {
        let open = *self.open.lock().unwrap();
        PoolState {
            size: open + self.busy,
            idle: open,
        }
    }

    /// A scripted `OutcomeUnknown` is a connection that broke with the statement sent: a
    /// transient failure whose answer was lost.
    fn classify(&self, error: &(dyn std::error::Error + Send + Sync + 'static)) -> StoreErrorKind {
        match error.downcast_ref::<Refused>() {
            Some(Refused(StoreErrorKind::OutcomeUnknown)) => StoreErrorKind::Transient,
            Some(Refused(kind)) => *kind,
            None => StoreErrorKind::Permanent,
        }
    }

    /// Every scripted error was answered, but a scripted `OutcomeUnknown`.
    fn code_ends_session(
        &self,
        error: &(dyn std::error::Error + Send + Sync + 'static),
    ) -> Option<bool> {
        error
            .downcast_ref::<Refused>()
            .map(|refused| refused.0 == StoreErrorKind::OutcomeUnknown)
    }

    async fn int_pairs(&self, _: Query<'_>) -> Result<Vec<(i64, i64)>, BoxError> {
        Ok(vec![self.next()?])
    }

    async fn ints(&self, _: Query<'_>) -> Result<Vec<i64>, BoxError> {
        Err("not scripted".into())
    }

    async fn text_pairs(&self, _: Query<'_>) -> Result<Vec<(String, String)>, BoxError> {
        Err("not scripted".into())
    }

    async fn lease_rows(&self, _: Query<'_>) -> Result<Vec<LeaseRow>, BoxError> {
        Err("not scripted".into())
    }

    async fn affected(&self, _: Query<'_>) -> Result<u64, BoxError> {
        // A renew answers how many rows it matched: the row's first number.
        Ok(u64::try_from(self.next()?.0)?)
    }

    async fn batch(&self, _: &str) -> Result<(), BoxError> {
        Err("not scripted".into())
    }
}

/// The answer of `future`, which the scripted executor lets finish at its first poll.
fn at_once<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the scripted executor never waits"),
    }
}

/// Try-acquire on a store whose executor answers `script`: the answer, and how many statements
/// were sent.
fn acquire(script: impl IntoIterator<Item = Answer>) -> (Result<Option<Fence>, Error>, usize) {
    let store = SqlStore::<Scripted>::new(Scripted::new(script));
    let name = LeaseName::new("nightly").unwrap();
    let answer =
        at_once(store.try_acquire(&name, &HolderId::generate(), Ttl::from_secs(30).unwrap()));
    let sent = *store.executor().sent.lock().unwrap();
    (answer, sent)
}

const WON: (i64, i64) = (1_700_000_000_000_000, 1);

#[test]
fn a_conflict_then_success_is_acquired() {
    let (answer, sent) = acquire([Err(StoreErrorKind::Conflict), Ok(WON)]);
    assert_eq!(answer.unwrap(), Some(Fence::new(WON.0 as u64)));
    assert_eq!(sent, 2, "sent once more after the conflict");
}

#[test]
fn two_conflicts_are_not_acquired() {
    let (answer, sent) = acquire([
        Err(StoreErrorKind::Conflict),
        Err(StoreErrorKind::Conflict),
        Ok(WON),
    ]);
    assert_eq!(answer.unwrap(), None, "the other write certified first");
    assert_eq!(sent, 2, "not sent a third time");
}

#[test]
fn a_lost_race_answered_as_a_row_is_not_acquired() {
    // The control of the two above: "not acquired" is also what a held lease answers, and a
    // win is told apart from it only by the row's flag.
    let (answer, sent) = acquire([Ok((42, 0))]);
    assert_eq!(answer.unwrap(), None);
    assert_eq!(sent, 1);
}

#[test]
fn other_errors_are_errors_sent_once() {
    for kind in [StoreErrorKind::Transient, StoreErrorKind::Permanent] {
        let (answer, sent) = acquire([Err(kind), Ok(WON)]);
        match answer {
            Err(error @ Error::Store { .. }) => {
                assert_eq!(error.store_error_kind(), Some(kind));
                assert!(matches!(
                    error,
                    Error::Store {
                        operation: Operation::Acquire,
                        ..
                    }
                ));
            }
            other => panic!("a {kind} error answered {other:?}"),
        }
        assert_eq!(sent, 1, "a {kind} error is not sent again");
    }
}

#[test]
fn a_conflict_after_a_conflict_is_an_error_for_renew() {
    let renew = |script: Vec<Answer>| {
        let store = SqlStore::<Scripted>::new(Scripted::new(script));
        let name = LeaseName::new("nightly").unwrap();
        let answer =
            at_once(store.renew(&name, &HolderId::generate(), Ttl::from_secs(30).unwrap()));
        (answer, *store.executor().sent.lock().unwrap())
    };
    let (answer, sent) = renew(vec![Err(StoreErrorKind::Conflict), Ok((1, 0))]);
    assert!(answer.unwrap(), "renewed at the second send");
    assert_eq!(sent, 2);
    let (answer, sent) = renew(vec![
        Err(StoreErrorKind::Conflict),
        Err(StoreErrorKind::Conflict),
    ]);
    assert_eq!(
        answer.unwrap_err().store_error_kind(),
        Some(StoreErrorKind::Conflict),
        "a renewal is never answered \"not renewed\" for a conflict"
    );
    assert_eq!(sent, 2);
}

/// An acquisition sent and its answer lost may have taken the lease: its error says so
/// (`OutcomeUnknown`, which the client answers by giving the lease back), and it is not sent
/// again. Its control is the case above: a transient error whose answer came stays transient.
#[test]
fn a_lost_answer_is_an_unknown_outcome() {
    let (answer, sent) = acquire([Err(StoreErrorKind::OutcomeUnknown), Ok(WON)]);
    match answer {
        Err(error) => assert_eq!(
            error.store_error_kind(),
            Some(StoreErrorKind::OutcomeUnknown),
            "{error:?}"
        ),
        other => panic!("a lost answer answered {other:?}"),
    }
    assert_eq!(sent, 1);
}

/// Try-acquire and renew on a store whose pool holds `open` connections and whose executor
/// answers `script`: each answer (renew's as acquired or not), and how many statements each
/// sent.
fn acquire_and_renew(open: u32, script: &[Answer]) -> [(Result<bool, Error>, usize); 2] {
    let name = LeaseName::new("nightly").unwrap();
    let ttl = Ttl::from_secs(30).unwrap();
    let store = SqlStore::<Scripted>::new(Scripted::with_pool(open, script.to_vec()));
    let acquired = at_once(store.try_acquire(&name, &HolderId::generate(), ttl));
    let acquired = (
        acquired.map(|fence| fence.is_some()),
        *store.executor().sent.lock().unwrap(),
    );
    let store = SqlStore::<Scripted>::new(Scripted::with_pool(open, script.to_vec()));
    let renewed = at_once(store.renew(&name, &HolderId::generate(), ttl));
    [(renewed, *store.executor().sent.lock().unwrap()), acquired]
}

/// A demotion that left the old server's sessions open: every connection of a pool of four
/// leads to a read-only server, and the fifth, which the pool opens once they are closed,
/// finds the new primary. One call goes through, sent five times; before, each refusal failed
/// a call of its own (a holder's renewal four times, a quarter period apart).
#[test]
fn read_only_refusals_are_sent_again_on_the_pools_other_connections() {
    let mut script = vec![Err(StoreErrorKind::ReadOnly); 4];
    script.push(Ok(WON));
    for (answer, sent) in acquire_and_renew(4, &script) {
        assert!(
            answer.unwrap(),
            "not taken, or not renewed, on the new primary"
        );
        assert_eq!(sent, 5, "four refusals, then the new connection");
    }
}

/// A server still read-only on a new connection (the switchover is not over) answers the
/// refusal, after the pool's idle connections and two sends with none idle (a connection given
/// back meanwhile, or a new one): the call is bounded by the pool.
#[test]
fn a_server_still_read_only_answers_the_refusal_after_the_pool() {
    let script = vec![Err(StoreErrorKind::ReadOnly); 200];
    for (answer, sent) in acquire_and_renew(4, &script) {
        assert_eq!(
            answer.unwrap_err().store_error_kind(),
            Some(StoreErrorKind::ReadOnly)
        );
        assert_eq!(sent, 6, "the four connections, and two new ones");
    }
    // A pool that holds nothing more: twice on a new connection.
    for (answer, sent) in acquire_and_renew(0, &script) {
        assert!(answer.is_err());
        assert_eq!(sent, 3);
    }
    // However large the pool, at most 64 more.
    for (answer, sent) in acquire_and_renew(1_000, &script) {
        assert!(answer.is_err());
        assert_eq!(sent, 65);
    }
}

/// Connections other calls are using are not counted: a pool of ten, nine of them busy, one
/// idle, whose server stays read-only, costs a call three statements and two new connections
/// (the idle one, then two the pool opens), where counting the busy ones opened ten.
#[test]
fn busy_connections_are_not_counted_for_sending_again() {
    let script = vec![Err(StoreErrorKind::ReadOnly); 200];
    let store = SqlStore::<Scripted>::new(Scripted::with_pool(1, script).with_busy(9));
    let name = LeaseName::new("nightly").unwrap();
    let answer = at_once(store.renew(&name, &HolderId::generate(), Ttl::from_secs(30).unwrap()));
    assert_eq!(
        answer.unwrap_err().store_error_kind(),
        Some(StoreErrorKind::ReadOnly)
    );
    assert_eq!(*store.executor().sent.lock().unwrap(), 3);
    assert_eq!(
        *store.executor().opened.lock().unwrap(),
        2,
        "new connections"
    );
}

/// A pool that counts a refused connection idle until its next checkout (deadpool) finds one
/// idle at every refusal: the sends are bounded by the pool's connections at the first refusal
/// and the two with none idle, not by the cap of 64 (a store on a replica would open 64
/// connections a call).
#[test]
fn a_pool_that_keeps_refused_connections_idle_is_bounded_by_its_size() {
    let script = vec![Err(StoreErrorKind::ReadOnly); 200];
    let store = SqlStore::<Scripted>::new(Scripted::with_pool(4, script).keeping_refused());
    let name = LeaseName::new("nightly").unwrap();
    let answer = at_once(store.renew(&name, &HolderId::generate(), Ttl::from_secs(30).unwrap()));
    assert_eq!(
        answer.unwrap_err().store_error_kind(),
        Some(StoreErrorKind::ReadOnly)
    );
    assert_eq!(*store.executor().sent.lock().unwrap(), 7, "1, then 4 + 2");
}
