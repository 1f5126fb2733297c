use std::time::{Duration, Instant};

use futures::future::BoxFuture;

use crate::Runtime;

/// The tokio runtime: sleeps on tokio's timer, reads tokio's clock (so a paused test clock
/// governs deadlines too) and spawns on the current tokio runtime.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioRuntime;

impl Runtime for TokioRuntime {
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(duration))
    }

    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }

    fn spawn(&self, task: BoxFuture<'static, ()>) -> Result<(), BoxFuture<'static, ()>> {
        // Outside a tokio runtime (a guard dropped after shutdown) there is nothing to spawn on.
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                drop(handle.spawn(task));
                Ok(())
            }
            Err(_) => Err(task),
        }
    }
}
