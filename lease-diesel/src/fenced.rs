//! [`fenced`]: work in a transaction the database keeps exclusive to the lease's holder.

use diesel::connection::{TransactionDepthChange, TransactionManagerStatus};
use diesel_async::{AsyncConnection, TransactionManager};
use lease_core::{Error, LeaseHandle};
use lease_sql::{AfterCommit, CheckAt, Dialect, FencedCommit};

use crate::{DieselConnection, DieselPool, DieselStore};

/// The transaction manager of the connections of `P`.
type Manager<P> = <<P as DieselPool>::Connection as AsyncConnection>::TransactionManager;

/// Runs `work` on `connection` in a fenced transaction of its own, as diesel-async's
/// `transaction` runs it in a plain one: it commits when `work` answers `Ok` and the lease is
/// still held, and rolls back when `work` answers `Err`, when the check finds the lease gone,
/// or when the lease was lost while `work` ran. Its writes then never interleave with another
/// holder's.
///
/// On PostgreSQL and MariaDB the check comes with the commit, in one round trip
/// ([`SqlStore::commit_fenced`](lease_sql::SqlStore::commit_fenced)): the transaction costs no
/// more round trips than one without the check, and the lease's row is locked only at its end,
/// so the holder's renewals never wait for the work. On PostgreSQL the check is a statement the
/// connection prepared once ([`PreparedFence`](lease_sql::PreparedFence)), so the server does not
/// plan it again; the transaction's begin finds out whether the connection has it. For a short
/// transaction, [`fenced_with`] and [`CheckAt::Begin`] cost less still. On SQLite the
/// transaction begins with the
/// check ([`SqlStore::fence`](lease_sql::SqlStore::fence)), which takes the database's write
/// lock (in process, an extra statement costs no round trip): renewals wait until it ends. The
/// transaction runs at the connection's isolation level. On PostgreSQL under `REPEATABLE READ`
/// or `SERIALIZABLE` (as `default_transaction_isolation`), a check with the commit would find
/// the lease's row as the transaction's snapshot saw it, and any renewal during the work would
/// fail it ([`SnapshotIsolation`](lease_sql::SnapshotIsolation)): the begin finds it out and
/// the transaction checks with its `BEGIN` instead, as [`CheckAt::Begin`] does (one round trip
/// more, and renewals wait for the work).
///
/// ```no_run
/// # async fn example(
/// #     store: lease_diesel::DieselStore<diesel_async::pooled_connection::deadpool::Pool<diesel_async::AsyncPgConnection>>,
/// #     guard: lease_core::LeaseGuard,
/// # ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// use diesel::sql_types::Text;
/// use diesel_async::RunQueryDsl;
///
/// let mut conn = store.pool().get().await?;
/// let sent = lease_diesel::fenced(&store, &mut conn, &guard, async |conn| {
///     diesel::sql_query("INSERT INTO notices (customer, sent_at) VALUES ($1, now())")
///         .bind::<Text, _>("c-42")
///         .execute(conn)
///         .await
///         .map_err(Box::<dyn std::error::Error + Send + Sync>::from)
/// })
/// .await?;
/// # let _ = sent; Ok(()) }
/// ```
///
/// When the server refuses the check, the commit or the transaction's begin as read-only (a
/// standby, a demoted primary, a MariaDB server set `read_only`: the error's
/// [`store_error_kind`](Error::store_error_kind) is
/// [`ReadOnly`](lease_core::StoreErrorKind::ReadOnly), or diesel's error reads so), `fenced`
/// marks `connection` broken, as the store's own statements do with theirs: drop it, and
/// deadpool or bb8 closes it instead of reusing it, so that the pool's next connection reaches
/// whatever server the URL names now; another transaction on it fails. A read-only refusal of
/// `work`'s own statement is `work`'s error, which `fenced` cannot read: mark the connection
/// yourself if you tell it apart, or leave it to the store's next statement on it. On
/// PostgreSQL and MariaDB, `fenced` marks `connection` broken too where `work` ended the
/// transaction itself (the answer's
/// source is [`TransactionEnded`](lease_sql::TransactionEnded)): its session may keep locks no
/// rollback releases (MariaDB's `LOCK TABLES`, which commits the transaction first), which
/// would fail the store's next statement on it and hold other sessions back. On SQLite it is
/// left usable, outside any transaction, for its pool to keep (an in-memory database lives only
/// as long as its connections).
///
/// # Errors
/// `work`'s own error; [`Error::NotHeld`] when the check found the lease gone or it was lost
/// before the commit (nothing was committed); [`Error::Store`] with
/// [`Operation::Fence`](lease_core::Operation::Fence) when the transaction could not begin, or
/// the check or the commit failed (nothing was committed), or of the kind
/// [`OutcomeUnknown`](lease_core::StoreErrorKind::OutcomeUnknown) when the commit's answer was
/// lost (it may have committed: find out before running `work` again) or, its source
/// [`TransactionEnded`](lease_sql::TransactionEnded), when `work` ended the transaction itself
/// (a `COMMIT` or `ROLLBACK` of its own; on MariaDB, also a statement that commits by itself) or
/// SQLite rolled it back by itself (a full disk, an I/O error, a busy database): the writes after
/// that committed on their own (that answer takes the place of
/// [`Error::NotHeld`] where the lease was also lost: something was committed); diesel's
/// [`AlreadyInTransaction`](diesel::result::Error::AlreadyInTransaction) for a `connection`
/// already in a transaction (the fenced commit would commit it), and diesel's
/// [`BrokenTransactionManager`](diesel::result::Error::BrokenTransactionManager) for a
/// `connection` marked broken before (a rollback that failed is not answered: the connection
/// is marked broken and the transaction's own answer stands).
///
/// # Cancel safety
/// Dropped before the commit, the transaction is left open on `connection`, which diesel-async
/// then reports broken, so that deadpool and bb8 close it instead of reusing it: nothing is
/// written. Dropped while the commit is on its way, the commit may or may not have happened.
/// Until the connection is closed the open transaction keeps its locks: bb8 closes a broken
/// connection when it is given back, deadpool only when it hands it out again (after its
/// other idle connections), so with deadpool a transaction checked first (SQLite, or
/// [`CheckAt::Begin`]) can keep the lease's row, or SQLite's write lock, from the holder's
/// renewals meanwhile. Where such a future may be dropped (a timeout around it), drop the
/// pooled connection with it through deadpool's `Object::take`, which closes it at once.
/// Not on SQLite: diesel-async runs each of its statements on a blocking thread, and a future
/// dropped while one runs waits for it to end (`block_in_place`), so a timeout around it does
/// not cut it short, and on a current-thread runtime the drop panics ("can call blocking only
/// when running on the multi-threaded runtime"). There, put no timeout around it: SQLite's
/// busy timeout ([`SQLITE_BUSY_TIMEOUT`](lease_sql::SQLITE_BUSY_TIMEOUT)) already bounds how
/// long a statement waits for the write lock.
pub async fn fenced<P, T, E, F>(
    store: &DieselStore<P>,
    connection: &mut P::Connection,
    lease: &(impl AsRef<LeaseHandle> + Sync),
    work: F,
) -> Result<T, E>
where
    P: DieselPool,
    F: AsyncFnOnce(&mut P::Connection) -> Result<T, E>,
    E: From<Error> + From<diesel::result::Error>,
{
    fenced_with(store, connection, lease, CheckAt::Commit, work).await
}

