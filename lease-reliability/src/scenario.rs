//! Pieces every scenario uses: a runtime, clients with short leases, and a contender that keeps
//! trying until it takes a lease over.

use std::time::{Duration, Instant};

use lease_core::runtime::TokioRuntime;
use lease_core::{Error, LeaseClient, LeaseGuard, LeaseStore, Ttl};

/// A runtime like the suite's: two workers, so tasks really run in parallel.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// The lease timing of a scenario.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// The TTL.
    pub ttl: Duration,
    /// The renewal period.
    pub renew_every: Duration,
    /// The safety margin.
    pub margin: Duration,
    /// The store timeout.
    pub store_timeout: Duration,
}

impl Timing {
    /// `ttl`, renewed every quarter, with a fifth as margin and a quarter as store timeout. The
    /// margin is twice the default: on a busy machine of two cores a task can wake a few
    /// hundred milliseconds late, and the scenarios compare instants read by tasks.
    pub fn for_ttl(ttl: Duration) -> Self {
        Self {
            ttl,
            renew_every: ttl / 4,
            margin: ttl / 5,
            store_timeout: ttl / 4,
        }
    }

    /// How long after a renewal was sent the holder still believes it holds the lease.
    pub fn validity(&self) -> Duration {
        self.ttl - self.margin
    }

    /// A client with this timing.
    ///
    /// # Panics
    /// When the timing is not a valid configuration.
    pub fn client(&self, store: impl LeaseStore) -> LeaseClient {
        LeaseClient::builder(store, TokioRuntime)
            .ttl(Ttl::new(self.ttl).expect("a valid TTL"))
            .renew_every(self.renew_every)
            .safety_margin(self.margin)
            .store_timeout(self.store_timeout)
            .build()
            .expect("a valid lease configuration")
    }
}

/// A takeover: the guard, how many attempts it took, and the instants around the attempt that
/// won.
#[derive(Debug)]
pub struct Takeover {
    /// The new holder's guard.
    pub guard: LeaseGuard,
    /// Attempts made, the winning one included.
    pub attempts: u64,
    /// Attempts that failed with an error.
    pub errors: u64,
    /// Just before the winning attempt was sent.
    pub sent: Instant,
    /// Just after the winning attempt returned.
    pub acquired: Instant,
}

/// Tries to take `name` with `client` every `every` until it succeeds or `limit` passes.
///
/// # Errors
/// [`Error::Timeout`]-like: a message when `limit` passed first.
pub async fn take_over(
    client: &LeaseClient,
    name: &str,
    every: Duration,
    limit: Duration,
) -> Result<Takeover, String> {
    let started = Instant::now();
    let (mut attempts, mut errors) = (0, 0);
    let mut last_error = None;
    loop {
        attempts += 1;
        let sent = Instant::now();
        match client.try_acquire(name).await {
            Ok(Some(guard)) => {
                return Ok(Takeover {
                    guard,
                    attempts,
                    errors,
                    sent,
                    acquired: Instant::now(),
                });
            }
            Ok(None) => {}
            Err(error @ Error::Store { .. }) => {
                errors += 1;
                last_error = Some(error);
            }
            Err(error) => return Err(format!("unexpected error: {error}")),
        }
        if started.elapsed() > limit {
            let last_error = last_error.map(|e| {
                let source = std::error::Error::source(&e).map(ToString::to_string);
                format!("{e}: {}", source.unwrap_or_default())
            });
            return Err(format!(
                "{name} was not taken over within {limit:?} ({attempts} attempts, {errors} \
                 failed, the last with {last_error:?})"
            ));
        }
        tokio::time::sleep(every).await;
    }
}
