//! [`SqlStore`]: the lease operations on a table, written once over [`Execute`].

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lease_core::{
    BoxError, Error, Fence, HolderId, LeaseHandle, LeaseInfo, LeaseName, LeaseStore, Operation,
    ReleaseEvents, StoreErrorKind, Ttl,
};
use tracing::Instrument;

use crate::fenced_begin::BeginMove;
use crate::{
    AfterCommit, BatchFailed, CommitMessage, Connect, ConnectWith, DatabaseError, EndedProbe,
    Execute, ExecuteOn, FencedBegin, PoolState, RenewManyResult, SchemaCheck, Statements,
    TableName, TransactionEnded, is_not_held, is_transaction_ended, snapshot_isolation,
    snapshot_refusal,
};

/// The most times one operation's statement is sent again after read-only refusals, however
/// large its pool (see `SqlStore::again_if_refused`): one per idle connection a pool of this
/// size may hold leading to a demoted server, and two with none idle. Each refusal is one
/// round trip.
const READ_ONLY_AGAIN: u32 = 64;

/// The most times one operation's statement is sent again after a read-only refusal that finds
/// no idle connection in the pool (see `SqlStore::again_if_refused`): once for a connection
/// another call gives back meanwhile, once for one the pool opens. A server still read-only
/// then costs a call two new connections at most.
const READ_ONLY_WITHOUT_IDLE: u32 = 2;

/// Leases in a SQL table, reached through a driver's pool: the [`LeaseStore`] of every SQL
/// backend. The backend crates give it their [`Execute`] (`lease-sqlx`'s `SqlxExecutor`,
/// `lease-diesel`'s `DieselExecutor`) and name it (`PgLeaseStore`, `DieselStore`, ...).
///
/// Every operation is one statement on a connection borrowed from the pool for that statement
/// alone, so holding a lease holds no connection; every time comes from the database's clock.
/// Which statement, how its answer becomes a fence, a flag or a [`LeaseInfo`], how renew-many
/// batches, and which error names which operation and lease: all here, once.
///
/// Make one per pool and table with [`new`](SqlStore::new) or
/// [`with_table`](SqlStore::with_table), create and check the table with
/// [`setup`](SqlStore::setup) (or create it in your migrations from [`Migration`](crate::Migration)
/// and check it with [`verify`](SqlStore::verify)), and share it: it is cheap to clone.
pub struct SqlStore<X> {
    executor: X,
    statements: Arc<Statements>,
}

impl<X: Execute> SqlStore<X> {
    /// A store on `executor` (or a pool it is made from) using the table `leases`.
    pub fn new(executor: impl Into<X>) -> Self {
        Self::on_table(executor, &TableName::default())
    }

    /// A store on `executor` (or a pool it is made from) using `table` (`name` or
    /// `schema.name`).
    ///
    /// # Errors
    /// [`Error::InvalidIdentifier`] when `table` is not a plain identifier (see [`TableName`]).
    pub fn with_table(executor: impl Into<X>, table: &str) -> Result<Self, Error> {
        Ok(Self::on_table(executor, &TableName::new(table)?))
    }

    /// A store on `executor` (or a pool it is made from) using a validated `table`.
    pub fn on_table(executor: impl Into<X>, table: &TableName) -> Self {
        let executor = executor.into();
        let statements = Arc::new(Statements::new(executor.dialect(), table));
        Self {
            executor,
            statements,
        }
    }

    /// A store on a pool of its own, opened at `url` with the settings a lease store needs,
    /// using the table `leases` (see [`Connect`]).
    ///
    /// # Errors
    /// [`Error::Store`] with [`Operation::Setup`] when the URL is invalid or the database cannot
    /// be reached, of the kind the driver reads in its error ([`Execute::classify_connect`]:
    /// with lease-sqlx, [`Permanent`](StoreErrorKind::Permanent) for an invalid URL, a wrong
    /// password or an unknown database, [`Transient`](StoreErrorKind::Transient) for a server
    /// that does not answer).
    ///
    /// # Cancel safety
    /// Cancel-safe: nothing is left behind.
    pub async fn connect(url: &str) -> Result<Self, Error>
    where
        X: Connect,
    {
        let executor = X::connect(url).await.map_err(connect_failed::<X>)?;
        Ok(Self::new(executor))
    }

    /// A store on a pool of its own, opened at `url` as [`connect`](SqlStore::connect) opens
    /// it, using `table` (`name` or `schema.name`).
    ///
    /// # Errors
    /// [`Error::InvalidIdentifier`] when `table` is not a plain identifier, before connecting;
    /// [`Error::Store`] with [`Operation::Setup`] when the URL is invalid or the database cannot
    /// be reached, of the kind [`connect`](SqlStore::connect) says.
    ///
    /// # Cancel safety
    /// Cancel-safe: nothing is left behind.
    pub async fn connect_with_table(url: &str, table: &str) -> Result<Self, Error>
    where
        X: Connect,
    {
        let table = TableName::new(table)?;
        let executor = X::connect(url).await.map_err(connect_failed::<X>)?;
        Ok(Self::on_table(executor, &table))
    }

    /// A store on a pool of its own, opened from the driver's connect `options` with the
    /// settings a lease store needs (see [`ConnectWith`]), using `table` (`name` or
    /// `schema.name`): `SqliteLeaseStore::connect_with(options, "jobs_leases")` in lease-sqlx.
    ///
    /// # Errors
    /// [`Error::InvalidIdentifier`] when `table` is not a plain identifier, before connecting;
    /// [`Error::Store`] with [`Operation::Setup`] when the database cannot be reached or opened,
    /// of the kind [`connect`](SqlStore::connect) says.
    ///
    /// # Cancel safety
    /// Cancel-safe: nothing is left behind.
    pub async fn connect_with<O>(options: O, table: &str) -> Result<Self, Error>
    where
        X: ConnectWith<O>,
    {
        let table = TableName::new(table)?;
        let executor = X::connect_with(options)
            .await
            .map_err(connect_failed::<X>)?;
        Ok(Self::on_table(executor, &table))
    }

    /// The same store on `table` (`name` or `schema.name`) of the same pool.
    ///
    /// # Errors
    /// [`Error::InvalidIdentifier`] when `table` is not a plain identifier (see [`TableName`]).
    pub fn on(self, table: &str) -> Result<Self, Error> {
        let table = TableName::new(table)?;
        let notify = self.statements.notifies_releases();
        Ok(Self {
            statements: Arc::new(
                Statements::new(self.executor.dialect(), &table).with_release_notifications(notify),
            ),
            executor: self.executor,
        })
    }

    /// The same store with its executor changed by `change`, such as to choose how statements
    /// are sent: `store.map_executor(|x| x.with_protocol(PgProtocol::SimpleInline))` in
    /// lease-sqlx.
    #[must_use]
    pub fn map_executor(self, change: impl FnOnce(X) -> X) -> Self {
        Self {
            executor: change(self.executor),
            statements: self.statements,
        }
    }

    /// Turns release notifications on or off (off by default); PostgreSQL only, elsewhere this
    /// changes nothing.
    ///
    /// On, a release that frees a lease also runs `pg_notify` on the table's channel (see
    /// [`Statements::release_channel`]) in the same statement, and
    /// [`release_events`](LeaseStore::release_events) listens there where the driver can
    /// (lease-sqlx and lease-diesel both do; see [`Execute::release_events`]), so a
    /// `LeaseClient::acquire` waiting for the lease takes it within milliseconds instead of at
    /// its next poll. Polling stays: a notification only wakes a waiter early.
    ///
    /// What it costs: PostgreSQL serialises the commits of transactions that notify, so releases
    /// queue briefly behind each other under heavy churn; and each client that waits holds one
    /// connection of its own for listening, outside the pool.
    ///
    /// Behind PgBouncer in transaction pooling mode the releases' notifications go through, but
    /// `LISTEN` does not work there: waiters are never woken and keep polling, which is correct
    /// but gains nothing. Turn this on where the pool reaches PostgreSQL directly or through
    /// session pooling.
    #[must_use]
    pub fn with_notifications(mut self, on: bool) -> Self {
        self.statements = Arc::new(
            self.statements
                .as_ref()
                .clone()
                .with_release_notifications(on),
        );
        self
    }

    /// Whether releases notify listeners.
    pub fn notifications(&self) -> bool {
        self.statements.notifies_releases()
    }

