//! [`fenced`]: work in a transaction the database keeps exclusive to the lease's holder; and
//! [`commit_fenced`], the check and the commit of a transaction of the caller's in one round trip.

use lease_core::{Error, Fence, LeaseHandle, Operation, StoreErrorKind};
use lease_sql::{
    AfterCommit, CheckAt, Dialect, Execute, ExecuteOn, FencedCommit, TransactionEnded,
};
use sqlx::{AssertSqlSafe, Connection, Database, SqlSafeStr, Transaction};
use sqlx_core::transaction::TransactionManager;
use tracing::Instrument;

use crate::closing_connection::ClosingConnection;
use crate::{NestedTransaction, SqlxDatabase, SqlxExecutor, SqlxStore};

/// Commits `transaction` if the lease is still held, with the fenced check and the `COMMIT` in
/// one round trip ([`SqlStore::commit_fenced`](lease_sql::SqlStore::commit_fenced)): its writes
/// commit while the lease is held, before any new holder's first statement, or not at all. It
/// answers the fence, to pass on to systems outside the database.
///
/// The lease's row is locked only for the check and the commit, so the holder's renewals do
/// not wait for the transaction, however long it runs. On SQLite, check at the start instead
/// ([`SqlStore::fence`](lease_sql::SqlStore::fence), as [`fenced`] does there): a deferred
/// transaction that reads first cannot take the write lock at its end once a renewal has
/// committed in between. On PostgreSQL, keep such a transaction at `READ COMMITTED` (the
/// default): under `REPEATABLE READ` or `SERIALIZABLE` the check would read the lease's row as
/// the transaction's snapshot saw it, so it is refused before it runs
/// ([`SnapshotIsolation`](lease_sql::SnapshotIsolation)); check at the start there, or let
/// [`fenced`] do it.
///
/// ```no_run
/// # async fn example(store: lease_sqlx::PgLeaseStore, guard: lease_core::LeaseGuard) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// use lease_sqlx::sqlx;
///
/// let mut tx = store.executor().pool().begin().await?;
/// sqlx::query("INSERT INTO notices (customer, sent_at) VALUES ($1, now())")
///     .bind("c-42")
///     .execute(&mut *tx)
///     .await?;
/// let fence = lease_sqlx::commit_fenced(&store, tx, &guard).await?;
/// # let _ = fence; Ok(()) }
/// ```
///
/// After the commit the connection holds a new, empty transaction, which the dropped
/// `transaction` rolls back with the connection's next message: at once for a pooled connection
/// (the pool checks it when it takes it back), at your next statement for a connection of your
/// own, which until then counts as idle in a transaction (mind PostgreSQL's
/// `idle_in_transaction_session_timeout` there). Where that `BEGIN` failed after the commit
/// (PostgreSQL raises a cancel it held off while it committed at the next statement), the
/// commit is answered as done, and logged; the connection then holds no transaction.
///
/// The connection is yours, so closing it is too. When the server refuses the check as
/// read-only (the error's [`store_error_kind`](Error::store_error_kind) is
/// [`ReadOnly`](StoreErrorKind::ReadOnly): a standby, a demoted primary, a MariaDB server set
/// `read_only`), a pooled connection still leads there: begin the transaction on a connection
/// you took (`let mut conn = pool.acquire().await?; let tx = conn.begin().await?;`) and call
/// `conn.close_on_drop()` after such an error, as [`fenced`] does with its own. A transaction
/// from `pool.begin()` gives its connection back to the pool, where the store's next statement
/// on it closes it. On PostgreSQL and MariaDB, close it too where the work ended the
/// transaction itself (the error's source is [`TransactionEnded`](lease_sql::TransactionEnded)):
/// its session may keep locks no rollback releases (MariaDB's `LOCK TABLES`, which commits the
/// transaction first), and nothing else closes it: given back to the pool, it keeps them, and
/// the store's next statement on it fails. [`lease_sql::spoiled_connection`] answers both
/// cases.
///
/// # Errors
/// [`Error::NotHeld`] when the check found the lease gone (after marking it lost, so that its
/// `lost()` and `run_exclusive` react at once): nothing was committed. [`Error::Store`] with
/// [`Operation::Fence`] when the check or the commit failed (a commit that lost a Galera
/// certification is a conflict; on PostgreSQL, a transaction reading from a snapshot is
/// refused with [`SnapshotIsolation`](lease_sql::SnapshotIsolation) as the source, the lease
/// still held): nothing was committed; unless the error is of the kind
/// [`OutcomeUnknown`](StoreErrorKind::OutcomeUnknown), when the connection failed after the
/// message went out and, as with any `COMMIT` whose answer is lost, the commit may have
/// happened, or, its source [`TransactionEnded`](lease_sql::TransactionEnded), when the work
/// had ended the transaction (a `COMMIT` or `ROLLBACK` of its own; on MariaDB also a statement
/// that commits by itself) and its later writes committed on their own.
///
/// `transaction` must be the outermost one: the message's `COMMIT` commits whatever
/// transaction the connection is in, so a nested `Transaction` (a savepoint, from
/// `tx.begin()`) would commit its outer transaction with it. A nested one is refused before
/// anything is sent: [`Error::Store`], [`Permanent`](StoreErrorKind::Permanent), its source
/// [`NestedTransaction`]; it is rolled back as it is dropped, the outer transaction left open
/// and the lease untouched.
///
/// # Cancel safety
/// Dropped before the message is sent, the transaction rolls back. Dropped after, the commit
/// may or may not have happened; the dropped transaction rolls back what is left (the empty
/// transaction the message began after its commit, or the one whose check failed) with the
/// connection's next use, which reads the rest of the commit's answer first.
pub async fn commit_fenced<DB>(
    store: &SqlxStore<DB>,
    mut transaction: Transaction<'_, DB>,
    lease: &(impl AsRef<LeaseHandle> + Sync),
) -> Result<Fence, Error>
where
    DB: SqlxDatabase,
    SqlxExecutor<DB>: for<'c> ExecuteOn<&'c mut DB::Connection>,
{
    if DB::DIALECT == Dialect::Sqlite {
        // sqlx's SQLite connection lowers the depth it counts only once its worker thread has
        // run a dropped savepoint's rollback: a command answered by that thread comes after it,
        // so the depth read next is the connection's.
        (*transaction)
            .ping()
            .await
            .map_err(|error| failed(store, lease.as_ref(), error))?;
    }
    let depth = <DB as Database>::TransactionManager::get_transaction_depth(&transaction);
    if depth > 1 {
        return Err(Error::store_of_kind(
            Operation::Fence,
            Some(lease.as_ref().name()),
            StoreErrorKind::Permanent,
            NestedTransaction { depth },
        ));
    }
    let committed = store
        .commit_fenced(&mut *transaction, lease, AfterCommit::Begin)
        .await;
    end(store, transaction, committed).await
}

