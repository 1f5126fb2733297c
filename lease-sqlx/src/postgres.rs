//! PostgreSQL: [`PgLeaseStore`] and [`PgProtocol`] for PgBouncer.

use futures::StreamExt;
use futures::future::BoxFuture;
use lease_core::{BoxError, LeaseName, ReleaseEvents, StoreErrorKind};
use lease_sql::{Dialect, Param, SqlStore};
use sqlx::error::DatabaseError;
use sqlx::postgres::{
    PgArguments, PgDatabaseError, PgListener, PgPoolOptions, PgQueryResult, PgSeverity,
};
use sqlx::query::Query;
use sqlx::{PgPool, Postgres};

use crate::database::sealed::Sealed;
use crate::executor::Mode;
use crate::{SqlxDatabase, SqlxExecutor};

impl Sealed for Postgres {}

impl SqlxDatabase for Postgres {
    const DIALECT: Dialect = Dialect::Postgres;
    const NAME: &'static str = "postgres";

    fn bind<'q>(
        query: Query<'q, Self, PgArguments>,
        param: Param<'q>,
    ) -> Query<'q, Self, PgArguments> {
        match param {
            Param::Text(text) => query.bind(text),
            Param::Int(int) => query.bind(int),
        }
    }

    fn rows_affected(result: &PgQueryResult) -> u64 {
        result.rows_affected()
    }

    fn database_error_kind(error: &dyn DatabaseError) -> StoreErrorKind {
        error.code().map_or(StoreErrorKind::Permanent, |code| {
            lease_sql::postgres_error_kind(&code)
        })
    }

    fn database_error_ends_session(error: &dyn DatabaseError) -> Option<bool> {
        let severity = match error
            .try_downcast_ref::<PgDatabaseError>()
            .map(PgDatabaseError::severity)
        {
            Some(PgSeverity::Panic) => "PANIC",
            Some(PgSeverity::Fatal) => "FATAL",
            _ => "ERROR",
        };
        error
            .code()
            .map(|code| lease_sql::postgres_error_ends_session(&code, severity))
    }

    fn release_events<'a>(
        pool: &'a PgPool,
        channel: &'a str,
    ) -> BoxFuture<'a, Result<Option<ReleaseEvents>, BoxError>> {
        Box::pin(listen(pool, channel))
    }
}

/// Leases in a PostgreSQL table, through a [`PgPool`](sqlx::PgPool).
pub type PgLeaseStore = SqlStore<SqlxExecutor<Postgres>>;

/// How a PostgreSQL store sends its statements.
///
/// # PgBouncer in transaction pooling mode
///
/// With `pool_mode = transaction`, PgBouncer hands the client a server connection for one
/// transaction at a time; between transactions the next message may go to another server. That
/// breaks sqlx's default, [`Prepared`](PgProtocol::Prepared): a statement prepared on one server
/// does not exist on the next (PgBouncer 1.21 and later can track prepared statements; Debian 12
/// ships 1.18). Turning the statement cache off does not help, and unnamed statements
/// (`persistent(false)`) are worse: sqlx sends Parse and Bind/Execute as separate
/// synchronised steps, PgBouncer may route them to different servers, and a Bind can then run
/// another client's unnamed statement with this one's parameters, giving wrong answers and no
/// error.
///
/// [`SimpleInline`](PgProtocol::SimpleInline) sends each statement as one simple-protocol
/// `Query` message with its parameters written in as literals. One message is one implicit
/// transaction, which PgBouncer runs whole on one server, and nothing is prepared, so nothing
/// can be routed apart. The literals are escape strings with every `'` and `\` doubled and
/// integers formatted by Rust (see `lease_sql::postgres_literal` for why that is exact). It costs
/// a parse per statement, which is what PgBouncer's transaction mode costs anyway, and no more
/// round trips than the prepared path.
///
/// ```no_run
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// use lease_sqlx::sqlx::postgres::PgPoolOptions;
/// use lease_sqlx::{PgLeaseStore, PgProtocol, SqlxExecutor};
///
/// // Port 6432: PgBouncer, pool_mode = transaction.
/// let pool = PgPoolOptions::new()
///     .max_connections(4)
///     .connect("postgres://app@127.0.0.1:6432/app")
///     .await?;
/// let store = PgLeaseStore::new(SqlxExecutor::new(pool).with_protocol(PgProtocol::SimpleInline));
/// store.setup().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PgProtocol {
    /// Prepared statements, cached per connection: the fastest on a direct connection or
    /// behind PgBouncer in session pooling mode. The default.
    #[default]
    Prepared,
    /// Every statement as one simple-protocol message with its parameters as escaped literals:
    /// correct behind PgBouncer (and other poolers) in transaction pooling mode. Statement
    /// pooling runs the store's operations (each one statement) but no fenced transaction,
    /// which needs a transaction.
    SimpleInline,
}

impl SqlxExecutor<Postgres> {
    /// Sends statements with `protocol`; turn on [`PgProtocol::SimpleInline`] behind PgBouncer
    /// in transaction pooling mode.
    #[must_use]
    pub fn with_protocol(self, protocol: PgProtocol) -> Self {
        self.with_mode(match protocol {
            PgProtocol::Prepared => Mode::Prepared,
            PgProtocol::SimpleInline => Mode::Inline,
        })
    }

    /// The protocol statements are sent with.
    pub fn protocol(&self) -> PgProtocol {
        match self.mode() {
            Mode::Prepared => PgProtocol::Prepared,
            Mode::Inline => PgProtocol::SimpleInline,
        }
    }
}

/// Listens to a table's release notifications on a connection of its own: a pool of one, made
/// with this pool's connect options, so no connection of the store's pool is pinned. sqlx's
/// listener reconnects by itself after a connection it found closed or reset (releases in the
/// gap are not pushed: the waiters' next poll finds them); the stream ends when reconnecting
/// fails or the connection fails otherwise, and lease-core then polls and subscribes again at
/// the next wait. A connection that died without a word (a host gone without a reset, a NAT
/// that dropped an idle flow) is not found, as the listener only reads: nothing is pushed from
/// then on, and the waiters find releases by polling, as without notifications.
async fn listen(pool: &PgPool, channel: &str) -> Result<Option<ReleaseEvents>, BoxError> {
    let dedicated = PgPoolOptions::new()
        .max_connections(1)
        .connect_lazy_with(pool.connect_options().as_ref().clone());
    let mut listener = PgListener::connect_with(&dedicated).await?;
    listener.listen(channel).await?;
    let names = listener
        .into_stream()
        .take_while(|notification| std::future::ready(notification.is_ok()))
        .filter_map(|notification| {
            std::future::ready(
                notification
                    .ok()
                    .and_then(|notification| LeaseName::new(notification.payload()).ok()),
            )
        });
    Ok(Some(names.boxed()))
}
