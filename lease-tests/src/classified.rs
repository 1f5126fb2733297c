//! Errors the database gives are classified as what they are: on a table nobody set up, the
//! refusal is [`StoreErrorKind::Permanent`], and a client's wait ends on it at once, where it
//! rides out a transient failure until its own timeout. Runs on any SQL store (lease-sql's
//! [`SqlStore`] over a driver's [`Execute`]), so every driver and database runs the same case.

use std::time::{Duration, Instant};

use lease_core::{
    BoxError, HolderId, LeaseClient, LeaseName, LeaseStore, Runtime, StoreErrorKind, Ttl,
};
use lease_sql::{Execute, SqlStore};

use crate::cases::severable::{Link, Severable};

/// How long the case's waits may last: long enough that a wait which retried a permanent error
/// would be seen to, against one that ends at once.
const WAIT: Duration = Duration::from_secs(20);
/// The control's wait, which must last this long.
const CONTROL_WAIT: Duration = Duration::from_millis(600);

/// `store` is on a table that does not exist. Its `try_acquire` fails with a
/// [`Permanent`](StoreErrorKind::Permanent) store error read from the database's own answer,
/// and a client's `acquire` on it answers that error at once rather than after its timeout.
/// The control: the same wait on the same store behind a refused connection (a transient
/// failure) lasts its whole timeout and ends with that transient error.
///
/// # Errors
/// What the store or the client did wrong, in words.
///
/// # Cancel safety
/// Cancel safe: the table does not exist and the control's link refuses every call, so no lease is
/// taken, and the two clients are dropped with the future.
pub async fn missing_table_is_permanent<X, R>(
    store: &SqlStore<X>,
    runtime: R,
) -> Result<(), BoxError>
where
    X: Execute + Clone,
    R: Runtime + Clone,
{
    let name = LeaseName::new("report")?;
    let ttl = Ttl::new(Duration::from_secs(30))?;
    match store.try_acquire(&name, &HolderId::generate(), ttl).await {
        Err(error) if error.store_error_kind() == Some(StoreErrorKind::Permanent) => {}
        Err(error) => {
            return Err(format!(
                "an acquisition on a missing table failed as {:?}, not as permanent: {error}",
                error.store_error_kind()
            )
            .into());
        }
        Ok(answer) => {
            return Err(format!("an acquisition on a missing table answered {answer:?}").into());
        }
    }

    let client = LeaseClient::builder(store.clone(), runtime.clone())
        .ttl(ttl)
        .store_timeout(Duration::from_secs(5))
        .build()?;
    let started = Instant::now();
    let waited = client.acquire(&name, WAIT).await;
    let took = started.elapsed();
    match waited {
        Err(error) if !error.is_transient() && took < WAIT / 2 => {}
        Err(error) => {
            return Err(format!(
                "the wait on a missing table ended after {took:?} of {WAIT:?} with {error} \
                 (transient: {}); a permanent error must end it at once",
                error.is_transient()
            )
            .into());
        }
        Ok(_) => return Err("a wait on a missing table took the lease".into()),
    }

    let cut = Severable::new(store.clone());
    cut.set(Link::Refusing);
    let control = LeaseClient::builder(cut, runtime)
        .ttl(ttl)
        .store_timeout(Duration::from_secs(5))
        .build()?;
    let started = Instant::now();
    let waited = control.acquire(&name, CONTROL_WAIT).await;
    let took = started.elapsed();
    match waited {
        Err(error) if error.is_transient() && took >= CONTROL_WAIT => Ok(()),
        other => Err(format!(
            "the control's wait through a refused connection ended after {took:?} of \
             {CONTROL_WAIT:?} with {:?}; it must ride the transient error out until its timeout",
            other.map(|guard| guard.name().clone())
        )
        .into()),
    }
}