    /// How the store runs its statements.
    pub fn executor(&self) -> &X {
        &self.executor
    }

    /// The pool the store borrows its connections from.
    pub fn pool(&self) -> &X::Pool {
        self.executor.pool()
    }

    /// How many connections the pool has open, and how many are idle.
    pub fn pool_state(&self) -> PoolState {
        self.executor.pool_state()
    }

    /// The lease table.
    pub fn table(&self) -> &TableName {
        self.statements.table()
    }

    /// Every statement the store runs, for reading or logging.
    pub fn statements(&self) -> &Statements {
        &self.statements
    }

    /// Creates the lease table if it does not exist, then checks the table it finds (see
    /// [`verify`](SqlStore::verify)): safe to call from every instance at start, also at the
    /// same moment (PostgreSQL takes a transaction-level advisory lock around the DDL). Sent as
    /// one simple-protocol message, so it works behind PgBouncer too.
    ///
    /// A table that exists already is never changed: one that does not fit the store (an
    /// earlier shape of a lease table, such as one without a `fence` column, or a table of
    /// another kind under the same name) is refused with [`Error::SchemaMismatch`], which names
    /// what differs and, for an earlier lease table, carries the SQL that upgrades it in place
    /// (run it in your migrations, or call [`upgrade`](SqlStore::upgrade)).
    ///
    /// It needs the `CREATE` privilege on the schema (PostgreSQL) or database (MariaDB); the
    /// store itself needs only `SELECT, INSERT, UPDATE` on the table (and `DELETE` for
    /// [`prune`](lease_core::LeaseStore::prune)). Those who run their own
    /// migrations can skip it, create the table with [`Migration`](crate::Migration) and call
    /// [`verify`](SqlStore::verify) instead. The schema of a `schema.table` name must exist
    /// already.
    ///
    /// # Errors
    /// [`Error::Store`] with [`Operation::Setup`] when a statement fails;
    /// [`Error::SchemaMismatch`] when the table does not fit.
    ///
    /// # Cancel safety
    /// Cancel-safe: the DDL is one implicit transaction, which either ran or did not, and the
    /// check only reads.
    pub async fn setup(&self) -> Result<(), Error> {
        self.executor
            .batch(self.statements.setup())
            .await
            .map_err(self.failure(Operation::Setup, None))?;
        self.verify().await
    }

    /// Checks that the lease table exists and has the columns, types and key the store needs,
    /// without changing anything: for applications that create the table in their own
    /// migrations, and for a store without DDL rights. It reads the database's catalog (one
    /// statement, [`SchemaCheck::columns`]; on SQLite a second one reads the table's times,
    /// [`SchemaCheck::times_in_other_units`], as SQLite declares no unit), so a table that does not
    /// fit is refused before any lease statement runs on it.
    ///
    /// # Errors
    /// [`Error::SchemaMismatch`] when the table is missing (with the SQL that creates it), is an
    /// earlier shape of a lease table (with the SQL that upgrades it) or a table of another kind
    /// (without SQL); [`Error::Store`] with [`Operation::Setup`] when the catalog cannot be read.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only reads.
    pub async fn verify(&self) -> Result<(), Error> {
        let check = SchemaCheck::new(self.statements.dialect(), self.statements.table());
        let failed = self.failure(Operation::Setup, None);
        let rows = self
            .executor
            .text_pairs(check.columns())
            .await
            .map_err(failed)?;
        let times = match check.times_in_other_units(&rows) {
            Some(query) => self.executor.int_pairs(query).await.map_err(failed)?,
            None => Vec::new(),
        };
        check.verdict_with_times(&rows, &times)
    }

    /// Upgrades an earlier shape of a lease table in place, with the SQL that
    /// [`verify`](SqlStore::verify)'s [`Error::SchemaMismatch`] carries, then checks it again;
    /// answers whether it changed the table. Rows are kept: a lease that an earlier service
    /// holds stays held (by that holder) until it expires, and a missing fence starts at 0, so
    /// every fence the store hands out is above zero. A missing table is not created (that is
    /// [`setup`](SqlStore::setup)'s), and a table of another kind is refused as by `verify`.
    ///
    /// It changes a table that another service may still use, with an `ALTER TABLE` that needs
    /// the table to itself (SQLite, for anything but a missing fence or times in seconds:
    /// rebuilds it in one transaction). That waits for every transaction that read or wrote the
    /// table to end, and every statement on the table, every holder's renewals, waits behind
    /// it; so the upgrade waits for the table at most 5 s (PostgreSQL `SET LOCAL lock_timeout`,
    /// MariaDB `ALTER TABLE ... WAIT 5`, SQLite's busy timeout) and then fails, the table's
    /// shape as it was: run it again when no long transaction holds the table. Prefer running
    /// the same SQL in your migrations; this is for a start-up that owns its table.
    ///
    /// Safe to call from several instances at once: the database runs their upgrades one after
    /// the other, and one whose SQL fails because another's changed the table first (its
    /// `ADD COLUMN fence` finding the column there) checks the table again and answers
    /// `Ok(false)` when it fits now, or runs the SQL for the shape it finds. None resets the
    /// fences another's store handed out meanwhile (SQLite's rebuild adds a missing fence in
    /// place, then copies it). `Ok(true)` says this call's SQL ran to the end.
    ///
    /// # Errors
    /// As [`verify`](SqlStore::verify), and [`Error::Store`] with [`Operation::Setup`] when the
    /// upgrade fails: [`Transient`](StoreErrorKind::Transient), its cause saying to run the
    /// upgrade again, when it gave up waiting for the table. The database then keeps the table
    /// as it was, where its DDL is transactional: PostgreSQL, SQLite. On MariaDB the `UPDATE`s
    /// that fill a missing fence or time may have committed before a failed `ALTER TABLE`,
    /// which leaves the table's shape as it was, and running the upgrade again finishes it:
    /// such as one that meets a `NULL` another service inserted after them, under MariaDB's
    /// default strict mode (without it, the `ALTER TABLE` would store that `NULL` as a zero
    /// date no store can read).
    ///
    /// # Cancel safety
    /// Dropped half-way, the upgrade either ran or did not on PostgreSQL and SQLite. On MariaDB
    /// its statements commit one by one: the `UPDATE`s may have run without the `ALTER TABLE`
    /// (run the upgrade again), and a connection dropped between them may keep the session's
    /// time zone at `+00:00` until the pool closes it, which the store's statements do not
    /// read.
    pub async fn upgrade(&self) -> Result<bool, Error> {
        // Several instances may run this at once, at start-up, each with the SQL made from the
        // shape it read; the database runs one upgrade after the other (each waits for the
        // table's lock), and the later one then meets a table that is upgraded already: its
        // `ADD COLUMN fence` fails as a duplicate (SQLite's rebuild too: it adds a missing
        // fence in place first, so it never copies fences as 0 over those the earlier one's
        // store handed out, `schema/sqlite.rs`). So a failed upgrade reads the table again:
        // fitting now, the upgrade is done (another's); in another shape than the one the
        // failed SQL was made from (changed by another upgrade half-way), the SQL for that shape
        // is run, a bounded number of times; in the same shape, the failure was this upgrade's
        // own (a lock it gave up waiting for, a row it cannot convert), and is answered.
        const ATTEMPTS: usize = 3;
        let upgrade_sql = async || match self.verify().await {
            Ok(()) => Ok(None),
            Err(Error::SchemaMismatch {
                upgrade: Some(sql), ..
            }) if !sql.starts_with("CREATE TABLE") => Ok(Some(sql)),
            Err(error) => Err(error),
        };
        let Some(mut sql) = upgrade_sql().await? else {
            return Ok(false);
        };
        let mut attempt = 1;
        loop {
            tracing::warn!(table = %self.table(), sql = %sql, "upgrading the lease table in place");
            let source = match self.executor.batch(&sql).await {
                Ok(()) => {
                    self.verify().await?;
                    return Ok(true);
                }
                Err(source) => source,
            };
            let locked = self
                .executor
                .database_message(&*source)
                .is_some_and(crate::schema::lock_wait::timed_out);
            let error = self.failure(Operation::Setup, None)(source);
            let error = if locked {
                crate::schema::lock_wait::explained(error)
            } else {
                error
            };
            match upgrade_sql().await {
                Ok(None) => {
                    tracing::info!(
                        table = %self.table(),
                        "the lease table fits: another upgrade finished first ({error})"
                    );
                    return Ok(false);
                }
                Ok(Some(next)) if next != sql && attempt < ATTEMPTS => {
                    attempt += 1;
                    sql = next;
                }
                _ => return Err(error),
            }
        }
    }

