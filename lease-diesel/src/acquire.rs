//! [`why_none`]: the reason a bb8 pool gave no connection.
//!
//! bb8 retries a connection the server refuses (it is down, or still starting) until its
//! connection timeout, and then answers only `Timed out in bb8`: the answer it also gives when
//! every connection it has is in use. At 3 a.m. the two call for different fixes, so when bb8
//! times out, one connection made outside the pool tells them apart. deadpool needs none of
//! this: it opens a connection when asked for one and answers that connection's own error.
//!
//! A store diagnoses one timeout at a time ([`Diagnoses`]), and not one whose caller stopped
//! waiting (its statement then finishes on a task of its own, see the `finish` module): nobody
//! reads that answer.

use std::fmt;
use std::future::Future;

use lease_core::BoxError;
use lease_sql::Diagnoses;

use crate::finish::Abandoned;

/// bb8's answer when a wait for a connection timed out, as `DieselPool::connection` gives it:
/// for the store to diagnose ([`why_none`]), which answers the error inside.
/// Made by bb8's pools alone (deadpool answers a failed connection's own error).
#[derive(Debug)]
#[cfg_attr(not(feature = "bb8"), allow(dead_code))]
pub(crate) struct TimedOut(pub(crate) BoxError);

impl fmt::Display for TimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for TimedOut {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

/// The error to answer for `error`, what `DieselPool::connection` answered. Where bb8 timed
/// out ([`TimedOut`]): `connect`'s error where it fails within a second (the server's refusal,
/// its answer while starting up, a rejected login), else bb8's timeout: where `connect`
/// succeeds, the server accepts connections and the pool's were all in use; where it does not
/// answer in time, the pool's timeout is the truest answer. The timeout too, without
/// connecting, while another wait of the store is diagnosed (`diagnoses`), or where the caller
/// stopped waiting (`abandoned`). Any other error as it is.
///
/// `connect` is a connection made with the pool's own manager (`DieselPool::dedicated`), so
/// it reaches the same server with the same settings.
pub(crate) async fn why_none<C, E>(
    error: BoxError,
    diagnoses: &Diagnoses,
    abandoned: &Abandoned,
    connect: impl Future<Output = Result<C, E>>,
) -> BoxError
where
    E: Into<BoxError>,
{
    let timed_out = match error.downcast::<TimedOut>() {
        Ok(timed_out) => timed_out.0,
        Err(other) => return other,
    };
    if abandoned.get() {
        return timed_out;
    }
    let diagnosis = tokio::time::timeout(Diagnoses::TIMEOUT, connect);
    match diagnoses.one_at_a_time(diagnosis).await {
        Some(Ok(Err(error))) => error.into(),
        // Dropped here: a connection of the diagnosis, never the caller's.
        Some(Ok(Ok(_connection))) => timed_out,
        // Not answered in time, or another diagnosis runs.
        Some(Err(_)) | None => timed_out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::channel::oneshot;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A connection that fails with `refused` once `go` is sent, counting the times it is
    /// attempted in `attempts`.
    async fn refused_after(
        go: oneshot::Receiver<()>,
        attempts: &AtomicUsize,
    ) -> Result<(), BoxError> {
        attempts.fetch_add(1, Ordering::SeqCst);
        let _ = go.await;
        Err("refused".into())
    }

    /// bb8's timeout as `DieselPool::connection` gives it.
    fn timed_out() -> BoxError {
        Box::new(TimedOut("Timed out in bb8".into()))
    }

    /// A connection refused at once.
    fn refused_now(attempts: &AtomicUsize) -> impl Future<Output = Result<(), BoxError>> + '_ {
        let (go, wait) = oneshot::channel();
        go.send(()).unwrap();
        refused_after(wait, attempts)
    }

    #[tokio::test]
    async fn one_diagnosis_of_a_store_runs_at_a_time() {
        let diagnoses = Diagnoses::default();
        let waiting = Abandoned::default();
        let attempts = AtomicUsize::new(0);
        let (go, wait) = oneshot::channel();
        let first = why_none(
            timed_out(),
            &diagnoses,
            &waiting,
            refused_after(wait, &attempts),
        );
        let mut first = std::pin::pin!(first);
        assert!(futures::poll!(first.as_mut()).is_pending());
        // Meanwhile, other timeouts of the store answer the timeout without connecting (twice:
        // one that did not connect frees nothing)...
        for _ in 0..2 {
            let second = why_none(timed_out(), &diagnoses, &waiting, refused_now(&attempts)).await;
            assert_eq!(second.to_string(), "Timed out in bb8");
            assert_eq!(attempts.load(Ordering::SeqCst), 1, "another one connected");
        }
        // ... while another store's is diagnosed.
        let another_store = Diagnoses::default();
        let other = why_none(
            timed_out(),
            &another_store,
            &waiting,
            refused_now(&attempts),
        )
        .await;
        assert_eq!(other.to_string(), "refused");
        go.send(()).unwrap();
        assert_eq!(first.await.to_string(), "refused");
        // Once it ended, the store's next timeout is diagnosed again.
        let third = why_none(timed_out(), &diagnoses, &waiting, refused_now(&attempts)).await;
        assert_eq!(third.to_string(), "refused");
        assert_eq!(attempts.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_caller_that_left_is_not_diagnosed_and_other_errors_pass() {
        let diagnoses = Diagnoses::default();
        let attempts = AtomicUsize::new(0);
        let left = Abandoned::after_the_caller_left();
        let answer = why_none(timed_out(), &diagnoses, &left, refused_now(&attempts)).await;
        assert_eq!(answer.to_string(), "Timed out in bb8");
        let waiting = Abandoned::default();
        let other = why_none(
            "pool closed".into(),
            &diagnoses,
            &waiting,
            refused_now(&attempts),
        )
        .await;
        assert_eq!(other.to_string(), "pool closed");
        assert_eq!(attempts.load(Ordering::SeqCst), 0);
        assert!(
            !other.is::<TimedOut>() && !answer.is::<TimedOut>(),
            "the marker reached the caller"
        );
    }
}
