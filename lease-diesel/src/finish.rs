//! [`Finish`]: a statement that runs on its caller's task and, if the caller stops waiting
//! half-way, finishes on a task of its own.
//!
//! A caller may stop waiting at any moment (lease-core puts the store timeout around every
//! call), and a pool or a driver dropped half-way can leave a connection mid-protocol: bb8 puts
//! back a connection whose check-out ping was cut, and diesel-async's MariaDB connection then
//! reads half a reply as the next statement's. So a statement is not cut when its caller
//! leaves: while the caller waits it runs on the caller's task, with no task spawned and no
//! wake-up crossing threads;
//! when the caller's future is dropped before the statement ended, the rest of it (the
//! connection it holds included) moves to a tokio task that drives it to its end, and the
//! connection goes back to the pool in order. A caller that stopped waiting before the pool gave
//! a connection has its statement not sent at all.
//!
//! The task of its own gives up after [`BACKGROUND_LIMIT`] on a server's connection (SQLite,
//! in process, has no server to fall silent, and diesel-async blocks a worker thread to drop
//! one of its statements half-way): a statement whose server went
//! silent without closing the connection (a failover that moved an address, a partition, a
//! frozen machine; MariaDB's driver keeps no TCP keepalive by default) would otherwise hold its
//! connection, and its place in the pool, until the socket fails, if ever, and a pool of a few
//! connections would be spent in as many timeouts. The statement's future is then dropped:
//! the executor marks a connection broken while its statement is on the wire, so the pool
//! closes it instead of handing it out mid-protocol; a wait for a connection ends with it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;

/// How long a statement whose caller stopped waiting may run on, on a task of its own (its
/// wait for a connection included), before it is dropped: far past any store timeout, and
/// short of the minutes a silent server may keep a socket open.
pub(crate) const BACKGROUND_LIMIT: Duration = Duration::from_secs(60);

/// Set once the caller of a statement stopped waiting for it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Abandoned(Arc<AtomicBool>);

impl Abandoned {
    /// Whether the caller stopped waiting: a statement not sent yet is then not sent.
    pub(crate) fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    fn set(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// One whose caller stopped waiting, for tests.
    #[cfg(test)]
    pub(crate) fn after_the_caller_left() -> Self {
        let abandoned = Self::default();
        abandoned.set();
        abandoned
    }
}

/// A statement's future, polled by its caller; see the module docs.
#[must_use = "a statement runs only when awaited"]
pub(crate) struct Finish<T: Send + 'static> {
    statement: Option<BoxFuture<'static, T>>,
    abandoned: Abandoned,
    /// How long it may run on its own task once abandoned; `None`: to its end.
    limit: Option<Duration>,
}

impl<T: Send + 'static> Finish<T> {
    /// `statement` run as described above; it reads `abandoned` once it has its connection,
    /// and, abandoned, runs on for `limit` at most (`None`: to its end).
    pub(crate) fn new(
        abandoned: Abandoned,
        limit: Option<Duration>,
        statement: impl Future<Output = T> + Send + 'static,
    ) -> Self {
        Self {
            statement: Some(Box::pin(statement)),
            abandoned,
            limit,
        }
    }
}

impl<T: Send + 'static> Future for Finish<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let Some(statement) = self.statement.as_mut() else {
            panic!("a finished statement polled again");
        };
        let output = std::task::ready!(statement.as_mut().poll(cx));
        self.statement = None;
        Poll::Ready(output)
    }
}

impl<T: Send + 'static> Drop for Finish<T> {
    fn drop(&mut self) {
        let Some(statement) = self.statement.take() else {
            return;
        };
        self.abandoned.set();
        // Outside a runtime (it is shutting down) nothing can drive it: it is dropped, and the
        // pool's connection with it.
        let limit = self.limit;
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let Some(limit) = limit else {
                    statement.await;
                    return;
                };
                if tokio::time::timeout(limit, statement).await.is_err() {
                    tracing::warn!(
                        ?limit,
                        "a statement whose caller stopped waiting had not ended: dropped, its connection closed"
                    );
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sets its flag when dropped.
    struct Dropped(Arc<AtomicBool>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Release);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_statement_that_never_ends_is_dropped_at_the_background_limit() {
        let dropped = Arc::new(AtomicBool::new(false));
        let held = Dropped(Arc::clone(&dropped));
        let statement = Finish::new(Abandoned::default(), Some(BACKGROUND_LIMIT), async move {
            // A connection whose server went silent: the answer never comes.
            let _connection = held;
            futures::future::pending::<()>().await
        });
        let cut = tokio::time::timeout(Duration::from_millis(10), statement).await;
        assert!(cut.is_err(), "the caller stopped waiting");
        tokio::time::sleep(BACKGROUND_LIMIT - Duration::from_secs(1)).await;
        assert!(!dropped.load(Ordering::Acquire), "dropped before its limit");
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(
            dropped.load(Ordering::Acquire),
            "still running past its limit"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_statement_dropped_half_way_runs_to_its_end_and_one_not_started_never_starts() {
        let (done, finished) = tokio::sync::oneshot::channel::<()>();
        let abandoned = Abandoned::default();
        let seen = abandoned.clone();
        let statement = Finish::new(abandoned, None, async move {
            // "The connection came": from here on the statement is sent.
            tokio::time::sleep(Duration::from_secs(1)).await;
            assert!(seen.get(), "the caller stopped waiting meanwhile");
            let _ = done.send(());
        });
        let cut = tokio::time::timeout(Duration::from_millis(10), statement).await;
        assert!(cut.is_err(), "the caller stopped waiting");
        tokio::time::timeout(Duration::from_secs(5), finished)
            .await
            .expect("the statement finished on a task of its own")
            .expect("and sent its answer");

        let (sent, not_sent) = tokio::sync::oneshot::channel::<()>();
        let abandoned = Abandoned::default();
        let seen = abandoned.clone();
        drop(Finish::new(abandoned, None, async move {
            if !seen.get() {
                let _ = sent.send(());
            }
        }));
        assert!(
            not_sent.await.is_err(),
            "a statement abandoned before it began never runs"
        );
    }
}
