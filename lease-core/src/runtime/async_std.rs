use std::time::Duration;

use futures::future::BoxFuture;

use crate::Runtime;

/// The async-std runtime: sleeps on its timer and spawns on its global executor.
#[derive(Debug, Clone, Copy, Default)]
pub struct AsyncStdRuntime;

impl Runtime for AsyncStdRuntime {
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(async_std::task::sleep(duration))
    }

    fn spawn(&self, task: BoxFuture<'static, ()>) -> Result<(), BoxFuture<'static, ()>> {
        drop(async_std::task::spawn(task));
        Ok(())
    }
}