/// Ends `transaction` after its fenced commit answered `committed`. Committed, the dropped
/// transaction queues the `ROLLBACK` of the empty transaction the message began after its
/// commit, which holds nothing; sqlx sends it with the connection's next message (where that
/// `BEGIN` failed after the commit, there is no transaction, and PostgreSQL answers the
/// `ROLLBACK` with a warning). Refused, it is
/// rolled back at once: on MariaDB, a check that found the lease taken over keeps a lock on the
/// new holder's row (`REPEATABLE READ` keeps the locks of the rows it read) until then, and a
/// connection the caller keeps may send nothing for a while. With the answer lost, the
/// connection is broken and there is nothing to roll back. With the transaction ended inside
/// the work ([`TransactionEnded`](lease_sql::TransactionEnded)) the server has none while sqlx
/// still counts one, which PostgreSQL's and MariaDB's drivers let go of as the transaction is
/// dropped; SQLite's counts a transaction ended only when its `ROLLBACK` succeeds, and would
/// begin the connection's next transaction with a savepoint, whose rollback ends nothing: there
/// [`leave_ended_transaction`] brings the connection back outside it, so that it goes back to
/// its pool counted as outside any.
async fn end<DB, T>(
    store: &SqlxStore<DB>,
    mut transaction: Transaction<'_, DB>,
    committed: Result<T, Error>,
) -> Result<T, Error>
where
    DB: SqlxDatabase,
    SqlxExecutor<DB>: for<'c> ExecuteOn<&'c mut DB::Connection>,
{
    match committed {
        Err(error) if error.store_error_kind() != Some(StoreErrorKind::OutcomeUnknown) => {
            let _ = transaction.rollback().await;
            Err(error)
        }
        Err(error) if TransactionEnded::caused(&error) => {
            // On SQLite, sqlx still counts the transaction the work ended.
            leave_ended_transaction(store, &mut *transaction).await;
            drop(transaction);
            Err(error)
        }
        committed => {
            drop(transaction);
            committed
        }
    }
}

