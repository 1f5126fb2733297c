//! PostgreSQL: [`PgLeaseStore`] and [`PgProtocol`] for PgBouncer.

use lease_sql::Dialect;
use sqlx::Postgres;

use crate::SqlxStore;
use crate::database::sqlx_database;
use crate::run::Mode;
use crate::run::sqlx_execute;

sqlx_database!(Postgres, Dialect::Postgres, |query, items| query
    .bind(items));
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
}
