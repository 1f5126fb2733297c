//! [`Execute`]: how a driver runs one statement on its pool, all a backend crate writes; and
//! [`Connect`], how it opens a pool from a URL.

use std::future::Future;
use std::pin::Pin;

use async_trait::async_trait;
use lease_core::{BoxError, ReleaseEvents, StoreErrorKind};

use crate::{BatchFailed, Dialect, LeaseRow, PoolState, Query};

/// How a driver runs one [`Query`] on a connection borrowed from its pool for that statement
/// alone, and reads what it answers. A backend crate implements it for a type that holds its
/// pool; [`SqlStore`](crate::SqlStore) builds every lease operation on it.
///
/// Each method answers with the driver's own error; the store names the operation and the lease
/// around it. Its `Debug` shows how it runs statements, never the pool's connect options (they
/// hold the URL and the password). A method's future may be dropped at any point (lease-core puts the store timeout
/// around every call): an implementation must then leave its pool's connections usable, by
/// finishing a statement it has sent or by closing the connection.
#[async_trait]
pub trait Execute: std::fmt::Debug + Send + Sync + 'static {
    /// The driver's pool, as the application made it: cheap to clone.
    type Pool: Clone + Send + Sync;

    /// The SQL dialect of the pool's database.
    fn dialect(&self) -> Dialect;

    /// The pool the statements borrow their connections from.
    fn pool(&self) -> &Self::Pool;

    /// How many connections the pool has open, and how many of them are idle.
    fn pool_state(&self) -> PoolState;

    /// Whether a statement prepared on a connection stays there for the connection's later
    /// transactions: `true`, the default, for a driver connected to the server itself; `false`
    /// behind a pooler that hands each transaction another server connection (lease-sqlx's
    /// `PgProtocol::SimpleInline`). Where it is `false`, the fenced transactions on PostgreSQL
    /// check with the check's text rather than a statement the connection prepared
    /// ([`SqlStore::prepared_fence`](crate::SqlStore::prepared_fence)).
    fn prepares(&self) -> bool {
        true
    }

    /// What an error this executor answered means to whoever would try again, from the
    /// driver's error code ([`postgres_error_kind`](crate::postgres_error_kind),
    /// [`mysql_error_kind_with_message`](crate::mysql_error_kind_with_message),
    /// [`sqlite_error_kind`](crate::sqlite_error_kind)) or its own failures (a pool timeout is
    /// [`Transient`](StoreErrorKind::Transient)). An error of another origin is
    /// [`Permanent`](StoreErrorKind::Permanent).
    ///
    /// An executor must also close, not give back to its pool, a connection that answered a
    /// [`ReadOnly`](StoreErrorKind::ReadOnly) error: after a failover it is connected to a
    /// standby, and the next connection the pool opens finds the new primary.
    fn classify(&self, error: &(dyn std::error::Error + Send + Sync + 'static)) -> StoreErrorKind;

    /// What the database answered in `error`, as a person reads it (its message and code), when
    /// the driver's own text adds to it; the store then reports a
    /// [`DatabaseError`](crate::DatabaseError) with this text, keeping the driver's error inside.
    /// `None`, the default, keeps the driver's error as it is.
    fn describe(&self, error: &(dyn std::error::Error + Send + Sync + 'static)) -> Option<String> {
        let _ = error;
        None
    }

    /// The database's own message in `error`, when the database answered it (not the driver's
    /// wording around it); how [`SqlStore::commit_fenced`](crate::SqlStore::commit_fenced)
    /// recognises its check's [`NOT_HELD_MARKER`](crate::NOT_HELD_MARKER). `None`, the default,
    /// for an executor that cannot tell: a failed fenced commit then reads as a store error.
    fn database_message<'e>(
        &self,
        error: &'e (dyn std::error::Error + Send + Sync + 'static),
    ) -> Option<&'e str> {
        let _ = error;
        None
    }

    /// Whether `error` leaves unknown what the statement it failed did: no answer came (the
    /// connection broke with the statement on its way or its answer not yet read), or the
    /// server ended the session in answering ([`ends_session`](crate::ends_session): shutting
    /// down, the connection killed), which it may do after the statement took effect.
    /// [`SqlStore::commit_failed`](crate::SqlStore::commit_failed) reads a fenced commit's
    /// failure by it.
    ///
    /// The default: what the error's code says, where it has one
    /// ([`code_ends_session`](Execute::code_ends_session)); otherwise, with a
    /// [`database_message`](Execute::database_message), whether that message ends the session; without one, whether the error is
    /// [`Transient`](StoreErrorKind::Transient) (a failure of the connection, not of the
    /// statement), which an executor that cannot tell the database's messages reads for every
    /// transient failure: the cautious reading. A driver that wraps its connection failures as
    /// database errors (as diesel does) says so itself.
    fn answer_lost(&self, error: &(dyn std::error::Error + Send + Sync + 'static)) -> bool {
        if let Some(ended) = self.code_ends_session(error) {
            return ended;
        }
        match self.database_message(error) {
            Some(message) => crate::ends_session(message),
            None => self.classify(error) == StoreErrorKind::Transient,
        }
    }

    /// Whether the database's code in `error` (a SQLSTATE, an error number) says that the
    /// session ended while the statement was in flight
    /// ([`postgres_ends_session`](crate::postgres_ends_session),
    /// [`mysql_ends_session`](crate::mysql_ends_session)): what
    /// [`answer_lost`](Execute::answer_lost) reads first and, where there is a code, alone, as
    /// the words of a message depend on the language the server writes in (and a session the
    /// server ended for a transaction left idle, whose message says it terminates the
    /// connection, ended with nothing in flight). `None`, the default, for an error that
    /// carries no code.
    fn code_ends_session(
        &self,
        error: &(dyn std::error::Error + Send + Sync + 'static),
    ) -> Option<bool> {
        let _ = error;
        None
    }

    /// Rows of two integers: try-acquire's `(fence, won)`.
    ///
    /// # Errors
    /// The driver's error, boxed: no connection from the pool, the statement refused or cut.
    ///
    /// # Cancel safety
    /// As every method of the trait: dropped, the statement may still run on the server, and
    /// the implementation leaves its connection usable (see [`Execute`]).
    async fn int_pairs(&self, query: Query<'_>) -> Result<Vec<(i64, i64)>, BoxError>;

    /// Rows of one integer: renew-many's positions
    /// ([`RenewManyResult::Positions`](crate::RenewManyResult::Positions)).
    ///
    /// # Errors
    /// The driver's error, boxed: no connection from the pool, the statement refused or cut.
    ///
    /// # Cancel safety
    /// As every method of the trait: dropped, the statement may still run on the server, and
    /// the implementation leaves its connection usable (see [`Execute`]).
    async fn ints(&self, query: Query<'_>) -> Result<Vec<i64>, BoxError>;

    /// Rows of two texts: renew-many's `(name, holder)`
    /// ([`RenewManyResult::Pairs`](crate::RenewManyResult::Pairs)).
    ///
    /// # Errors
    /// The driver's error, boxed: no connection from the pool, the statement refused or cut.
    ///
    /// # Cancel safety
    /// As every method of the trait: dropped, the statement may still run on the server, and
    /// the implementation leaves its connection usable (see [`Execute`]).
    async fn text_pairs(&self, query: Query<'_>) -> Result<Vec<(String, String)>, BoxError>;

    /// Lease rows: inspect's and list's.
    ///
    /// # Errors
    /// The driver's error, boxed: no connection from the pool, the statement refused or cut.
    ///
    /// # Cancel safety
    /// As every method of the trait: dropped, the statement may still run on the server, and
    /// the implementation leaves its connection usable (see [`Execute`]).
    async fn lease_rows(&self, query: Query<'_>) -> Result<Vec<LeaseRow>, BoxError>;

    /// How many rows the statement matched (found, not changed: the drivers set
    /// `CLIENT_FOUND_ROWS` on MariaDB).
    ///
    /// # Errors
    /// The driver's error, boxed: no connection from the pool, the statement refused or cut.
    ///
    /// # Cancel safety
    /// As every method of the trait: dropped, the statement may still run on the server, and
    /// the implementation leaves its connection usable (see [`Execute`]).
    async fn affected(&self, query: Query<'_>) -> Result<u64, BoxError>;

    /// Runs DDL without parameters, which may hold several statements, as one simple-protocol
    /// message where the database has one (one implicit transaction on PostgreSQL).
    ///
    /// # Errors
    /// The driver's error, boxed: no connection from the pool, the statement refused or cut.
    ///
    /// # Cancel safety
    /// As every method of the trait: dropped, the statement may still run on the server, and
    /// the implementation leaves its connection usable (see [`Execute`]).
    async fn batch(&self, sql: &str) -> Result<(), BoxError>;

    /// Names of leases released on `channel`, pushed by the database (PostgreSQL `LISTEN`), on a
    /// connection of their own outside the pool. `None`, the default, where the driver cannot
    /// listen: waiters then poll.
    ///
    /// # Errors
    /// The driver's error, boxed: the listening connection not made, or its `LISTEN` refused.
    ///
    /// # Cancel safety
    /// Dropped before it answered, it leaves nothing listening: the connection it was making is
    /// its own, and goes with it. The pool is not touched.
    async fn release_events(&self, channel: &str) -> Result<Option<ReleaseEvents>, BoxError> {
        let _ = channel;
        Ok(None)
    }

    /// What a failure to open this executor's pool ([`Connect::connect`],
    /// [`ConnectWith::connect_with`]) means, read without an executor: by default
    /// [`Transient`](StoreErrorKind::Transient) (the server may come up). A driver whose
    /// errors say more reads them as [`classify`](Execute::classify) does, so that a wrong
    /// password, an unknown database or an invalid URL is
    /// [`Permanent`](StoreErrorKind::Permanent) and a start-up that retries transient errors
    /// stops.
    fn classify_connect(error: &(dyn std::error::Error + Send + Sync + 'static)) -> StoreErrorKind
    where
        Self: Sized,
    {
        let _ = error;
        StoreErrorKind::Transient
    }
}

/// An [`Execute`] that can open its own pool from a database URL, with the settings a lease store
/// needs (on SQLite: write-ahead logging and a busy timeout).
#[async_trait]
pub trait Connect: Execute + Sized {
    /// A pool on the database at `url`.
    ///
    /// # Errors
    /// The driver's error when the URL is invalid or the database cannot be reached.
    ///
    /// # Cancel safety
    /// Cancel-safe: a pool that was half made is dropped with its connections.
    async fn connect(url: &str) -> Result<Self, BoxError>;
}

/// An [`Execute`] that can open its own pool from the driver's connect options `O` (sqlx's
/// `SqliteConnectOptions`, `PgConnectOptions`, ...), adding the settings a lease store needs as
/// [`Connect`] does, for what a URL cannot say or an application builds in code.
#[async_trait]
pub trait ConnectWith<O>: Execute + Sized {
    /// A pool on the database `options` name.
    ///
    /// # Errors
    /// The driver's error when the database cannot be reached.
    ///
    /// # Cancel safety
    /// Cancel-safe: a pool that was half made is dropped with its connections.
    async fn connect_with(options: O) -> Result<Self, BoxError>;
}

/// An [`Execute`] that can also run a statement on a connection the caller holds, inside the
/// caller's own transaction: what [`SqlStore::fence`](crate::SqlStore::fence) needs. `C` is the
/// driver's connection as the caller has it (sqlx: `&mut PgConnection`, which `&mut *tx` gives;
/// diesel-async: `&mut AsyncPgConnection` inside `transaction`).
pub trait ExecuteOn<C>: Execute {
    /// How many rows the statement matched, run on `conn`.
    ///
    /// # Errors
    /// The driver's error, boxed: the statement refused, or the connection broken.
    ///
    /// # Cancel safety
    /// Dropped, the statement may still run on the server; the caller's connection and
    /// transaction are the caller's to end, as for any statement it runs on them.
    fn affected_on<'a>(&'a self, conn: C, query: Query<'a>) -> OnConnection<'a, u64>
    where
        C: 'a;

    /// Runs `sql`, which may hold several statements and has no parameters, on `conn` as one
    /// simple-protocol message (PostgreSQL's simple query, MariaDB's text protocol with
    /// multiple statements, SQLite's statements in turn), stopping at the first error.
    ///
    /// # Errors
    /// The driver's error, boxed: the statement refused, or the connection broken.
    ///
    /// # Cancel safety
    /// Dropped, the statement may still run on the server; the caller's connection and
    /// transaction are the caller's to end, as for any statement it runs on them.
    fn batch_on<'a>(&'a self, conn: C, sql: String) -> OnConnection<'a, ()>
    where
        C: 'a;

    /// Runs `sql` as [`batch_on`](ExecuteOn::batch_on) does and, when a statement fails, also
    /// answers how many of the message's statements had completed before it
    /// ([`BatchFailed::completed`]), where the driver can tell: what tells a fenced commit
    /// that failed after its `COMMIT` from one that failed before
    /// ([`CommitMessage`](crate::CommitMessage)). By default it does not tell (`None`); a
    /// driver that can should, if its fenced commits go on after the `COMMIT`
    /// ([`AfterCommit::Begin`](crate::AfterCommit::Begin)).
    ///
    /// # Errors
    /// The driver's error, boxed: the statement refused, or the connection broken.
    ///
    /// # Cancel safety
    /// Dropped, the statement may still run on the server; the caller's connection and
    /// transaction are the caller's to end, as for any statement it runs on them.
    fn batch_counted_on<'a>(&'a self, conn: C, sql: String) -> CountedOnConnection<'a>
    where
        C: 'a,
    {
        let sent = self.batch_on(conn, sql);
        Box::pin(async move {
            sent.await.map_err(|error| BatchFailed {
                error,
                completed: None,
            })
        })
    }
}

/// What [`ExecuteOn`]'s methods answer: the statement's future on the caller's connection,
/// `Send` so that it can run inside the caller's task wherever that is.
pub type OnConnection<'a, T> = Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send + 'a>>;

/// What [`ExecuteOn::batch_counted_on`] answers: as [`OnConnection`], its failure counting the
/// statements that completed before it.
pub type CountedOnConnection<'a> =
    Pin<Box<dyn Future<Output = Result<(), BatchFailed>> + Send + 'a>>;
