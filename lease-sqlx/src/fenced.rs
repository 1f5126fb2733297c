//! [`fenced`]: work in a transaction the database keeps exclusive to the lease's holder.

use futures::future::BoxFuture;
use lease_core::{Error, LeaseHandle, Operation};
use lease_sql::{Execute, ExecuteOn};

use crate::{SqlxDatabase, SqlxExecutor, SqlxStore};

/// Runs `work` in a transaction of its own that begins with the fenced check
/// ([`SqlStore::fence`](lease_sql::SqlStore::fence)): it commits when `work` answers `Ok` and the
/// lease is still held, and rolls back when `work` answers `Err`, when the check finds the lease
/// gone, or when the lease was lost while `work` ran. Its writes then never interleave with
/// another holder's: a takeover waits until the transaction has ended.
///
/// ```no_run
/// # async fn example(store: lease_sqlx::PgLeaseStore, guard: lease_core::LeaseGuard) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// use lease_sqlx::sqlx;
///
/// let sent: u64 = lease_sqlx::fenced(&store, &guard, |tx| {
///     Box::pin(async move {
///         let done = sqlx::query("INSERT INTO notices (customer, sent_at) VALUES ($1, now())")
///             .bind("c-42")
///             .execute(&mut *tx)
///             .await?;
///         Ok::<_, Box<dyn std::error::Error + Send + Sync>>(done.rows_affected())
///     })
/// })
/// .await?;
/// # Ok(()) }
/// ```
///
/// # Errors
/// `work`'s own error; [`Error::NotHeld`] when the check found the lease gone or it was lost
/// before the commit (nothing was committed); [`Error::Store`] with [`Operation::Fence`] when the
/// transaction could not begin or commit.
///
/// # Cancel safety
/// Dropped before the commit, the transaction rolls back (sqlx rolls back a dropped
/// transaction) and nothing is written.
pub async fn fenced<DB, T, E, F>(
    store: &SqlxStore<DB>,
    lease: &(impl AsRef<LeaseHandle> + Sync),
    work: F,
) -> Result<T, E>
where
    DB: SqlxDatabase,
    SqlxExecutor<DB>: for<'c> ExecuteOn<&'c mut DB::Connection>,
    F: for<'t> FnOnce(&'t mut DB::Connection) -> BoxFuture<'t, Result<T, E>>,
    E: From<Error>,
{
    let handle = lease.as_ref();
    // Classified as the store classifies its own errors: a commit that lost a Galera
    // certification is a conflict, a demoted server's refusal is read-only.
    let failed = |e: sqlx::Error| {
        let e = lease_core::BoxError::from(e);
        let kind = store.executor().classify(&*e);
        Error::store_of_kind(Operation::Fence, Some(handle.name()), kind, e)
    };
    let mut transaction = store.executor().pool().begin().await.map_err(failed)?;
    // A refused check or failed work rolls back at once rather than when the transaction is
    // dropped: on SQLite the check has taken the database's write lock.
    if let Err(refused) = store.fence(&mut *transaction, lease).await {
        let _ = transaction.rollback().await;
        return Err(refused.into());
    }
    let output = match work(&mut transaction).await {
        Ok(output) => output,
        Err(error) => {
            let _ = transaction.rollback().await;
            return Err(error);
        }
    };
    if !handle.is_held() {
        transaction.rollback().await.map_err(failed)?;
        return Err(Error::NotHeld {
            name: handle.name().clone(),
            fence: handle.fence(),
        }
        .into());
    }
    transaction.commit().await.map_err(failed)?;
    Ok(output)
}
