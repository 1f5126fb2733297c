//! A small HTTP service a user could copy: the four jobs of the design story on schedules,
//! `/health/ready` from the client's shutdown, `/metrics` for Prometheus, and a graceful shutdown
//! that hands every lease back on SIGTERM.
//!
//! `cargo run -p lease-examples --bin lease-service` runs [`run`] with a [`Config`] read from
//! the environment (see the binary's docs).

mod http;
mod jobs;
mod store;

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use lease_core::runtime::TokioRuntime;
use lease_core::{BoxError, LeaseClient, ShutdownReport};
use metrics_exporter_prometheus::PrometheusBuilder;

pub use self::jobs::{JOBS, Job};

/// How long the HTTP server may take, once the leases are handed back, to end the requests in
/// flight before its connections are closed.
const HTTP_DRAIN: Duration = Duration::from_secs(2);

/// How often the metrics recorder drains what it recorded when nobody scrapes it.
const METRICS_UPKEEP: Duration = Duration::from_secs(5);

/// What the service runs with.
#[derive(Clone)]
#[non_exhaustive]
pub struct Config {
    /// The lease table's database: `postgres://...`, `mysql://...` or `sqlite:...`.
    pub database_url: String,
    /// The lease table. Default: `leases`.
    pub table: String,
    /// Where the HTTP server listens; port 0 picks a free one.
    pub listen: SocketAddr,
    /// This node's name, for the jobs that run once per node (`uptime:<node>`).
    pub node: String,
    /// How long a shutdown lets running work finish before it stops it (a leader's round is
    /// stopped at once, as its leadership is given back).
    pub grace: Duration,
    /// Whether releases notify the instances waiting for them (PostgreSQL only: `pg_notify`
    /// and `LISTEN`), so a rolling deploy hands each leadership over within milliseconds of the
    /// old instance's shutdown instead of at the next instance's poll. Default: on. Turn it off
    /// behind PgBouncer in transaction pooling mode, where `LISTEN` hears nothing.
    pub notifications: bool,
}

impl Config {
    /// A configuration on `database_url` with the other settings at their defaults: the
    /// `leases` table, port 8080 on loopback, the host's name, a grace period of 10 s, release
    /// notifications on.
    pub fn new(database_url: impl Into<String>) -> Self {
        Self {
            database_url: database_url.into(),
            table: "leases".to_owned(),
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            node: gethostname::gethostname().to_string_lossy().into_owned(),
            grace: Duration::from_secs(10),
            notifications: true,
        }
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may hold a password: only its scheme is shown.
        let database = scheme(&self.database_url)
            .map_or_else(|| "not a URL".to_owned(), |scheme| format!("{scheme}:..."));
        f.debug_struct("Config")
            .field("database", &format_args!("{database}"))
            .field("table", &self.table)
            .field("listen", &self.listen)
            .field("node", &self.node)
            .field("grace", &self.grace)
            .field("notifications", &self.notifications)
            .finish()
    }
}

/// Writes `line` and a newline to standard output, ignoring a failed write: Rust ignores
/// SIGPIPE, so `println!` panics when the reader went away (a log pipe restarted), and a panic
/// in a job's round stops that job's schedule for good.
pub fn say(line: impl std::fmt::Display) {
    use std::io::Write;

    let _ = writeln!(std::io::stdout().lock(), "{line}");
}

/// The scheme of `url`, for messages that must not show the rest (it may hold a password):
/// `postgres`, `mysql`, `sqlite` or another word before `:`; `None` for what is not a URL
/// (a key/value connection string, `host=db password=...`).
fn scheme(url: &str) -> Option<&str> {
    let (scheme, _) = url.split_once(':')?;
    (!scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)))
    .then_some(scheme)
}

/// Runs the service until `stop` completes (SIGTERM, in the binary), then shuts down
/// gracefully: the client's shutdown stops the schedules, gives running work the grace period
/// to finish (a leader's round is stopped at once) and hands every lease back, and then the HTTP server stops taking requests (its
/// readiness said "shutting down" meanwhile). Calls `listening` with the
/// address the server took, before the jobs start. Answers what the shutdown did; when `stop`
/// completes while the store connects (a database that does not answer), at once, with a report
/// of nothing done: nothing was taken yet.
///
/// # Errors
/// When the node's name makes an invalid lease name (checked first, before anything is
/// taken), the database cannot be reached or set up, the address cannot be bound, or a
/// metrics recorder is installed already.
///
/// # Cancel safety
/// Not cancel safe: cancelled, the service stops without its graceful shutdown, as a crash
/// would, and its leases lapse after their TTL. Complete `stop` instead.
pub async fn run(
    config: Config,
    listening: impl FnOnce(SocketAddr),
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<ShutdownReport, BoxError> {
    // Every lease name first: one that is invalid stops the service before any job runs (a
    // campaign started before it would leave its lease taken for its TTL).
    let uptime_name = jobs::uptime_name(&config.node)?;
    let metrics = PrometheusBuilder::new().install_recorder()?;
    let mut stop = std::pin::pin!(stop);
    // Connecting can take as long as the pool's timeout where the database accepts and does not
    // answer: a stop asked for meanwhile ends the service at once, as it holds nothing yet.
    let store = tokio::select! {
        store = store::connect(&config.database_url, &config.table, config.notifications) => store?,
        () = &mut stop => return Ok(ShutdownReport::default()),
    };
    let client = LeaseClient::builder(store, TokioRuntime)
        .store_label(config.table.as_str())
        .build()?;
    // The address first: a port already taken stops the service before it takes a lease, and
    // `listening` is told before any job's round runs.
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    listening(listener.local_addr()?);
    let schedules = jobs::start(&client, uptime_name)?;
    let (stopped_tx, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(
        axum::serve(
            listener,
            http::router(client.clone(), schedules.clone(), metrics.clone()),
        )
        .with_graceful_shutdown(async move {
            let _ = stopped.await;
        })
        .into_future(),
    );
    // The recorder keeps what it records until it is drained: by a scrape, or by this upkeep,
    // so that an instance nobody scrapes does not grow without bound.
    let upkeep = tokio::spawn(async move {
        let mut every = tokio::time::interval(METRICS_UPKEEP);
        loop {
            every.tick().await;
            metrics.run_upkeep();
        }
    });
    stop.await;
    upkeep.abort();
    // Readiness turns false at once (the client reports it shuts down) while leases go back.
    let report = client.shutdown(config.grace).await;
    let _ = stopped_tx.send(());
    // Requests in flight get a moment to end; a connection that sends nothing more (a client
    // gone mid-request) does not keep the process from exiting.
    let mut server = server;
    match tokio::time::timeout(HTTP_DRAIN, &mut server).await {
        Ok(served) => served??,
        Err(_) => {
            server.abort();
            eprintln!(
                "lease-service: HTTP connections still open {} s after the shutdown; closed",
                HTTP_DRAIN.as_secs()
            );
        }
    }
    drop(schedules);
    Ok(report)
}
