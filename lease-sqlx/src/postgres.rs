//! PostgreSQL: [`PgLeaseStore`] and [`PgProtocol`] for PgBouncer.

use std::sync::Arc;

use futures::StreamExt;
use lease_core::{Error, LeaseName, Operation, ReleaseEvents};
use lease_sql::Dialect;
use sqlx::Postgres;
use sqlx::postgres::{PgListener, PgPoolOptions};

use crate::SqlxStore;
use crate::database::sqlx_database;
use crate::run::Mode;
use crate::run::sqlx_execute;

sqlx_database!(
    Postgres,
    Dialect::Postgres,
    |query, items| query.bind(items),
    release_events = SqlxStore::<Postgres>::release_events_now,
);
sqlx_execute!(Postgres);

/// Leases in a PostgreSQL table, through a [`PgPool`](sqlx::PgPool).
pub type PgLeaseStore = SqlxStore<Postgres>;

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
/// use lease_sqlx::{PgLeaseStore, PgProtocol};
/// use sqlx::postgres::PgPoolOptions;
///
/// // Port 6432: PgBouncer, pool_mode = transaction.
/// let pool = PgPoolOptions::new()
///     .max_connections(4)
///     .connect("postgres://app@127.0.0.1:6432/app")
///     .await?;
/// let store = PgLeaseStore::new(pool).with_protocol(PgProtocol::SimpleInline);
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
    /// correct behind PgBouncer (and other poolers) in transaction or statement pooling mode.
    SimpleInline,
}

impl SqlxStore<Postgres> {
    /// Sends statements with `protocol`; turn on [`PgProtocol::SimpleInline`] behind PgBouncer
    /// in transaction pooling mode.
    pub fn with_protocol(mut self, protocol: PgProtocol) -> Self {
        self.mode = match protocol {
            PgProtocol::Prepared => Mode::Prepared,
            PgProtocol::SimpleInline => Mode::Inline,
        };
        self
    }

    /// The protocol the store sends statements with.
    pub fn protocol(&self) -> PgProtocol {
        match self.mode {
            Mode::Prepared => PgProtocol::Prepared,
            Mode::Inline => PgProtocol::SimpleInline,
        }
    }

    /// Turns release notifications on or off (off by default).
    ///
    /// On, a release that frees a lease also runs `pg_notify` on the table's channel (see
    /// `lease_sql::Statements::release_channel`) in the same statement, and
    /// [`release_events`](lease_core::LeaseStore::release_events) listens there, so a
    /// [`LeaseClient::acquire`](lease_core::LeaseClient::acquire) waiting for the lease takes it
    /// within milliseconds instead of at its next poll. Polling stays: a notification only
    /// wakes a waiter early.
    ///
    /// What it costs: PostgreSQL serialises the commits of transactions that notify, so releases
    /// queue briefly behind each other under heavy churn; and each client that waits holds one
    /// connection of its own for listening, made with the pool's connect options but outside
    /// the pool (the pool's size and its other connections stay free).
    ///
    /// Behind PgBouncer in transaction pooling mode, the releases' notifications go through,
    /// but `LISTEN` does not work there: waiters would never be woken and keep polling, which
    /// is correct but gains nothing. Turn this on where the pool reaches PostgreSQL directly or
    /// through session pooling.
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

    /// Listens to the table's release notifications on a connection of its own: a pool of one,
    /// made with this pool's connect options, so no connection of the store's pool is pinned.
    /// The stream ends when that connection fails for good; lease-core then polls and
    /// subscribes again at the next wait.
    pub(crate) async fn release_events_now(&self) -> Result<Option<ReleaseEvents>, Error> {
        let Some(channel) = self
            .statements
            .release_channel()
            .filter(|_| self.statements.notifies_releases())
        else {
            return Ok(None);
        };
        let error = |e| Error::store(Operation::Subscribe, None, e);
        let dedicated = PgPoolOptions::new()
            .max_connections(1)
            .connect_lazy_with(self.pool.connect_options().as_ref().clone());
        let mut listener = PgListener::connect_with(&dedicated).await.map_err(error)?;
        listener.listen(channel).await.map_err(error)?;
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
}
