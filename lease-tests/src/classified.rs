//! Errors the database gives are classified as what they are: on a table nobody set up, the
//! refusal is [`StoreErrorKind::Permanent`], and a client's wait ends on it at once, where it
//! rides out a transient failure until its own timeout; on MariaDB, a table that cannot grow
//! (out of space) is [`StoreErrorKind::Transient`], as a full disk is on the other databases.
//! Runs on any SQL store (lease-sql's [`SqlStore`] over a driver's [`Execute`]), so every driver
//! runs the same case.

use std::time::{Duration, Instant};

use lease_core::{
    BoxError, ErrorChain, HolderId, LeaseClient, LeaseName, LeaseStore, Runtime, StoreErrorKind,
    Ttl,
};
use lease_sql::{Dialect, Execute, SqlStore};

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

/// How many leases the full table case takes at most before it must have failed: a `MEMORY`
/// table of 16 KiB holds a few dozen rows.
const FULL_AFTER: usize = 10_000;

/// `store` is on MariaDB, on a fresh table `table`, which the case sets up. The table is made one that cannot
/// grow (the `MEMORY` engine, at the least size the server allows), and leases are taken under
/// new names until the server answers `The table '...' is full` (1114), which must read as
/// [`Transient`](StoreErrorKind::Transient): the server's answer when the disk is full, which
/// passes when space is freed, as PostgreSQL's `53100` and SQLite's `SQLITE_FULL` do.
///
/// # Errors
/// The table never filled, the failure was another one, or it read as another kind.
///
/// # Cancel safety
/// Cancel safe: the leases taken are the test table's own, dropped with it.
pub async fn mariadb_full_table_is_transient<X: Execute>(
    store: &SqlStore<X>,
    table: &str,
) -> Result<(), BoxError> {
    if store.executor().dialect() != Dialect::MySql {
        return Err("the full table case runs on MariaDB".into());
    }
    store.setup().await?;
    store
        .executor()
        .batch(&format!(
            "SET SESSION max_heap_table_size = 16384;\n\
             ALTER TABLE {table} ENGINE = MEMORY;\n\
             SET SESSION max_heap_table_size = DEFAULT"
        ))
        .await?;
    let ttl = Ttl::new(Duration::from_secs(60))?;
    for taken in 0..FULL_AFTER {
        let name = LeaseName::new(format!("full-{taken}"))?;
        match store.try_acquire(&name, &HolderId::generate(), ttl).await {
            Ok(Some(_)) => {}
            Ok(None) => return Err(format!("{name}, never taken before, was held").into()),
            Err(error) if !ErrorChain(&error).to_string().contains("is full") => {
                return Err(format!(
                    "after {taken} leases the store failed with another error than a full \
                     table: {}",
                    ErrorChain(&error)
                )
                .into());
            }
            Err(error) if error.store_error_kind() == Some(StoreErrorKind::Transient) => {
                return if taken == 0 {
                    Err("the table was full before its first lease: the case tells nothing".into())
                } else {
                    Ok(())
                };
            }
            Err(error) => {
                return Err(format!(
                    "a full table read as {:?}, not as transient: {}",
                    error.store_error_kind(),
                    ErrorChain(&error)
                )
                .into());
            }
        }
    }
    Err(format!("{FULL_AFTER} leases and the MEMORY table never filled").into())
}