/// Runs `work` in a fenced transaction of its own: it commits when `work` answers `Ok` and the
/// lease is still held, and rolls back when `work` answers `Err`, when the check finds the lease
/// gone, or when the lease was lost while `work` ran. Its writes then never interleave with
/// another holder's.
///
/// On PostgreSQL and MariaDB the check comes with the commit, in one round trip
/// ([`commit_fenced`]): the transaction costs no more round trips than one without the check,
/// and the lease's row is locked only at its end, so the holder's renewals never wait for the
/// work. On PostgreSQL the check is a statement the connection prepared once
/// ([`PreparedFence`](lease_sql::PreparedFence)), so the server does not plan it again; the
/// transaction's begin finds out whether the connection has it. For a short transaction,
/// [`fenced_with`] and [`CheckAt::Begin`] cost less still. On SQLite the transaction begins with the check
/// ([`SqlStore::fence`](lease_sql::SqlStore::fence)), which takes the database's write lock
/// (in process, an extra statement costs no round trip): renewals wait until it ends. On
/// PostgreSQL connections whose transactions read from a snapshot (`REPEATABLE READ` or
/// `SERIALIZABLE` as `default_transaction_isolation`), where any renewal during the work would
/// fail a check with the commit ([`SnapshotIsolation`](lease_sql::SnapshotIsolation)), the
/// begin finds it out and the transaction checks with its `BEGIN` instead, as
/// [`CheckAt::Begin`] does: one round trip more, and renewals wait for the work.
///
/// The transaction runs on a connection `fenced` takes from the store's pool and gives back
/// when it ends, unless the server refused the check, the commit or the transaction's begin as
/// read-only (a standby, a demoted primary, a MariaDB server set `read_only`): that connection
/// is closed, as the store's own statements close theirs, so the pool's next one reaches
/// whatever server the URL names now. So is, on PostgreSQL and MariaDB, the connection of work
/// that ended the transaction itself ([`TransactionEnded`](lease_sql::TransactionEnded)), whose
/// session may keep locks no rollback releases (MariaDB's `LOCK TABLES`, which commits the
/// transaction first); SQLite's goes back to the pool, outside any transaction (an in-memory
/// database lives only as long as its connections). A read-only refusal of `work`'s own
/// statement is `work`'s error, which `fenced` cannot read: that connection goes back to the
/// pool, and the store's next statement on it closes it.
///
/// ```no_run
/// # async fn example(store: lease_sqlx::PgLeaseStore, guard: lease_core::LeaseGuard) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// use lease_sqlx::sqlx;
///
/// let customer = "c-42";
/// let sent: u64 = lease_sqlx::fenced(&store, &guard, async |tx| {
///     let done = sqlx::query("INSERT INTO notices (customer, sent_at) VALUES ($1, now())")
///         .bind(customer)
///         .execute(&mut *tx)
///         .await?;
///     Ok::<_, Box<dyn std::error::Error + Send + Sync>>(done.rows_affected())
/// })
/// .await?;
/// # Ok(()) }
/// ```
///
/// # Errors
/// `work`'s own error; [`Error::NotHeld`] when the check found the lease gone or it was lost
/// before the commit (nothing was committed); [`Error::Store`] with [`Operation::Fence`] when the
/// transaction could not begin or commit (nothing was committed), or of the kind
/// [`OutcomeUnknown`](StoreErrorKind::OutcomeUnknown) when the commit's answer was lost (it may
/// have committed: find out before running `work` again) or, its source
/// [`TransactionEnded`](lease_sql::TransactionEnded), when `work` ended the transaction itself
/// (a `COMMIT` or `ROLLBACK` of its own; on MariaDB, also a statement that commits by itself) or
/// SQLite rolled it back by itself (a full disk, an I/O error, a busy database): the writes after
/// that committed on their own. That answer takes the place of [`Error::NotHeld`] where the
/// lease was also lost, or found gone by SQLite's check: something was committed.
///
/// # Cancel safety
/// Dropped before the commit, the transaction rolls back and nothing is written: its
/// connection is closed, not given back to the pool, so the server ends the transaction with
/// the session, a begin still in flight included (sqlx rolls back a dropped transaction, but
/// not one whose `BEGIN` has not answered yet). Dropped while the commit is in flight, the
/// commit may or may not have happened.
pub async fn fenced<DB, T, E, F>(
    store: &SqlxStore<DB>,
    lease: &(impl AsRef<LeaseHandle> + Sync),
    work: F,
) -> Result<T, E>
where
    DB: SqlxDatabase,
    SqlxExecutor<DB>: for<'c> ExecuteOn<&'c mut DB::Connection>,
    F: AsyncFnOnce(&mut DB::Connection) -> Result<T, E>,
    E: From<Error>,
{
    fenced_with(store, lease, CheckAt::Commit, work).await
}

