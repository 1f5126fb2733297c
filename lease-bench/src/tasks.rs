//! [`all`]: futures run as tasks side by side and awaited together, none left running after a
//! failure.
//!
//! Awaiting `JoinHandle`s one by one and returning at the first error drops the others, and a
//! dropped handle detaches its task: the load of a failed measurement would go on, against the
//! next measurement or the pool being closed.

use std::future::Future;

use lease_core::BoxError;
use tokio::task::JoinSet;

/// Runs every future of `futures` as a task of its own and gives their outputs, in the order
/// the tasks finished. At the first task that fails (or panics), aborts the others, waits for
/// them to end, and gives that error.
///
/// # Errors
/// The first error a task returns, or its panic.
pub async fn all<T, F>(futures: impl IntoIterator<Item = F>) -> Result<Vec<T>, BoxError>
where
    T: Send + 'static,
    F: Future<Output = Result<T, BoxError>> + Send + 'static,
{
    let mut set = JoinSet::new();
    for future in futures {
        set.spawn(future);
    }
    let mut outputs = Vec::with_capacity(set.len());
    while let Some(joined) = set.join_next().await {
        match joined.map_err(BoxError::from).and_then(|output| output) {
            Ok(output) => outputs.push(output),
            Err(error) => {
                set.shutdown().await;
                return Err(error);
            }
        }
    }
    Ok(outputs)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn gives_every_output() {
        let mut outputs = all((0..5).map(|n| async move { Ok::<_, BoxError>(n) }))
            .await
            .unwrap();
        outputs.sort_unstable();
        assert_eq!(outputs, [0, 1, 2, 3, 4]);
    }

    /// A task that fails ends the others: none of them keeps working after `all` returns.
    #[tokio::test]
    async fn the_first_failure_stops_the_others() {
        let steps = Arc::new(AtomicUsize::new(0));
        let futures = (0..4).map(|task| {
            let steps = Arc::clone(&steps);
            async move {
                if task == 2 {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    return Err::<(), BoxError>("task 2 failed".into());
                }
                loop {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    steps.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        let error = all(futures).await.unwrap_err();
        assert_eq!(error.to_string(), "task 2 failed");
        let after = steps.load(Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(steps.load(Ordering::Relaxed), after);
    }

    #[tokio::test]
    async fn a_panic_is_an_error() {
        let futures = [0, 1].map(|task| async move {
            assert_ne!(task, 1, "task 1 panics");
            Ok::<_, BoxError>(task)
        });
        assert!(all(futures).await.is_err());
    }
}
