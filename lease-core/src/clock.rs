//! [`Clock`]: the runtime's monotonic clock, as numbers that fit in an atomic.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::Runtime;

/// The runtime's monotonic clock, counted from the moment a client was built.
///
/// Deadlines and renewal times are kept as nanoseconds since that origin so that the renewer can
/// move them forward while guards read them, without a lock per lease.
#[derive(Debug, Clone)]
pub(crate) struct Clock {
    runtime: Arc<dyn Runtime>,
    origin: Instant,
}

impl Clock {
    pub(crate) fn new(runtime: Arc<dyn Runtime>) -> Self {
        let origin = runtime.now();
        Self { runtime, origin }
    }

    pub(crate) fn runtime(&self) -> &Arc<dyn Runtime> {
        &self.runtime
    }

    /// Now, in nanoseconds since the origin.
    pub(crate) fn now(&self) -> u64 {
        self.ticks(self.runtime.now())
    }

    pub(crate) fn ticks(&self, at: Instant) -> u64 {
        // u64 nanoseconds last 584 years: a process does not run that long.
        at.saturating_duration_since(self.origin).as_nanos() as u64
    }

    /// The moment `ticks` nanoseconds after the origin.
    pub(crate) fn instant(&self, ticks: u64) -> Instant {
        self.origin + Duration::from_nanos(ticks)
    }

    /// A future that completes `ticks` nanoseconds after the origin.
    pub(crate) async fn sleep_until(&self, ticks: u64) {
        let now = self.now();
        if ticks > now {
            self.runtime.sleep(Duration::from_nanos(ticks - now)).await;
        }
    }

    /// Runs `future` for at most `limit`; `None` when the limit came first.
    pub(crate) async fn timeout<F: std::future::Future>(
        &self,
        limit: Duration,
        future: F,
    ) -> Option<F::Output> {
        let future = std::pin::pin!(future);
        match futures::future::select(future, self.runtime.sleep(limit)).await {
            futures::future::Either::Left((output, _)) => Some(output),
            futures::future::Either::Right(_) => None,
        }
    }
}

/// A duration in clock ticks.
pub(crate) fn ticks(duration: Duration) -> u64 {
    duration.as_nanos().min(u128::from(u64::MAX)) as u64
}