    /// The fenced check, inside the caller's transaction on `connection`: the job's writes in
    /// that transaction then never interleave with another holder's.
    ///
    /// One statement ([`Statements::fence`]) that succeeds only while the row still names this
    /// holder and `lease`'s fence and has not expired by the database's clock, and that locks
    /// the row until the caller's transaction ends: a takeover (or a forced release) waits for
    /// the transaction, so the caller's writes commit before any new holder's first statement,
    /// or not at all. Run it first in the transaction, then write; commit or roll back as
    /// usual. It answers the fence, to pass on to systems outside the database.
    ///
    /// On PostgreSQL under `REPEATABLE READ` or `SERIALIZABLE`, put it first as well: after
    /// another statement it finds the lease's row as the transaction's snapshot saw it, and when
    /// a renewal of the lease committed since, it fails with a serialization failure
    /// ([`Conflict`](StoreErrorKind::Conflict): try the transaction again), as any update of a
    /// row changed since a snapshot does there. It locks the row before it reads the expiry, so
    /// it never reports a lease still held as gone for an expiry the snapshot saw pass. A lease
    /// acquired after the snapshot was taken is not in it at all: the check answers
    /// [`SnapshotIsolation`](crate::SnapshotIsolation) then
    /// ([`predates_the_lease`](crate::SnapshotIsolation::predates_the_lease)), and marks
    /// nothing lost; acquire the lease before the transaction begins.
    ///
    /// The renewer's renewal of this lease waits for the transaction too (it updates the same
    /// row): a transaction shorter than the client's store timeout costs nothing but that wait;
    /// one longer than it fails renewals until it ends, and one longer than the TTL loses the
    /// lease (locally, by its deadline), which the row lock still keeps from anybody else until
    /// the transaction ends.
    ///
    /// On a MariaDB Galera cluster the row lock holds on the node the transaction runs on only.
    /// A takeover through another node does not wait for it: the two write sets conflict, and
    /// whichever certifies second fails, so the caller's transaction commits before the
    /// takeover or fails with a [`Conflict`](StoreErrorKind::Conflict) and commits nothing.
    /// "Before any new holder's first statement, or not at all" holds; "kept from anybody else"
    /// does not: a transaction running past the lease's TTL is lost to a takeover elsewhere.
    ///
    /// # Errors
    /// [`Error::NotHeld`] when the lease is gone (expired, taken over, released), after marking
    /// it lost, so that its `lost()` and `run_exclusive` react at once: roll the transaction back
    /// (on PostgreSQL the check of an expired lease fails the statement, which aborts the
    /// transaction and releases its locks at once; the session still waits for the rollback).
    /// [`Error::Store`] with
    /// [`Operation::Fence`] when the statement failed (also when the database refused it for its
    /// isolation level, such as a serialization failure, without marking the lease lost), and
    /// of the [`Permanent`](StoreErrorKind::Permanent) kind, its source
    /// [`SnapshotIsolation`](crate::SnapshotIsolation), when the transaction's snapshot predates
    /// the lease.
    ///
    /// # Cancel safety
    /// Like any statement on the caller's connection: dropped half-way, the connection may be
    /// mid-statement; drop the transaction with it (sqlx and diesel then roll it back or close
    /// the connection).
    pub async fn fence<Conn>(
        &self,
        connection: &mut Conn,
        lease: &(impl AsRef<LeaseHandle> + Sync),
    ) -> Result<Fence, Error>
    where
        Conn: Send,
        X: for<'c> ExecuteOn<&'c mut Conn>,
    {
        let lease = lease.as_ref();
        crate::fence_span::traced(lease, self.check(connection, lease)).await
    }

    /// [`fence`](SqlStore::fence), outside its span.
    async fn check<Conn>(&self, connection: &mut Conn, lease: &LeaseHandle) -> Result<Fence, Error>
    where
        Conn: Send,
        X: for<'c> ExecuteOn<&'c mut Conn>,
    {
        let matched = self
            .executor
            .affected_on(
                &mut *connection,
                self.statements
                    .fence(lease.name(), lease.holder(), lease.fence()),
            )
            .await
            .map_err(|error| self.fence_refused(lease, error))?;
        if matched == 0 {
            // Under a snapshot taken before the lease was acquired, this fails: the lease is
            // not in the snapshot, which says nothing of whether it is still held.
            if let Some(why) = self.statements.unmatched_fence(lease.name(), lease.fence()) {
                self.executor
                    .affected_on(&mut *connection, why)
                    .await
                    .map_err(|error| self.fence_refused(lease, error))?;
            }
            tracing::warn!(lease = %lease.name(), fence = %lease.fence(), "fenced check found the lease gone");
            return Err(lease.mark_not_held());
        }
        Ok(lease.fence())
    }

    /// The fenced check and the commit of the caller's transaction on `connection`, in one
    /// round trip: the end of a transaction the database keeps exclusive to the lease's holder,
    /// as [`fence`](SqlStore::fence) at its start does, but without holding the lease's row
    /// locked while the job works. The transaction must have begun in an earlier message than
    /// this one (as every driver's `begin` does: it waits for the `BEGIN`'s answer): on
    /// PostgreSQL the message tells a transaction the work ended by its time being the
    /// message's own.
    ///
    /// One message ([`Statements::fence_then_commit`]): the check, which succeeds only while the
    /// row still names this holder and `lease`'s fence and has not expired by the database's
    /// clock, and which locks and writes the row; then, only if it succeeded, `COMMIT`. A
    /// takeover cannot come between the two: it waits for the row's lock, which the commit
    /// releases. So the transaction's writes commit while the lease is held, before any new
    /// holder's first statement, or not at all. The writes before it are invisible to others
    /// until then, and a takeover during the job makes this check fail, so nothing of a stale
    /// holder ever commits. Unlike a check at the start, the holder's renewals and a takeover
    /// of an expired lease do not wait for the job: the lease's row is locked only for the
    /// check and the commit. On SQLite, in process, the check and the `COMMIT` are two calls.
    ///
    /// On PostgreSQL the transaction must run at `READ COMMITTED` (the default). Under
    /// `REPEATABLE READ` or `SERIALIZABLE` the check would find the lease's row as the
    /// transaction's snapshot saw it: a renewal that committed meanwhile would fail it with a
    /// serialization failure, so a transaction that spans a renewal could never commit. So a
    /// guard that refuses the check there goes before it in the message
    /// ([`SnapshotIsolation`](crate::SnapshotIsolation)), after the one that fails when the work
    /// ended the transaction ([`TransactionEnded`]), and without marking the lease lost. Check at the start there
    /// ([`fence`](SqlStore::fence) as the transaction's first statement); the store's own
    /// fenced transactions ([`begin_fenced`](SqlStore::begin_fenced)) do it by themselves.
    ///
    /// After the commit the connection is left as `then` says; a driver's transaction object
    /// must then be ended without a `COMMIT` of its own (lease-sqlx's and lease-diesel's fenced
    /// functions do it). A failure of what `then` puts after the `COMMIT`, once the `COMMIT`
    /// completed (a cancel PostgreSQL held off while it committed, raised at the next
    /// statement), is logged and answers `Ok`: the transaction committed. The connection is then
    /// outside any transaction.
    ///
    /// # Errors
    /// [`Error::NotHeld`] when the check found the lease gone, after marking it lost: nothing
    /// was committed, and the transaction is aborted (PostgreSQL) or still open (MariaDB,
    /// SQLite): roll it back or drop it. [`Error::Store`] with [`Operation::Fence`] when the
    /// message failed (a commit that lost a Galera certification is a
    /// [`Conflict`](StoreErrorKind::Conflict), and nothing was committed); of the kind
    /// [`OutcomeUnknown`](StoreErrorKind::OutcomeUnknown) when no answer came (the connection
    /// broke after the message went out): the commit may have happened, as with any `COMMIT`
    /// whose answer is lost ([`commit_failed`](SqlStore::commit_failed)); of that kind too, its
    /// source [`TransactionEnded`], when the work had ended the transaction (a `COMMIT` or
    /// `ROLLBACK` of its own; on MariaDB also a statement that commits by itself): its later
    /// writes committed on their own. On PostgreSQL,
    /// [`Error::Store`] of the [`Permanent`](StoreErrorKind::Permanent) kind whose source is
    /// [`SnapshotIsolation`](crate::SnapshotIsolation) when the transaction reads from a
    /// snapshot: nothing was committed, and the lease stays held.
    ///
    /// # Cancel safety
    /// Like any statement on the caller's connection: dropped half-way, the connection may be
    /// mid-message and the commit may or may not have happened; drop the transaction with it.
    pub async fn commit_fenced<Conn>(
        &self,
        connection: &mut Conn,
        lease: &(impl AsRef<LeaseHandle> + Sync),
        then: AfterCommit,
    ) -> Result<Fence, Error>
    where
        Conn: Send,
        X: for<'c> ExecuteOn<&'c mut Conn>,
    {
        let lease = lease.as_ref();
        crate::fence_span::traced(
            lease,
            self.check_and_commit(connection, lease, then, CheckText::Inline),
        )
        .await
    }