/// [`fenced`] with the check placed as `at` says. [`CheckAt::Begin`] sends the check with the
/// `BEGIN` (on PostgreSQL the prepared check's `EXECUTE`): the transaction then costs the check
/// and, with its `COMMIT`, a guard against work that ended it, but no round trip more than one
/// without them, and a stale holder learns
/// before the work; but the lease's row stays locked until the transaction ends, so the
/// holder's renewals wait for the work. Take it for transactions well shorter than the
/// client's store timeout, [`CheckAt::Commit`] ([`fenced`]) for longer ones.
///
/// ```no_run
/// # async fn example(store: lease_sqlx::PgLeaseStore, guard: lease_core::LeaseGuard) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// use lease_sqlx::{CheckAt, sqlx};
///
/// lease_sqlx::fenced_with(&store, &guard, CheckAt::Begin, async |tx| {
///     sqlx::query("INSERT INTO notices (customer, sent_at) VALUES ($1, now())")
///         .bind("c-42")
///         .execute(&mut *tx)
///         .await?;
///     Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
/// })
/// .await?;
/// # Ok(()) }
/// ```
///
/// # Errors
/// As [`fenced`]; with [`CheckAt::Begin`], [`Error::NotHeld`] before `work` runs when the
/// lease is gone at the start.
///
/// # Cancel safety
/// As [`fenced`].
pub async fn fenced_with<DB, T, E, F>(
    store: &SqlxStore<DB>,
    lease: &(impl AsRef<LeaseHandle> + Sync),
    at: CheckAt,
    work: F,
) -> Result<T, E>
where
    DB: SqlxDatabase,
    SqlxExecutor<DB>: for<'c> ExecuteOn<&'c mut DB::Connection>,
    F: AsyncFnOnce(&mut DB::Connection) -> Result<T, E>,
    E: From<Error>,
{
    let mut connection = ClosingConnection::new(
        store
            .executor()
            .connection()
            .await
            .map_err(|e| failed(store, lease.as_ref(), e))?,
    );
    let outcome = in_transaction(store, connection.connection(), lease, at, work).await;
    // Until here a dropped future closes the connection (a begin in flight leaves the server's
    // transaction open where sqlx does not see it); from here it goes back to the pool.
    connection.ended();
    // A transaction sqlx still counts after its end would make the connection's next
    // transaction a savepoint, whose rollback ends nothing: such a connection is brought back
    // outside it where it can be, else closed rather than given back.
    if connection.connection().is_in_transaction()
        && !leave_ended_transaction(store, connection.connection()).await
    {
        tracing::warn!(
            "a fenced transaction's connection is still counted in a transaction: closing it"
        );
        connection.close_on_drop();
    }
    match outcome {
        Ok(done) => done,
        Err(error) => {
            // The transaction is gone by now; its connection must not go back to the pool
            // when the server accepts no writes, or the work ended the transaction itself.
            if let Some(why) = lease_sql::spoiled_connection(DB::DIALECT, &error) {
                tracing::warn!(%error, "{why}: closing its connection");
                connection.close_on_drop();
            }
            Err(error.into())
        }
    }
}