/// [`fenced`] with the check placed as `at` says. [`CheckAt::Begin`] sends the check with
/// the `BEGIN` (on PostgreSQL the prepared check's `EXECUTE`): the transaction costs the check
/// and, with its `COMMIT`, a guard against work that ended it, but no round trip more, and a
/// stale holder learns before the work; but the lease's row
/// stays locked until the transaction ends, so the holder's renewals wait for the work. Take
/// it for transactions well shorter than the client's store timeout; [`CheckAt::Commit`]
/// ([`fenced`]) for longer ones.
///
/// # Errors
/// As [`fenced`].
///
/// # Cancel safety
/// As [`fenced`].
pub async fn fenced_with<P, T, E, F>(
    store: &DieselStore<P>,
    connection: &mut P::Connection,
    lease: &(impl AsRef<LeaseHandle> + Sync),
    at: CheckAt,
    work: F,
) -> Result<T, E>
where
    P: DieselPool,
    F: AsyncFnOnce(&mut P::Connection) -> Result<T, E>,
    E: From<Error> + From<diesel::result::Error>,
{
    let handle = lease.as_ref();
    // Told first, so that a transaction cut off half-way leaves the connection broken.
    change_depth::<P>(connection, TransactionDepthChange::IncreaseDepth)?;
    let commit = match store.begin_fenced(&mut *connection, handle, at).await {
        Ok(commit) => commit,
        Err(error) => {
            let _ = Manager::<P>::rollback_transaction(connection).await;
            discard_if_spoiled(connection, store.statements().dialect(), &error);
            return Err(error.into());
        }
    };
    if commit == FencedCommit::CheckFirst
        && let Err(refused) = store.fence(&mut *connection, lease).await
    {
        let _ = Manager::<P>::rollback_transaction(connection).await;
        discard_if_spoiled(connection, store.statements().dialect(), &refused);
        return Err(refused.into());
    }
    let output = match work(&mut *connection).await {
        Ok(output) => output,
        Err(error) => {
            let _ = Manager::<P>::rollback_transaction(connection).await;
            return Err(error);
        }
    };
    if !handle.is_held() {
        // Not held, or, where the work had ended the transaction, its later writes committed.
        let answer = store.lost_before_commit(&mut *connection, handle).await;
        // The answer stands whatever the rollback says: a connection that failed it is marked
        // broken, which the pool discards, and a failure of its own would hide that the work's
        // writes committed (`TransactionEnded`) behind an error a caller retries.
        let _ = Manager::<P>::rollback_transaction(connection).await;
        discard_if_spoiled(connection, store.statements().dialect(), &answer);
        return Err(answer.into());
    }
    match store
        .end_fenced(&mut *connection, lease, commit, AfterCommit::Idle)
        .await
    {
        Ok(_) => {
            change_depth::<P>(connection, TransactionDepthChange::DecreaseDepth)?;
            Ok(output)
        }
        Err(refused) => {
            if lease_sql::TransactionEnded::caused(&refused) {
                // The work ended the transaction: there is none left to roll back, and SQLite
                // refuses a `ROLLBACK` without one, after which diesel would mark the connection
                // broken. diesel is told instead, as after a commit.
                let _ = change_depth::<P>(connection, TransactionDepthChange::DecreaseDepth);
            } else {
                let _ = Manager::<P>::rollback_transaction(connection).await;
            }
            discard_if_spoiled(connection, store.statements().dialect(), &refused);
            Err(refused.into())
        }
    }
}