    /// The statements of PostgreSQL's fenced check prepared once per connection
    /// ([`Statements::prepared_fence`]), where the executor keeps what it prepares on a
    /// connection ([`Execute::prepares`]); `None` elsewhere, and behind a pooler that hands each
    /// transaction another server connection, where the fenced transactions check with the
    /// check's text.
    pub fn prepared_fence(&self) -> Option<&crate::PreparedFence> {
        self.statements
            .prepared_fence()
            .filter(|_| self.executor.prepares())
    }

    /// Begins a fenced transaction on `connection` with statements of its own (for a driver
    /// whose transaction object can be told that a transaction began, as diesel's can), the
    /// check placed as `at` says, and answers how it must end.
    ///
    /// [`CheckAt::Commit`]: on PostgreSQL it sends [`PreparedFence::begin`](crate::PreparedFence::begin)
    /// (where the prepared statements do not stay on the connection, below, `BEGIN` and the
    /// guard of [`SnapshotIsolation`](crate::SnapshotIsolation) as text); elsewhere `BEGIN`. [`CheckAt::Begin`]: `BEGIN` and the check in one message
    /// ([`Statements::begin_then_fence`], on PostgreSQL the prepared check's `EXECUTE`); on
    /// SQLite `BEGIN`, the check to follow ([`FencedCommit::CheckFirst`]). On PostgreSQL, where
    /// the connection lacks the prepared statements it prepares them
    /// ([`prepare_fence`](SqlStore::prepare_fence)) and begins again, and where they are still
    /// missing then (a pooler that hands each transaction another server connection) it uses
    /// the check's text.
    ///
    /// # Errors
    /// [`Error::NotHeld`] when the check at the start found the lease gone (after marking it
    /// lost); [`Error::Store`] with [`Operation::Fence`] when a message failed. Either way the
    /// connection may be left in a transaction: roll it back.
    ///
    /// # Cancel safety
    /// Like any statement on the caller's connection: dropped half-way, a transaction may be
    /// open on it; close it (diesel's transaction manager, told before this runs, reports it
    /// broken).
    pub async fn begin_fenced<Conn>(
        &self,
        connection: &mut Conn,
        lease: &LeaseHandle,
        at: CheckAt,
    ) -> Result<FencedCommit, Error>
    where
        Conn: Send,
        X: for<'c> ExecuteOn<&'c mut Conn>,
    {
        let mut begin = self.fenced_begin(at);
        // Bounded: each failure moves `begin` one way or ends the loop (FencedBegin::MOST_TRIES).
        loop {
            let (message, commit) = self.begin_message(lease, &mut begin)?;
            let sent = self
                .executor
                .batch_on(&mut *connection, message)
                .instrument(begin.span().clone())
                .await;
            match sent {
                Ok(()) => {
                    self.fenced_begun(lease, begin, commit);
                    return Ok(commit);
                }
                Err(error) => {
                    self.after_failed_begin(&mut *connection, lease, &mut begin, error)
                        .await?;
                }
            }
        }
    }

    /// The first try at beginning a fenced transaction checked as `at` says: through the
    /// statements prepared on the connection where the store has them, else with the check's
    /// text.
    pub fn fenced_begin(&self, at: CheckAt) -> FencedBegin {
        let attempt = if self.prepared_fence().is_some() {
            Attempt::Prepared
        } else {
            Attempt::Text
        };
        FencedBegin::new(at, attempt)
    }

    /// Tells the store that the message of `begin`'s last try, which asked to end as `commit`
    /// says, succeeded: where it carried the check ([`FencedCommit::checked_at_begin`]), the check
    /// passed, which its span ([`FencedBegin::span`]) records before it closes and the
    /// statistics of the client that holds `lease` count
    /// ([`LeaseHandle::record_fenced_check`]). For a driver that sends the message itself
    /// ([`begin_message`](SqlStore::begin_message)); [`begin_fenced`](SqlStore::begin_fenced)
    /// calls it.
    pub fn fenced_begun(&self, lease: &LeaseHandle, begin: FencedBegin, commit: FencedCommit) {
        if commit.checked_at_begin() {
            crate::fence_span::record(begin.span(), lease, lease_core::FencedCheck::Passed);
        }
    }

    /// What follows a fenced transaction's begin message that failed on the try `begin`, for
    /// [`begin_fenced`](SqlStore::begin_fenced) and for a driver that sends the message itself:
    /// `Ok` to try again with `begin` as moved on, after rolling back the transaction that
    /// failed. The moves: where the transaction reads from a snapshot (the guard of
    /// [`SnapshotIsolation`](crate::SnapshotIsolation) refused the check with the commit), the
    /// check goes to the `BEGIN`; where the connection lacked the prepared statements, it
    /// prepares them ([`Attempt::Prepared`]) or, when they did not stay
    /// ([`Attempt::PreparedAgain`]), goes on with the check's text; where the check in the
    /// `BEGIN`'s message lost to a concurrent update of the lease's row (a
    /// [`Conflict`](StoreErrorKind::Conflict): under a snapshot, the holder's own renewal that
    /// committed while the check waited for the row), the same try goes once more, since no
    /// work ran. Where no move follows a try
    /// whose message carried the check, its error is the check's answer, recorded in the
    /// check's span ([`FencedBegin::span`], in which the rollback or the preparation runs too)
    /// and counted in the statistics of the client that holds `lease`
    /// ([`LeaseHandle::record_fenced_check`]).
    ///
    /// # Errors
    /// [`fence_refused`](SqlStore::fence_refused)'s error when `error` calls for no move (roll
    /// the connection's transaction back then), or the store error of a message that failed.
    ///
    /// # Cancel safety
    /// Like any statement on the caller's connection: dropped half-way, the connection may be
    /// mid-message; drop it with the future.
    pub async fn after_failed_begin<Conn>(
        &self,
        connection: &mut Conn,
        lease: &LeaseHandle,
        begin: &mut FencedBegin,
        error: BoxError,
    ) -> Result<(), Error>
    where
        Conn: Send,
        X: for<'c> ExecuteOn<&'c mut Conn>,
    {
        // The check in the `BEGIN`'s message failed for good: counted as the check's answer.
        let checked = begin.at() == CheckAt::Begin && self.statements.checks_at_commit();
        let span = begin.span().clone();
        let moved = match self.begin_move(lease, begin, error) {
            Ok(BeginMove::RollBack) => {
                self.rollback_begin(connection, lease)
                    .instrument(span.clone())
                    .await
            }
            Ok(BeginMove::Prepare) => {
                self.prepare_fence(connection, lease)
                    .instrument(span.clone())
                    .await
            }
            Err(refused) => Err(refused),
        };
        if checked && let Err(refused) = &moved {
            crate::fence_span::record(&span, lease, crate::fence_span::outcome(Err(refused)));
        }
        moved
    }