/// [`fenced_with`]'s transaction on `connection`: `work`'s own answer inside, the
/// transaction's or the check's failure outside.
///
/// It begins with the message [`SqlStore::begin_message`](lease_sql::SqlStore::begin_message)
/// gives, through sqlx's `Transaction::begin`, so that sqlx counts the transaction. On
/// PostgreSQL that message runs a statement the connection prepared (the check, or the probe
/// of it that also tells whether the transaction reads from a snapshot); after a failed begin,
/// [`SqlStore::after_failed_begin`](lease_sql::SqlStore::after_failed_begin) prepares what the
/// connection lacked (once in its life), or moves the check to the `BEGIN` under a snapshot, or
/// goes on with the check's text where prepared statements do not stay (a pooler that hands each
/// transaction another server connection), or, once, tries the same again after the check in
/// the `BEGIN` lost to a concurrent update of the lease's row (under a snapshot, a renewal in
/// flight), and the transaction begins again.
async fn in_transaction<DB, T, E, F>(
    store: &SqlxStore<DB>,
    connection: &mut DB::Connection,
    lease: &(impl AsRef<LeaseHandle> + Sync),
    at: CheckAt,
    work: F,
) -> Result<Result<T, E>, Error>
where
    DB: SqlxDatabase,
    SqlxExecutor<DB>: for<'c> ExecuteOn<&'c mut DB::Connection>,
    F: AsyncFnOnce(&mut DB::Connection) -> Result<T, E>,
{
    let handle = lease.as_ref();
    let mut begin = store.fenced_begin(at);
    // Bounded: each failure moves `begin` one way or ends the loop (FencedBegin::MOST_TRIES).
    loop {
        let (message, commit) = store.begin_message(handle, &mut begin)?;
        // A plain `BEGIN` as sqlx writes it, or the message with the check or its probe.
        let statement = (message != "BEGIN").then(|| AssertSqlSafe(message).into_sql_str());
        let span = begin.span().clone();
        let error = match Transaction::begin(&mut *connection, statement)
            .instrument(span)
            .await
        {
            Ok(transaction) => {
                store.fenced_begun(handle, begin, commit);
                return run(store, transaction, lease, work, commit).await;
            }
            Err(error) => lease_core::BoxError::from(error),
        };
        if let Err(refused) = store
            .after_failed_begin(&mut *connection, handle, &mut begin, error)
            .await
        {
            rollback(store, connection).await;
            return Err(refused);
        }
    }
}

/// Rolls back what a failed begin left on `connection`, which sqlx does not count as a
/// transaction: the server's transaction of a check that refused (PostgreSQL: failed; MariaDB:
/// open). Best effort: a connection that cannot take it is closed by its next statement.
async fn rollback<DB>(store: &SqlxStore<DB>, connection: &mut DB::Connection)
where
    DB: SqlxDatabase,
    SqlxExecutor<DB>: for<'c> ExecuteOn<&'c mut DB::Connection>,
{
    let _ = store
        .executor()
        .batch_on(connection, "ROLLBACK".to_owned())
        .await;
}

