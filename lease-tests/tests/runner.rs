//! The runner: skipped backends, teardowns, and what a failed case looks like.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use lease_core::runtime::TokioRuntime;
use lease_core::{BoxError, MemoryStore};
use lease_tests::run::{conclude, run_case};
use lease_tests::{CaseFailure, Context, FreshStore, TestBackend, Verdict};

/// A memory backend that counts teardowns, can be unavailable and can fail its teardown.
#[derive(Debug, Default)]
struct Counting {
    teardowns: Arc<AtomicUsize>,
    unavailable: bool,
    failing_teardown: bool,
}

#[async_trait]
impl TestBackend for Counting {
    type Store = MemoryStore;

    fn name(&self) -> &str {
        "counting"
    }

    async fn available(&self) -> Result<(), BoxError> {
        if self.unavailable {
            Err("no server on 127.0.0.1:1".into())
        } else {
            Ok(())
        }
    }

    async fn store(&self) -> Result<FreshStore<MemoryStore>, BoxError> {
        let (teardowns, failing) = (Arc::clone(&self.teardowns), self.failing_teardown);
        Ok(
            FreshStore::new(MemoryStore::new()).with_teardown(move || async move {
                teardowns.fetch_add(1, Ordering::SeqCst);
                if failing {
                    Err("DROP TABLE failed".into())
                } else {
                    Ok(())
                }
            }),
        )
    }
}

#[tokio::test]
async fn an_unavailable_backend_is_skipped_with_its_reason() {
    let backend = Counting {
        unavailable: true,
        ..Counting::default()
    };
    let teardowns = Arc::clone(&backend.teardowns);
    let verdict = run_case(backend, TokioRuntime, |_| async {
        panic!("a case ran on an unavailable backend")
    })
    .await;
    assert_eq!(
        verdict.unwrap(),
        Verdict::Skipped("no server on 127.0.0.1:1".to_owned())
    );
    assert_eq!(teardowns.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn every_store_a_case_made_is_torn_down_even_when_it_fails() {
    let backend = Counting::default();
    let teardowns = Arc::clone(&backend.teardowns);
    let result = run_case(backend, TokioRuntime, |ctx| async move {
        ctx.store().await?;
        ctx.store().await?;
        Err(CaseFailure::new("the store broke a rule"))
    })
    .await;
    assert_eq!(result.unwrap_err().message(), "the store broke a rule");
    assert_eq!(teardowns.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_failed_teardown_fails_a_passing_case() {
    let backend = Counting {
        failing_teardown: true,
        ..Counting::default()
    };
    let result = run_case(backend, TokioRuntime, |ctx| async move {
        ctx.store().await?;
        Ok(Verdict::Passed)
    })
    .await;
    let failure = result.unwrap_err();
    assert!(failure.message().contains("DROP TABLE failed"), "{failure}");
}

/// A memory backend whose first store's teardown never ends; the others count themselves.
#[derive(Debug, Default)]
struct FirstTeardownHangs {
    made: Arc<AtomicUsize>,
    torn_down: Arc<AtomicUsize>,
}

#[async_trait]
impl TestBackend for FirstTeardownHangs {
    type Store = MemoryStore;

    fn name(&self) -> &str {
        "first-teardown-hangs"
    }

    async fn available(&self) -> Result<(), BoxError> {
        Ok(())
    }

    async fn store(&self) -> Result<FreshStore<MemoryStore>, BoxError> {
        let first = self.made.fetch_add(1, Ordering::SeqCst) == 0;
        let torn_down = Arc::clone(&self.torn_down);
        Ok(
            FreshStore::new(MemoryStore::new()).with_teardown(move || async move {
                if first {
                    futures::future::pending::<()>().await;
                }
                torn_down.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }),
        )
    }
}

#[tokio::test]
async fn a_teardown_dropped_part_way_leaves_the_later_ones_for_the_next_call() {
    let backend = FirstTeardownHangs::default();
    let torn_down = Arc::clone(&backend.torn_down);
    let ctx = Context::new(backend, TokioRuntime);
    for _ in 0..3 {
        ctx.store().await.unwrap();
    }
    let first = tokio::time::timeout(std::time::Duration::from_millis(50), ctx.teardown()).await;
    assert!(first.is_err(), "the hanging teardown ended");
    assert_eq!(torn_down.load(Ordering::SeqCst), 0);
    // The dropped call took only the teardown it was running.
    ctx.teardown().await.unwrap();
    assert_eq!(torn_down.load(Ordering::SeqCst), 2);
}

#[test]
#[should_panic(expected = "counting::fences_strictly_increase failed: fences went down")]
fn a_failed_case_fails_its_test_naming_backend_and_case() {
    conclude(
        "counting",
        "fences_strictly_increase",
        Err(CaseFailure::new("fences went down")),
    );
}

#[test]
fn a_case_that_does_not_apply_passes() {
    conclude(
        "counting",
        "no_connection_held",
        Ok(Verdict::NotApplicable("no pool".to_owned())),
    );
}

/// A case whose wait never ends fails once it has run for `CASE_LIMIT`, saying so, and the
/// stores it made are still torn down: the test run goes on instead of hanging.
#[tokio::test(start_paused = true)]
async fn a_case_that_never_ends_fails_at_the_limit_and_is_torn_down() {
    let backend = Counting::default();
    let teardowns = Arc::clone(&backend.teardowns);
    let started = tokio::time::Instant::now();
    let result = run_case(backend, TokioRuntime, |ctx| async move {
        ctx.store().await?;
        futures::future::pending::<()>().await;
        Ok(Verdict::Passed)
    })
    .await;
    let failure = result.expect_err("a case that never ends passed");
    assert!(
        failure.message().contains("did not finish within 300s"),
        "{failure}"
    );
    assert_eq!(started.elapsed(), lease_tests::run::CASE_LIMIT);
    assert_eq!(
        teardowns.load(Ordering::SeqCst),
        1,
        "its store was not torn down"
    );
}