    /// How the begin `begin` moves on after its message failed with `error`, or the error that
    /// ends it (see [`after_failed_begin`](SqlStore::after_failed_begin)).
    fn begin_move(
        &self,
        lease: &LeaseHandle,
        begin: &mut FencedBegin,
        error: BoxError,
    ) -> Result<BeginMove, Error> {
        let snapshot = self
            .executor
            .database_message(&*error)
            .and_then(snapshot_refusal)
            .map(str::to_owned);
        if let Some(level) = snapshot
            && begin.check_at_begin()
        {
            tracing::debug!(
                %level,
                "the transaction reads from a snapshot: checking with its BEGIN instead"
            );
            return Ok(BeginMove::RollBack);
        }
        if begin.at() == CheckAt::Begin && self.is_conflict(&error) && begin.again() {
            // Under a snapshot, a renewal of the lease that committed while the check waited
            // for the row's lock fails the check with a serialization failure. Nothing of the
            // work ran yet: the transaction begins again, with a snapshot that sees the renewal.
            tracing::debug!(
                lease = %lease.name(),
                %error,
                "the fenced check lost to a concurrent update of the lease: beginning again"
            );
            return Ok(BeginMove::RollBack);
        }
        if !self.is_fence_unprepared(&*error) {
            return Err(self.fence_refused(lease, error));
        }
        let attempt = begin.attempt();
        if !begin.next_attempt() {
            return Err(self.fence_refused(lease, error));
        }
        if attempt == Attempt::Prepared {
            return Ok(BeginMove::Prepare);
        }
        tracing::debug!(
            "the prepared fence does not stay on this connection: checking with its text"
        );
        Ok(BeginMove::RollBack)
    }

    /// Rolls back the transaction of a begin message that failed.
    async fn rollback_begin<Conn>(
        &self,
        connection: &mut Conn,
        lease: &LeaseHandle,
    ) -> Result<(), Error>
    where
        Conn: Send,
        X: for<'c> ExecuteOn<&'c mut Conn>,
    {
        self.executor
            .batch_on(connection, "ROLLBACK".to_owned())
            .await
            .map_err(self.failure(Operation::Fence, Some(lease.name())))
    }

    /// The message of the try `begin` at beginning a fenced transaction, and how the
    /// transaction must end then; for a driver that begins with a message of its own (sqlx's
    /// `Transaction::begin`) as for [`begin_fenced`](SqlStore::begin_fenced). When the message
    /// carries the check ([`FencedCommit::checked_at_begin`]), `begin`'s span of the check opens
    /// ([`FencedBegin::span`]): send the message in it.
    ///
    /// # Errors
    /// [`Error::Store`] with [`Operation::Fence`] when a parameter cannot be written inline (a
    /// NUL character, which a lease name never holds).
    pub fn begin_message(
        &self,
        lease: &LeaseHandle,
        begin: &mut FencedBegin,
    ) -> Result<(String, FencedCommit), Error> {
        let statements = &self.statements;
        let at = begin.at();
        let prepared = begin.attempt() != Attempt::Text && self.prepared_fence().is_some();
        let (name, holder, fence) = (lease.name(), lease.holder(), lease.fence());
        let checked = match at {
            CheckAt::Commit => None,
            CheckAt::Begin if prepared => statements.prepared_begin_then_fence(name, holder, fence),
            CheckAt::Begin => statements.begin_then_fence(name, holder, fence),
        };
        if let Some(message) = checked {
            let message =
                message.map_err(|e| self.failure(Operation::Fence, Some(name))(Box::new(e)))?;
            begin.carry_check(lease);
            let commit = if prepared {
                FencedCommit::CheckedPrepared
            } else {
                FencedCommit::Checked
            };
            return Ok((message, commit));
        }
        Ok(match self.prepared_fence() {
            Some(fence) if prepared && at == CheckAt::Commit => {
                (fence.begin().to_owned(), FencedCommit::Prepared)
            }
            _ if at == CheckAt::Begin || !statements.checks_at_commit() => {
                ("BEGIN".to_owned(), FencedCommit::CheckFirst)
            }
            _ => (statements.begin_to_check_at_commit(), FencedCommit::Inline),
        })
    }

    /// What a failed fenced check says, wherever it ran: [`Error::NotHeld`] (after marking
    /// `lease` lost) when the database's message carries the check's marker; the store error
    /// of [`Operation::Fence`], [`Permanent`](StoreErrorKind::Permanent), with
    /// [`SnapshotIsolation`](crate::SnapshotIsolation) as its source, when it carries the
    /// snapshot guard's or says that the transaction's snapshot predates the lease (nothing is
    /// marked lost); the store error of [`Operation::Fence`],
    /// [`OutcomeUnknown`](StoreErrorKind::OutcomeUnknown), with [`TransactionEnded`] as its
    /// source, when it says that the work had ended the transaction (the guard of MariaDB or
    /// PostgreSQL, SQLite's
    /// `COMMIT` with no transaction: some writes committed on their own); else the store error
    /// of [`Operation::Fence`].
    pub fn fence_refused(&self, lease: &LeaseHandle, error: BoxError) -> Error {
        let message = self.executor.database_message(&*error);
        if message.is_some_and(is_not_held) {
            tracing::warn!(lease = %lease.name(), fence = %lease.fence(), "fenced check found the lease gone");
            return lease.mark_not_held();
        }
        if message.is_some_and(is_transaction_ended) {
            return self.ended_inside(lease);
        }
        if let Some(refusal) = message.and_then(snapshot_isolation) {
            return Error::store_of_kind(
                Operation::Fence,
                Some(lease.name()),
                StoreErrorKind::Permanent,
                refusal,
            );
        }
        self.failure(Operation::Fence, Some(lease.name()))(error)
    }

    /// What a failed commit of a fenced transaction says, whether the check came with it or
    /// before it: where the database answered, as [`fence_refused`](SqlStore::fence_refused)
    /// reads it (nothing was committed); where the answer was lost
    /// ([`Execute::answer_lost`]: the connection broke, or the server ended the session, with
    /// the commit on its way), the store error of [`Operation::Fence`] of the kind
    /// [`OutcomeUnknown`](StoreErrorKind::OutcomeUnknown), since the commit may have reached
    /// the server and committed before its answer was lost. The lease is not marked lost by
    /// it. For a driver whose own transaction object sends the `COMMIT`;
    /// [`end_fenced`](SqlStore::end_fenced) and [`commit_fenced`](SqlStore::commit_fenced) call
    /// it.
    pub fn commit_failed(&self, lease: &LeaseHandle, error: BoxError) -> Error {
        if !self.executor.answer_lost(&*error) {
            return self.fence_refused(lease, error);
        }
        tracing::warn!(
            lease = %lease.name(),
            fence = %lease.fence(),
            "fenced commit sent, its answer lost: whether it committed is unknown"
        );
        self.store_error(
            Operation::Fence,
            Some(lease.name()),
            StoreErrorKind::OutcomeUnknown,
            error,
        )
    }

    /// What a fenced transaction on `connection` answers when its lease was lost before its
    /// commit (by its deadline, a refused renewal, a check elsewhere): [`Error::NotHeld`],
    /// nothing committed, unless the work had ended the transaction itself (a `COMMIT` or
    /// `ROLLBACK` of its own, on MariaDB a statement that commits by itself or a deadlock it
    /// went on after, on SQLite a rollback of SQLite's own), after which its later writes
    /// committed on their own: then the store error of [`Operation::Fence`] of the kind
    /// [`OutcomeUnknown`](StoreErrorKind::OutcomeUnknown) with [`TransactionEnded`] as its
    /// source, as the commit would have answered. It asks the database with the dialect's
    /// [`ended_probe`](Statements::ended_probe), a message of its own. Roll the transaction
    /// back after it, through the driver's transaction object: on SQLite, where the probe is a
    /// `BEGIN`, a transaction is open either way.
    ///
    /// # Cancel safety
    /// Like any statement on the caller's connection: dropped half-way, the connection may be
    /// mid-message; drop the transaction with it.
    pub async fn lost_before_commit<Conn>(
        &self,
        connection: &mut Conn,
        lease: &LeaseHandle,
    ) -> Error
    where
        Conn: Send,
        X: for<'c> ExecuteOn<&'c mut Conn>,
    {
        if self.transaction_ended(connection).await {
            self.ended_inside(lease)
        } else {
            Error::NotHeld {
                name: lease.name().clone(),
                fence: lease.fence(),
            }
        }
    }