/// Marks `connection` broken when `error` says it must not be used again
/// ([`lease_sql::spoiled_connection`]): its server accepts no writes (a standby, a demoted
/// primary, a MariaDB server set `read_only`), as the store's executor does with its own, or
/// the work ended the transaction itself and its session may keep locks. deadpool and bb8 then
/// close it instead of reusing it, and the pool's next connection reaches whatever server the
/// URL names now.
fn discard_if_spoiled<C: DieselConnection>(connection: &mut C, dialect: Dialect, error: &Error) {
    if let Some(why) = lease_sql::spoiled_connection(dialect, error) {
        tracing::warn!(%error, "{why}: closing its connection");
        connection.discard();
    }
}

/// Tells diesel-async's transaction manager that a transaction began or ended by `fenced`'s
/// own statements ([`SqlStore::begin_fenced`](lease_sql::SqlStore::begin_fenced) and
/// [`SqlStore::end_fenced`](lease_sql::SqlStore::end_fenced), whose commit comes in the
/// message of its check). A connection already in a transaction is refused: the fenced commit
/// would commit the outer transaction.
fn change_depth<P: DieselPool>(
    connection: &mut P::Connection,
    change: TransactionDepthChange,
) -> diesel::QueryResult<()> {
    match Manager::<P>::transaction_manager_status_mut(connection) {
        TransactionManagerStatus::Valid(status) => {
            if matches!(change, TransactionDepthChange::IncreaseDepth)
                && status.transaction_depth().is_some()
            {
                return Err(diesel::result::Error::AlreadyInTransaction);
            }
            status.change_transaction_depth(change)
        }
        TransactionManagerStatus::InError => Err(diesel::result::Error::BrokenTransactionManager),
    }
}
