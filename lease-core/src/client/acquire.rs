//! [`LeaseClient::acquire`]: wait for a lease, riding out a slow or flaky store.

use std::time::Duration;

use futures::future;

use crate::backoff::Backoff;
use crate::client::AnsweredLate;
use crate::clock::ticks;
use crate::guard::LeaseGuard;
use crate::handover;
use crate::{Error, IntoLeaseName, LeaseClient};

impl LeaseClient {
    /// Takes the lease `name`, waiting up to `timeout` while somebody else holds it. Attempts
    /// back off exponentially with jitter (see
    /// [`LeaseConfig::acquire_backoff`](crate::LeaseConfig::acquire_backoff)); where the store
    /// pushes releases ([`LeaseStore::release_events`](crate::LeaseStore::release_events)), a
    /// release wakes the wait at once.
    ///
    /// A store error that may pass ([`Error::is_transient`]: a statement that outlived the store
    /// timeout, a broken connection, a read-only server after a failover, a conflict) is ridden
    /// out like a held lease, with the same backoff, until `timeout`; a permanent one
    /// (permission denied, a missing table) ends the wait at once. A lease taken but answered
    /// after its local deadline had passed (a process stalled while the statement ran) is given
    /// back, as a lease nobody held (no guard is made for it, and no loss counted), and the
    /// wait goes on: the guard returned is held. An attempt that starts before
    /// `timeout` runs may finish up to one
    /// [store timeout](crate::LeaseConfig::store_timeout) after it, and up to one more where
    /// it gives back, on the caller's task, a lease answered past its deadline.
    ///
    /// # Errors
    /// [`Error::Timeout`] when the lease stayed held for the whole `timeout`; the last
    /// transient [`Error::Store`] when the store was still failing when `timeout` ran out; a
    /// permanent [`Error::Store`] at once; [`Error::ShuttingDown`] when
    /// [`shutdown`](LeaseClient::shutdown) begins during the wait; [`Error::InvalidName`]
    /// before any statement runs.
    ///
    /// # Cancel safety
    /// Cancelled between attempts, nothing is left behind. Cancelled during an attempt, as
    /// [`try_acquire`](LeaseClient::try_acquire): the lease may have been taken for nobody, and
    /// lapses after one TTL.
    pub async fn acquire(
        &self,
        name: impl IntoLeaseName,
        timeout: Duration,
    ) -> Result<LeaseGuard, Error> {
        let name = name.into_lease_name()?;
        let clock = self.clock();
        let started = clock.now();
        let give_up = started.saturating_add(ticks(timeout));
        let mut backoff = Backoff::new(self.config().acquire_backoff);
        loop {
            let released = self.listen(&name);
            // A lease answered past its local deadline is given back by `take` as never held
            // (no loss counted: nobody worked under it), and the wait goes on.
            let failed = match self.take(name.clone(), AnsweredLate::GiveBack).await {
                Ok(Some(guard)) if guard.is_held() => return Ok(guard),
                // Lost otherwise between its answer and here (found gone by a renewal): given
                // back as any lost lease is, and the wait goes on.
                Ok(Some(lost)) => {
                    let _ = lost.release().await;
                    None
                }
                Ok(None) => None,
                Err(error) if error.is_transient() => {
                    tracing::debug!(lease = %name, error = %crate::ErrorChain(&error), "acquire attempt failed; retrying");
                    Some(error)
                }
                Err(error) => return Err(error),
            };
            let now = clock.now();
            if now >= give_up {
                return Err(failed.unwrap_or_else(|| Error::Timeout {
                    name,
                    waited: Duration::from_nanos(now - started),
                }));
            }
            let pause = ticks(backoff.next_pause()).min(give_up - now);
            let sleep = clock.sleep_until(now + pause);
            let closing = self.shutdown_state().closing();
            // A shutdown ends the wait at once: the next attempt answers that it began.
            let sleep = async {
                future::select(std::pin::pin!(sleep), closing).await;
            };
            handover::pause(released, sleep).await;
        }
    }
}