    /// Whether the work had ended the fenced transaction on `connection`, as the dialect's
    /// [`ended_probe`](Statements::ended_probe) tells; a probe that fails otherwise (a
    /// transaction a failed statement aborted, a broken connection) says it had not.
    async fn transaction_ended<Conn>(&self, connection: &mut Conn) -> bool
    where
        Conn: Send,
        X: for<'c> ExecuteOn<&'c mut Conn>,
    {
        match self.statements.ended_probe() {
            EndedProbe::FailsWhenEnded(probe) => {
                match self.executor.batch_on(connection, probe.clone()).await {
                    Ok(()) => false,
                    Err(error) => self
                        .executor
                        .database_message(&*error)
                        .is_some_and(is_transaction_ended),
                }
            }
            EndedProbe::BeginsWhenEnded => self
                .executor
                .batch_on(connection, "BEGIN".to_owned())
                .await
                .is_ok(),
        }
    }

    /// The answer for a fenced transaction the work had ended itself: the store error of
    /// [`Operation::Fence`], [`OutcomeUnknown`](StoreErrorKind::OutcomeUnknown), with
    /// [`TransactionEnded`] as its source.
    fn ended_inside(&self, lease: &LeaseHandle) -> Error {
        tracing::warn!(lease = %lease.name(), fence = %lease.fence(), "fenced transaction ended inside its work: its later writes committed on their own");
        Error::store_of_kind(
            Operation::Fence,
            Some(lease.name()),
            StoreErrorKind::OutcomeUnknown,
            TransactionEnded,
        )
    }

    /// Ends a fenced transaction [`begin_message`](SqlStore::begin_message) began, as `commit`
    /// says: the check and the commit in one message (through the statement the connection
    /// prepared, [`FencedCommit::Prepared`], or with the check's text, as
    /// [`commit_fenced`](SqlStore::commit_fenced) sends it), or, after a check at the start,
    /// [`Statements::commit_after_check`] ([`PreparedFence::commit_after_check`](crate::PreparedFence::commit_after_check)
    /// after [`FencedCommit::CheckedPrepared`]; on PostgreSQL it fails, nothing committed, in a
    /// transaction a failed statement aborted). The connection is then left as `then` says.
    ///
    /// # Errors
    /// As [`commit_fenced`](SqlStore::commit_fenced); also [`Error::Store`] with
    /// [`Operation::Fence`], nothing committed, when a prepared statement the commit executes
    /// is gone from the connection (only if the transaction itself ran `DEALLOCATE`: the
    /// statements a begin executes are prepared after those).
    ///
    /// # Cancel safety
    /// As [`commit_fenced`](SqlStore::commit_fenced).
    pub async fn end_fenced<Conn>(
        &self,
        connection: &mut Conn,
        lease: &(impl AsRef<LeaseHandle> + Sync),
        commit: FencedCommit,
        then: AfterCommit,
    ) -> Result<Fence, Error>
    where
        Conn: Send,
        X: for<'c> ExecuteOn<&'c mut Conn>,
    {
        let handle = lease.as_ref();
        let text = match commit {
            FencedCommit::Prepared => CheckText::Prepared,
            FencedCommit::Inline => CheckText::Inline,
            FencedCommit::CheckFirst | FencedCommit::Checked | FencedCommit::CheckedPrepared => {
                let bare = CommitMessage::commit();
                let commit = match self.prepared_fence() {
                    Some(prepared) if commit == FencedCommit::CheckedPrepared => {
                        prepared.commit_after_check()
                    }
                    _ => self.statements.commit_after_check().unwrap_or(&bare),
                };
                self.send_commit(connection, handle, commit, then).await?;
                return Ok(handle.fence());
            }
        };
        crate::fence_span::traced(
            handle,
            self.check_and_commit(connection, handle, then, text),
        )
        .await
    }

    /// Makes the prepared fence's statements on `connection` after a transaction's
    /// [`begin`](crate::PreparedFence::begin) (or its check at the start) failed for want of
    /// them ([`is_fence_unprepared`](SqlStore::is_fence_unprepared)): rolls back the
    /// transaction that failed and prepares each statement the connection lacks
    /// ([`PreparedFence::prepare`](crate::PreparedFence::prepare)), leaving the connection
    /// outside any transaction. Without a prepared fence (a dialect that has none) it does
    /// nothing, the failed transaction included: no begin of such a dialect asks for it.
    ///
    /// # Errors
    /// [`Error::Store`] with [`Operation::Fence`] when a message failed.
    ///
    /// # Cancel safety
    /// Like any statement on the caller's connection: dropped half-way, the connection may be
    /// mid-message; drop it with the future.
    pub async fn prepare_fence<Conn>(
        &self,
        connection: &mut Conn,
        lease: &LeaseHandle,
    ) -> Result<(), Error>
    where
        Conn: Send,
        X: for<'c> ExecuteOn<&'c mut Conn>,
    {
        let Some(prepared) = self.prepared_fence() else {
            return Ok(());
        };
        let failed = self.failure(Operation::Fence, Some(lease.name()));
        self.rollback_begin(&mut *connection, lease).await?;
        for statement in prepared.prepare() {
            match self
                .executor
                .batch_on(&mut *connection, statement.clone())
                .await
            {
                Ok(()) => {}
                Err(error)
                    if self
                        .executor
                        .database_message(&*error)
                        .is_some_and(|message| prepared.already_exists(message)) => {}
                Err(error) => return Err(failed(error)),
            }
        }
        Ok(())
    }