/// Brings `connection`, which sqlx counts in a transaction after its fenced transaction ended,
/// back outside any where the server has none open: on SQLite, whose transaction may end
/// without sqlx seeing it (a `COMMIT` or `ROLLBACK` of the work's, SQLite's own rollback on a
/// full disk or an I/O error), after which sqlx's `COMMIT` or `ROLLBACK` fails and leaves it
/// counted. A `BEGIN`, which succeeds only where no transaction is open, gives sqlx's rollback
/// one to end. Whether the connection is outside any transaction now, as sqlx counts it and as
/// the server has it (an in-memory database lives only as long as its connections, so it is
/// worth keeping).
async fn leave_ended_transaction<DB>(store: &SqlxStore<DB>, connection: &mut DB::Connection) -> bool
where
    DB: SqlxDatabase,
    SqlxExecutor<DB>: for<'c> ExecuteOn<&'c mut DB::Connection>,
{
    if store.statements().dialect() != Dialect::Sqlite {
        return false;
    }
    let begun = store
        .executor()
        .batch_on(&mut *connection, "BEGIN".to_owned())
        .await;
    begun.is_ok()
        && DB::TransactionManager::rollback(&mut *connection)
            .await
            .is_ok()
        && !connection.is_in_transaction()
}

/// `work` in the begun `transaction`, checked and committed as `commit` says.
async fn run<DB, T, E, F>(
    store: &SqlxStore<DB>,
    mut transaction: Transaction<'_, DB>,
    lease: &(impl AsRef<LeaseHandle> + Sync),
    work: F,
    commit: FencedCommit,
) -> Result<Result<T, E>, Error>
where
    DB: SqlxDatabase,
    SqlxExecutor<DB>: for<'c> ExecuteOn<&'c mut DB::Connection>,
    F: AsyncFnOnce(&mut DB::Connection) -> Result<T, E>,
{
    let handle = lease.as_ref();
    // A refused check or failed work rolls back at once rather than when the transaction is
    // dropped: on SQLite the check has taken the database's write lock.
    if commit == FencedCommit::CheckFirst
        && let Err(refused) = store.fence(&mut *transaction, lease).await
    {
        let _ = transaction.rollback().await;
        return Err(refused);
    }
    let output = match work(&mut *transaction).await {
        Ok(output) => output,
        Err(error) => {
            let _ = transaction.rollback().await;
            return Ok(Err(error));
        }
    };
    if !handle.is_held() {
        // Not held, or, where the work had ended the transaction, its later writes committed.
        let answer = store.lost_before_commit(&mut *transaction, handle).await;
        // The answer stands whatever the rollback says: a connection that failed it is broken,
        // which the pool closes, and a failure of its own would hide that the work's writes
        // committed (`TransactionEnded`) behind an error a caller retries.
        let _ = transaction.rollback().await;
        return Err(answer);
    }
    let checked_first = commit == FencedCommit::CheckFirst || commit.checked_at_begin();
    if checked_first && store.statements().commit_after_check().is_none() {
        // SQLite: sqlx's own `COMMIT`, which fails when the transaction had ended (and leaves
        // sqlx counting it: `fenced_with` brings the connection back outside it).
        transaction
            .commit()
            .await
            .map_err(|e| store.commit_failed(handle, e.into()))?;
    } else {
        // Through the store: with the check, or with `commit_after_check`, the guard that fails
        // when the work ended the transaction (and, on PostgreSQL, in a transaction a failed
        // statement aborted, where sqlx's `commit` would answer `Ok` for writes thrown away).
        let committed = store
            .end_fenced(&mut *transaction, lease, commit, AfterCommit::Begin)
            .await;
        end(store, transaction, committed).await?;
    }
    Ok(Ok(output))
}

/// A failure of the fenced transaction's own statements, classified as the store classifies
/// its errors: a commit that lost a Galera certification is a conflict, a demoted server's
/// refusal is read-only.
fn failed<DB>(
    store: &SqlxStore<DB>,
    lease: &LeaseHandle,
    error: impl Into<lease_core::BoxError>,
) -> Error
where
    DB: SqlxDatabase,
    SqlxExecutor<DB>: Execute,
{
    let error = error.into();
    let kind = store.executor().classify(&*error);
    Error::store_of_kind(Operation::Fence, Some(lease.name()), kind, error)
}
