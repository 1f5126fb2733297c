//! [`PostgresReplication`]: a private PostgreSQL primary with one streaming standby, and the
//! role changes a failover makes.

use std::io;
use std::time::{Duration, Instant};

use super::postgres::PostgresServer;
use crate::proxy::FaultProxy;

/// How long a standby may take to connect to its primary's stream.
const STREAM_LIMIT: Duration = Duration::from_secs(30);

/// How the primary waits for its standby when a transaction commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Replication {
    /// The primary acknowledges a commit once it is in its own WAL; the standby replays it
    /// later. A failover loses what the standby had not received.
    Asynchronous,
    /// `synchronous_standby_names = '*'` and `synchronous_commit = on`: the primary
    /// acknowledges a commit once the standby has flushed it, and waits while the standby is
    /// cut off.
    Synchronous,
}

/// A primary and a streaming standby of it, each a private [`PostgresServer`], with two
/// [`FaultProxy`]s:
///
/// - the **service address** ([`url`](Self::url)), where the clients connect, forwarding to
///   whichever server is the primary (as a virtual IP or a DNS name would: it moves with a
///   failover, and connections open to the old primary stay there until they close);
/// - the **stream**, between the standby and the primary, which a test can cut
///   ([`stream`](Self::stream)) so that the standby misses the primary's latest commits.
///
/// Dropping it stops both servers and removes their directories.
///
/// ```no_run
/// use lease_tests::server::{PostgresReplication, Replication};
///
/// let mut pair = PostgresReplication::start(Replication::Asynchronous)?;
/// let url = pair.url(); // through the service address
/// pair.stream().cut(); // the standby stops receiving
/// pair.crash_failover()?; // the primary dies, the standby takes over
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct PostgresReplication {
    // The proxies go first: their connections close before the servers stop.
    service: FaultProxy,
    stream: FaultProxy,
    /// `servers[primary]` is the primary, the other one the standby.
    servers: [PostgresServer; 2],
    primary: usize,
    replication: Replication,
}

impl PostgresReplication {
    /// Starts a primary, copies it into a standby that streams from it through the stream
    /// proxy, and waits until the primary sees the standby streaming. Bounded: a start that
    /// does not finish within a minute or so fails.
    ///
    /// # Errors
    /// When a server does not start, the copy fails, or the standby does not connect.
    pub fn start(replication: Replication) -> io::Result<Self> {
        let primary_settings: &[(&str, &str)] = match replication {
            Replication::Asynchronous => &[],
            Replication::Synchronous => &[
                ("synchronous_standby_names", "*"),
                ("synchronous_commit", "on"),
            ],
        };
        let primary = PostgresServer::start_with(primary_settings)?;
        let stream = FaultProxy::start(primary.port())?;
        // A promoted standby has no standby of its own to wait for: it commits on its own. A
        // standby whose stream was cut tries again every half second (the default is five).
        let standby =
            PostgresServer::standby_of(stream.port(), &[("wal_retrieve_retry_interval", "500")])?;
        let service = FaultProxy::start(primary.port())?;
        let pair = Self {
            service,
            stream,
            servers: [primary, standby],
            primary: 0,
            replication,
        };
        pair.wait_for_stream()?;
        Ok(pair)
    }

    /// How the primary waits for its standby.
    pub fn replication(&self) -> Replication {
        self.replication
    }

    /// The service address's URL for the superuser `postgres` and the `postgres` database: it
    /// reaches the primary of the moment.
    pub fn url(&self) -> String {
        self.service.rewrite_url(&self.primary().url())
    }

    /// The service address.
    pub fn service(&self) -> &FaultProxy {
        &self.service
    }

    /// The proxy the standby's stream goes through, to cut or stall it. After a failover it
    /// carries nothing: the new primary has no standby.
    pub fn stream(&self) -> &FaultProxy {
        &self.stream
    }

    /// The primary of the moment.
    pub fn primary(&self) -> &PostgresServer {
        &self.servers[self.primary]
    }

    /// The other server: the standby, or after a crash failover the crashed primary.
    pub fn standby(&self) -> &PostgresServer {
        &self.servers[1 - self.primary]
    }

    /// A planned switchover: the primary is shut down cleanly (so its standby has every
    /// commit), the standby is promoted, the old primary comes back as a standby of the new
    /// one, and `linger` later the service address moves to the new primary. Clients that
    /// connect in the meantime reach the demoted server, which refuses writes. Each server
    /// keeps its own settings: the new primary does not wait for a standby, also in a pair
    /// that started [`Synchronous`](Replication::Synchronous).
    ///
    /// # Errors
    /// When a step fails; the topology is then left as that step left it.
    pub fn switchover(&mut self, linger: Duration) -> io::Result<()> {
        let (old, new) = (self.primary, 1 - self.primary);
        self.servers[old].stop()?;
        self.servers[new].promote()?;
        let new_port = self.servers[new].port();
        self.servers[old].follow(new_port)?;
        self.primary = new;
        std::thread::sleep(linger);
        self.service.redirect(new_port);
        Ok(())
    }

    /// A crash failover: the primary is killed (`immediate`), the standby promoted with what
    /// it had received, and the service address moved to it. The crashed server stays down.
    ///
    /// # Errors
    /// When a step fails.
    pub fn crash_failover(&mut self) -> io::Result<()> {
        let (old, new) = (self.primary, 1 - self.primary);
        self.servers[old].crash()?;
        self.servers[new].promote()?;
        self.primary = new;
        self.service.redirect(self.servers[new].port());
        Ok(())
    }

    /// Waits until the standby's stream carries data past its start: a standby that is
    /// streaming sends status messages every few seconds and receives the primary's WAL.
    fn wait_for_stream(&self) -> io::Result<()> {
        let started = Instant::now();
        let before = self.stream.stats().bytes;
        while started.elapsed() < STREAM_LIMIT {
            if self.stream.open_connections() > 0 && self.stream.stats().bytes > before {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("the standby did not stream from the primary within {STREAM_LIMIT:?}"),
        ))
    }
}