    /// Whether `error`, from a transaction's [`begin`](crate::PreparedFence::begin), says that
    /// the connection has no prepared fence yet.
    pub fn is_fence_unprepared(
        &self,
        error: &(dyn std::error::Error + Send + Sync + 'static),
    ) -> bool {
        let Some(prepared) = self.prepared_fence() else {
            return false;
        };
        self.executor
            .database_message(error)
            .is_some_and(|message| prepared.is_missing(message))
    }

    /// [`commit_fenced`](SqlStore::commit_fenced), outside its span.
    async fn check_and_commit<Conn>(
        &self,
        connection: &mut Conn,
        lease: &LeaseHandle,
        then: AfterCommit,
        text: CheckText,
    ) -> Result<Fence, Error>
    where
        Conn: Send,
        X: for<'c> ExecuteOn<&'c mut Conn>,
    {
        let failed = self.failure(Operation::Fence, Some(lease.name()));
        let (name, holder, fence) = (lease.name(), lease.holder(), lease.fence());
        let check = match text {
            CheckText::Prepared if self.prepared_fence().is_some() => self
                .statements
                .prepared_fence_then_commit(name, holder, fence),
            _ => self.statements.fence_then_commit(name, holder, fence),
        };
        let Some(message) = check else {
            // In process: the check as at the start of a transaction, then the commit. A check
            // that found the lease gone after the work had ended the transaction ran on its
            // own, and the work's later writes committed: that is the answer, not "not held".
            match self.check(&mut *connection, lease).await {
                Err(Error::NotHeld { .. }) => {
                    return Err(self.lost_before_commit(&mut *connection, lease).await);
                }
                refused => {
                    refused?;
                }
            }
            self.send_commit(connection, lease, &CommitMessage::commit(), then)
                .await?;
            return Ok(lease.fence());
        };
        let message = message.map_err(|e| failed(Box::new(e)))?;
        self.send_commit(connection, lease, &message, then).await?;
        Ok(lease.fence())
    }

    /// Sends `commit` and what `then` puts after it as one message on `connection`. A failure
    /// after every statement of `commit` completed, the `COMMIT` included, is not the commit's:
    /// it is what followed (the `BEGIN` of [`AfterCommit::Begin`]) that failed, such as for a
    /// cancel or a statement timeout PostgreSQL held off while it wrote the commit and raised
    /// at the next statement ([`CommitMessage`]). It is logged, and the commit answered as
    /// done; the connection is then outside any transaction. Any other failure is read by
    /// [`commit_failed`](SqlStore::commit_failed).
    async fn send_commit<Conn>(
        &self,
        connection: &mut Conn,
        lease: &LeaseHandle,
        commit: &CommitMessage,
        then: AfterCommit,
    ) -> Result<(), Error>
    where
        Conn: Send,
        X: for<'c> ExecuteOn<&'c mut Conn>,
    {
        let sent = self
            .executor
            .batch_counted_on(connection, commit.followed_by(then))
            .await;
        match sent {
            Ok(()) => Ok(()),
            Err(BatchFailed {
                error,
                completed: Some(completed),
            }) if commit.committed_before(completed) => {
                tracing::warn!(
                    lease = %lease.name(),
                    fence = %lease.fence(),
                    %error,
                    "fenced transaction committed; the statement after its COMMIT failed"
                );
                Ok(())
            }
            Err(failed) => Err(self.commit_failed(lease, failed.error)),
        }
    }

    /// Wraps a driver's error as the store error of `operation` on `name`, of the kind the
    /// executor reads in it.
    fn failure<'a>(
        &'a self,
        operation: Operation,
        name: Option<&'a LeaseName>,
    ) -> impl Fn(BoxError) -> Error + Copy + 'a {
        move |source| {
            let kind = self.executor.classify(&*source);
            self.store_error(operation, name, kind, source)
        }
    }

    /// The store error of `operation` on `name` of `kind`, wrapping the driver's error with the
    /// database's own words where the executor reads them.
    fn store_error(
        &self,
        operation: Operation,
        name: Option<&LeaseName>,
        kind: StoreErrorKind,
        source: BoxError,
    ) -> Error {
        let source = match self.executor.describe(&*source) {
            Some(message) => Box::new(DatabaseError::new(message, source)),
            None => source,
        };
        Error::store_of_kind(operation, name, kind, source)
    }

    /// Whether the database rolled a statement back for a conflict with a concurrent
    /// transaction (a deadlock, a serialization failure, a write that lost a Galera
    /// certification).
    fn is_conflict(&self, error: &BoxError) -> bool {
        self.executor.classify(&**error) == StoreErrorKind::Conflict
    }

    /// Runs `statement`, and again where its refusal says that the same statement may succeed
    /// at once. Only for the operations whose statement means the same when sent twice.
    ///
    /// - Rolled back for a conflict: once more. The other transaction has committed by then, so
    ///   the second run sees its row.
    /// - Refused as read-only: the server the connection leads to is a standby, or a primary a
    ///   switchover demoted, and nothing was written. The executor closed that connection, but
    ///   a demotion that leaves the old server's sessions open leaves every idle connection of
    ///   the pool leading there too, and each would fail a statement of its own (a holder's
    ///   renewal a quarter period apart, so that a pool of many connections cost several
    ///   periods). So the statement is sent again while the pool holds idle connections at a
    ///   refusal (the ones it hands out next, each perhaps leading to the demoted server; read
    ///   at every refusal, as connections other calls give back join them), and at most
    ///   [`READ_ONLY_WITHOUT_IDLE`] times when it holds none (a connection given back
    ///   meanwhile, which a driver returns to its pool in the background, then one it opens, to
    ///   whatever server the URL names now), no more times in all than the pool held
    ///   connections at the first refusal and those two, and at most [`READ_ONLY_AGAIN`]; a
    ///   refusal after that (the server the URL names is still read-only: the switchover is not
    ///   over) is answered. Whether it is sent again depends on the idle connections, not on
    ///   those other calls are using (those calls meet their own refusals, and waiting for
    ///   them would open a new connection for each); every connection counts toward the
    ///   most.
    async fn again_if_refused<T, F>(&self, statement: impl Fn() -> F) -> Result<T, BoxError>
    where
        F: Future<Output = Result<T, BoxError>>,
    {
        let mut conflicted = false;
        // Read-only refusals sent again so far, how many went out with no idle connection in
        // the pool, and the most there may be: the pool's connections at the first refusal and
        // the sends with none idle (a pool that counts a refused connection idle until its
        // next checkout, as deadpool does, would otherwise find one idle every time).
        let (mut read_only_again, mut sent_without_idle) = (0, 0);
        let mut read_only_most: Option<u32> = None;
        loop {
            let error = match statement().await {
                Err(error) => error,
                answer => return answer,
            };
            match self.executor.classify(&*error) {
                StoreErrorKind::Conflict if !conflicted => {
                    conflicted = true;
                    tracing::debug!(%error, "statement rolled back for a conflict, sent once more");
                }
                StoreErrorKind::ReadOnly => {
                    let pool = self.executor.pool_state();
                    let most = *read_only_most.get_or_insert_with(|| {
                        pool.size
                            .saturating_add(READ_ONLY_WITHOUT_IDLE)
                            .min(READ_ONLY_AGAIN)
                    });
                    let idle = pool.idle > 0;
                    if read_only_again >= most
                        || (!idle && sent_without_idle >= READ_ONLY_WITHOUT_IDLE)
                    {
                        return Err(error);
                    }
                    read_only_again += 1;
                    if !idle {
                        sent_without_idle += 1;
                    }
                    tracing::debug!(
                        %error,
                        "statement refused as read-only, its connection closed: sent again on another"
                    );
                }
                _ => return Err(error),
            }
        }
    }

    /// The positions in `batch` (distinct pairs) of the leases one renew-many statement renewed.
    async fn renew_batch(&self, batch: &[(&str, &str)], ttl: Ttl) -> Result<Vec<usize>, Error> {
        let failed = self.failure(Operation::RenewMany, None);
        let query = || self.statements.renew_many(batch, ttl);
        match self.statements.renew_many_result() {
            RenewManyResult::Positions => {
                let rows = self
                    .again_if_refused(|| self.executor.ints(query()))
                    .await
                    .map_err(failed)?;
                rows.into_iter()
                    .map(|position| {
                        usize::try_from(position)
                            .ok()
                            .filter(|&position| position < batch.len())
                            .ok_or_else(|| {
                                failed(format!("renew-many answered position {position}").into())
                            })
                    })
                    .collect()
            }
            RenewManyResult::Pairs => {
                let rows = self
                    .again_if_refused(|| self.executor.text_pairs(query()))
                    .await
                    .map_err(failed)?;
                Ok(crate::positions_in_batch(batch, &rows))
            }
            RenewManyResult::Count => {
                // How many leases of `part` of the batch one statement renewed.
                let renew_part = |part: std::ops::Range<usize>| {
                    let pairs = &batch[part];
                    async move {
                        self.again_if_refused(|| {
                            self.executor
                                .affected(self.statements.renew_many(pairs, ttl))
                        })
                        .await
                        .map_err(failed)
                    }
                };
                // A count that falls short cannot say which lease is lost: the part is renewed
                // again in halves (those renewed already renew again, harmless; the lost stay
                // lost) until each part is renewed whole or not at all: about two statements
                // per lost lease for each halving, where renewing one by one sent one per lease
                // (a thousand for a batch with one lease lost, which a store timeout cut short
                // every time, and every lease of the batch then went unrenewed). A part with so
                // many lost that halving would send more than its leases is renewed one lease
                // at a time, so a batch never costs much more than one statement per lease.
                let mut renewed = Vec::with_capacity(batch.len());
                let mut parts = vec![(0..batch.len(), renew_part(0..batch.len()).await?)];
                while let Some((part, matched)) = parts.pop() {
                    let lost = part.len() as u64 - matched.min(part.len() as u64);
                    if lost == 0 {
                        renewed.extend(part);
                    } else if matched == 0 {
                        continue;
                    } else if halving_costs(part.len() as u64, lost) > part.len() as u64 {
                        for one in part {
                            if renew_part(one..one + 1).await? == 1 {
                                renewed.push(one);
                            }
                        }
                    } else {
                        // Two leases at least: one renewed, one not.
                        let middle = part.start + part.len() / 2;
                        for half in [part.start..middle, middle..part.end] {
                            let matched = renew_part(half.clone()).await?;
                            parts.push((half, matched));
                        }
                    }
                }
                renewed.sort_unstable();
                Ok(renewed)
            }
        }
    }
}

/// About how many statements finding `lost` leases among `leases` by halves sends: two for
/// each part that holds a lost one at each halving, the lost ones sharing parts until the
/// parts are about `leases / lost` long, then each halved alone down to one lease.
fn halving_costs(leases: u64, lost: u64) -> u64 {
    let lost = lost.max(1);
    let alone = u64::from(leases.div_ceil(lost).next_power_of_two().trailing_zeros());
    2 * lost * alone + 2 * u64::from(lost.ilog2())
}

/// The store error of a pool that could not be opened, of the kind the driver reads in it
/// ([`Execute::classify_connect`]).
fn connect_failed<X: Execute>(source: BoxError) -> Error {
    let kind = X::classify_connect(&*source);
    Error::store_of_kind(Operation::Setup, None, kind, source)
}

