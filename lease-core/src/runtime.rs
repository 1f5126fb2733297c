//! [`Runtime`]: the little the core needs from an async executor.
//!
//! The core needs to sleep, to read a monotonic clock, and, optionally, to spawn a detached task
//! (for the shared renewer, leader election and the best-effort release of a dropped guard).
//! [`TokioRuntime`] and [`AsyncStdRuntime`] come behind the `runtime-tokio` and
//! `runtime-async-std` features; implement the trait for any other executor.

use std::fmt::Debug;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;

#[cfg(feature = "runtime-async-std")]
mod async_std;
#[cfg(feature = "runtime-tokio")]
mod tokio;

#[cfg(feature = "runtime-async-std")]
pub use self::async_std::AsyncStdRuntime;
#[cfg(feature = "runtime-tokio")]
pub use self::tokio::TokioRuntime;

/// Sleep, a monotonic clock and an optional spawn, from the executor the application runs on.
///
/// For smol, say:
///
/// ```
/// use std::time::Duration;
/// use futures::future::BoxFuture;
/// use lease_core::Runtime;
///
/// #[derive(Debug)]
/// struct Smolish;
///
/// impl Runtime for Smolish {
///     fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
///         // smol: Box::pin(async move { smol::Timer::after(duration).await; })
///         # let _ = duration;
///         Box::pin(async {})
///     }
///     // `spawn` keeps its default: this runtime cannot spawn, so a dropped guard's lease
///     // expires instead of being released, and renewal is driven by the caller's own tasks.
/// }
/// ```
pub trait Runtime: Send + Sync + Debug + 'static {
    /// A future that completes after `duration`.
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()>;

    /// The monotonic clock the runtime's timers run on. Override it where the runtime can pause
    /// or mock time, so deadlines and timers agree.
    fn now(&self) -> Instant {
        Instant::now()
    }

    /// Runs `task` detached. A runtime that cannot spawn hands the task back.
    ///
    /// # Errors
    /// The task itself, when this runtime cannot spawn.
    fn spawn(&self, task: BoxFuture<'static, ()>) -> Result<(), BoxFuture<'static, ()>> {
        Err(task)
    }
}