/// The operations, each one statement of [`Statements`] run by the [`Execute`].
#[async_trait]
impl<X: Execute> LeaseStore for SqlStore<X> {
    async fn try_acquire(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<Option<Fence>, Error> {
        let failed = self.failure(Operation::Acquire, Some(name));
        let attempt = self
            .again_if_refused(|| {
                self.executor
                    .int_pairs(self.statements.try_acquire(name, holder, ttl))
            })
            .await;
        let rows = match attempt {
            // Rolled back twice for a concurrent write of the same row (on Galera: a takeover
            // certified on another node first): this holder wrote nothing, and somebody else's
            // write of the lease committed. Not acquired.
            Err(error) if self.is_conflict(&error) => {
                tracing::debug!(lease = %name, %error, "acquire lost to a concurrent write");
                return Ok(None);
            }
            // Sent, and its answer lost (the connection broke, the server ended the session):
            // the statement may have taken the lease for this holder, which only a release
            // frees before its TTL. `OutcomeUnknown` says so (the client gives it back).
            Err(error) if self.executor.answer_lost(&*error) => {
                return Err(self.store_error(
                    Operation::Acquire,
                    Some(name),
                    StoreErrorKind::OutcomeUnknown,
                    error,
                ));
            }
            attempt => attempt.map_err(failed)?,
        };
        crate::acquired(rows.into_iter().next()).map_err(failed)
    }

    async fn renew(&self, name: &LeaseName, holder: &HolderId, ttl: Ttl) -> Result<bool, Error> {
        let matched = self
            .again_if_refused(|| {
                self.executor
                    .affected(self.statements.renew(name, holder, ttl))
            })
            .await
            .map_err(self.failure(Operation::Renew, Some(name)))?;
        Ok(matched > 0)
    }

    /// One statement per batch of at most [`Dialect::renew_many_batch`](crate::Dialect) distinct
    /// pairs; the answer comes back for each pair asked, in order: by position in the batch
    /// (PostgreSQL), by the distinct `(name, holder)` pairs the statement returns (SQLite), or
    /// by a count, and by halves of the batch when it falls short (MariaDB, see
    /// [`RenewManyResult`](crate::RenewManyResult)).
    async fn renew_many(
        &self,
        leases: &[(LeaseName, HolderId)],
        ttl: Ttl,
    ) -> Result<Vec<bool>, Error> {
        let distinct = crate::distinct_pairs(leases);
        let mut renewed = vec![false; distinct.pairs.len()];
        let batch = self.statements.dialect().renew_many_batch();
        for (number, pairs) in distinct.pairs.chunks(batch).enumerate() {
            for position in self.renew_batch(pairs, ttl).await? {
                renewed[number * batch + position] = true;
            }
        }
        Ok(distinct.slots.iter().map(|&slot| renewed[slot]).collect())
    }

    async fn release(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        min_hold: Duration,
    ) -> Result<bool, Error> {
        let matched = self
            .again_if_refused(|| {
                self.executor
                    .affected(self.statements.release(name, holder, min_hold))
            })
            .await
            .map_err(self.failure(Operation::Release, Some(name)))?;
        Ok(matched > 0)
    }

    /// One `DELETE`; fences stay increasing across it because a new row's fence is the
    /// database's clock in microseconds (see [`Statements::try_acquire`]).
    async fn prune(&self, released_for: Duration) -> Result<u64, Error> {
        self.again_if_refused(|| self.executor.affected(self.statements.prune(released_for)))
            .await
            .map_err(self.failure(Operation::Prune, None))
    }

    async fn inspect(&self, name: &LeaseName) -> Result<Option<LeaseInfo>, Error> {
        let failed = self.failure(Operation::Inspect, Some(name));
        let rows = self
            .executor
            .lease_rows(self.statements.inspect(name))
            .await
            .map_err(failed)?;
        rows.into_iter()
            .next()
            .map(|row| row.into_info().map_err(failed))
            .transpose()
    }

    async fn list(&self) -> Result<Vec<LeaseInfo>, Error> {
        let failed = self.failure(Operation::List, None);
        let rows = self
            .executor
            .lease_rows(self.statements.list())
            .await
            .map_err(failed)?;
        rows.into_iter()
            .map(|row| row.into_info().map_err(failed))
            .collect()
    }

    async fn release_events(&self) -> Result<Option<ReleaseEvents>, Error> {
        let Some(channel) = self
            .statements
            .release_channel()
            .filter(|_| self.statements.notifies_releases())
        else {
            return Ok(None);
        };
        self.executor
            .release_events(channel)
            .await
            .map_err(self.failure(Operation::Subscribe, None))
    }
}

impl<X: Clone> Clone for SqlStore<X> {
    fn clone(&self) -> Self {
        Self {
            executor: self.executor.clone(),
            statements: Arc::clone(&self.statements),
        }
    }
}

/// Shows the dialect, the table, the executor and the pool's state, never the pool's connect
/// options (they hold the URL and the password).
impl<X: Execute> fmt::Debug for SqlStore<X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.executor.pool_state();
        f.debug_struct("SqlStore")
            .field("dialect", &self.statements.dialect())
            .field("table", self.statements.table())
            .field("executor", &self.executor)
            .field("pool_size", &state.size)
            .field("pool_idle", &state.idle)
            .finish_non_exhaustive()
    }
}

/// Which text of the fenced commit's check a transaction sends.
#[derive(Debug, Clone, Copy)]
enum CheckText {
    /// The check itself, parameters inline: parsed and planned at each commit.
    Inline,
    /// The `EXECUTE` of the check the connection prepared
    /// ([`PreparedFence`](crate::PreparedFence)).
    Prepared,
}

/// Where a fenced transaction checks its lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CheckAt {
    /// With the commit, in its message: the lease's row is locked only for the check and the
    /// commit, so the holder's renewals and a takeover of an expired lease never wait for the
    /// work, however long it runs; a stale holder learns at the commit that nothing was
    /// written (SQLite checks at the start whatever this says). On MariaDB with
    /// `innodb_snapshot_isolation` on (the default from 11.6.2), a `REPEATABLE READ`
    /// transaction that read before a renewal committed fails its check with a
    /// [`Conflict`](lease_core::StoreErrorKind::Conflict), nothing committed: every time, for
    /// work longer than the renewal period. Use [`Begin`](CheckAt::Begin) there, or
    /// `READ COMMITTED`.
    #[default]
    Commit,
    /// With the `BEGIN`, in its message: a stale holder learns before the work, and the
    /// transaction costs the check and, with its `COMMIT`, the guard of
    /// [`TransactionEnded`](crate::TransactionEnded) (PostgreSQL, MariaDB); the lease's row stays
    /// locked until the transaction ends, so the holder's renewals wait for the work (a
    /// transaction longer than the client's store timeout fails them until it ends, one
    /// longer than the TTL loses the lease).
    Begin,
}

/// One try at beginning a fenced transaction ([`SqlStore::begin_message`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// Through the statements prepared on the connection (PostgreSQL).
    Prepared,
    /// The same, after [`SqlStore::prepare_fence`] made them.
    PreparedAgain,
    /// With the check's text: the statements do not stay on the connection.
    Text,
}

/// How a fenced transaction [`SqlStore::begin_fenced`] began must end
/// ([`SqlStore::end_fenced`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FencedCommit {
    /// The check has not run: at the commit, through the statement the connection prepared
    /// ([`PreparedFence`](crate::PreparedFence), PostgreSQL).
    Prepared,
    /// The check has not run: at the commit, with the check's text (MariaDB, or PostgreSQL
    /// where the prepared statements do not stay on the connection).
    Inline,
    /// The check must run first, before the work ([`SqlStore::fence`]), and the commit is a
    /// plain one (SQLite).
    CheckFirst,
    /// The check ran in the `BEGIN`'s message, as text; the commit is
    /// [`Statements::commit_after_check`](crate::Statements::commit_after_check).
    Checked,
    /// The check ran in the `BEGIN`'s message through the statements the connection prepared
    /// ([`PreparedFence`](crate::PreparedFence), PostgreSQL); the commit is
    /// [`PreparedFence::commit_after_check`](crate::PreparedFence::commit_after_check), which
    /// executes the prepared guard.
    CheckedPrepared,
}

impl FencedCommit {
    /// Whether the check ran in the `BEGIN`'s message ([`Checked`](FencedCommit::Checked),
    /// [`CheckedPrepared`](FencedCommit::CheckedPrepared)).
    pub fn checked_at_begin(self) -> bool {
        matches!(self, Self::Checked | Self::CheckedPrepared)
    }
}
