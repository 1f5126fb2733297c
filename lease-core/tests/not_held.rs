//! A fenced check that finds the lease no longer held marks it lost at once, for everybody.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{Faulty, fast_client, name, tokio_memory};
use lease_core::{
    Error, LeaseGuard, LeaseHandle, LeaseStore, LossReason, OnLoss, RunOptions, RunOutcome,
};
use tokio::time::Instant;

/// What an API taking `impl AsRef<LeaseHandle>` sees: the fence of a guard or of a handle.
fn fence_of(lease: impl AsRef<LeaseHandle>) -> u64 {
    lease.as_ref().fence().get()
}

#[tokio::test(start_paused = true)]
async fn a_fenced_check_marks_the_lease_lost_and_wakes_every_waiter_at_once() {
    let store = tokio_memory();
    let client = fast_client(store.clone());
    let guard = client.try_acquire("sweep").await.unwrap().unwrap();
    let handle = guard.handle();
    assert_eq!(fence_of(&guard), fence_of(&handle));
    let waiters = [handle.clone(), handle.clone()].map(|lease| {
        tokio::spawn(async move {
            let reason = lease.lost().await;
            (reason, Instant::now())
        })
    });
    tokio::task::yield_now().await;

    let marked_at = Instant::now();
    match handle.mark_not_held() {
        Error::NotHeld { name, fence } => {
            assert_eq!(name.as_str(), "sweep");
            assert_eq!(fence, guard.fence());
        }
        other => panic!("{other:?}"),
    }
    assert!(!guard.is_held());
    assert!(!handle.is_held());
    for waiter in waiters {
        let (reason, woken_at) = waiter.await.unwrap();
        assert_eq!(reason, LossReason::NotHeld);
        assert_eq!(woken_at, marked_at, "woken at once");
    }
    assert_eq!(guard.lost().await, LossReason::NotHeld);
    assert!(matches!(
        guard.release().await,
        Err(Error::Lost {
            reason: LossReason::NotHeld,
            ..
        })
    ));
    // The release still freed the row this holder had.
    assert_eq!(store.inspect(&name("sweep")).await.unwrap(), None);
}

#[tokio::test(start_paused = true)]
async fn the_guard_marks_through_its_handle() {
    let client = fast_client(tokio_memory());
    let guard = client.try_acquire("alerts").await.unwrap().unwrap();
    assert!(matches!(guard.mark_not_held(), Error::NotHeld { .. }));
    assert!(!guard.handle().is_held());
    assert_eq!(guard.handle().lost().await, LossReason::NotHeld);
}

#[tokio::test(start_paused = true)]
async fn run_exclusive_cancels_the_work_at_once() {
    let store = tokio_memory();
    let client = fast_client(store.clone());
    let started = Instant::now();
    let outcome = client
        .run_exclusive("sweep", |lease| async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let _ = lease.mark_not_held();
            // Work that would go on for an hour, were it not stopped.
            tokio::time::sleep(Duration::from_secs(3600)).await;
        })
        .await
        .unwrap();
    assert_eq!(
        outcome,
        Some(RunOutcome::Cancelled {
            reason: LossReason::NotHeld
        })
    );
    assert_eq!(started.elapsed(), Duration::from_secs(1), "stopped at once");
    assert_eq!(store.inspect(&name("sweep")).await.unwrap(), None);
}

#[tokio::test(start_paused = true)]
async fn work_that_returns_the_error_finishes_after_loss_whatever_on_loss_says() {
    let client = fast_client(tokio_memory());
    for on_loss in [OnLoss::Cancel, OnLoss::Finish] {
        let outcome = client
            .run_exclusive_with(
                "sweep",
                RunOptions::default().on_loss(on_loss),
                |lease| async move {
                    // A fenced write in the caller's transaction found the lease gone.
                    Err::<(), _>(lease.mark_not_held())
                },
            )
            .await
            .unwrap()
            .unwrap();
        match outcome {
            RunOutcome::FinishedAfterLoss {
                output: Err(Error::NotHeld { name, .. }),
                reason: LossReason::NotHeld,
            } => assert_eq!(name.as_str(), "sweep"),
            other => panic!("{on_loss:?}: {other:?}"),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn the_renewer_stops_renewing_a_lease_marked_not_held() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(store.clone());
    let marked = client.try_acquire("sweep").await.unwrap().unwrap();
    let kept = client.try_acquire("alerts").await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let calls = store.renew_manys.load(Ordering::SeqCst);
    let leases = store.renewed_leases.load(Ordering::SeqCst);
    assert!(calls >= 1 && leases == 2 * calls, "both renewed together");

    let _ = marked.mark_not_held();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let more_calls = store.renew_manys.load(Ordering::SeqCst) - calls;
    let more_leases = store.renewed_leases.load(Ordering::SeqCst) - leases;
    assert!(more_calls >= 10, "{more_calls} rounds in 3 s");
    assert_eq!(more_leases, more_calls, "only the other lease renewed");
    assert!(kept.is_held());
    assert!(!marked.is_held());
    // Nobody renews its row: it expires by the store's clock.
    let info = store.inner.inspect(marked.name()).await.unwrap().unwrap();
    assert!(info.is_expired());
}

#[tokio::test(start_paused = true)]
async fn marking_a_released_or_lost_lease_changes_nothing() {
    let store = tokio_memory();
    let client = fast_client(store.clone());

    let guard = client.try_acquire("sweep").await.unwrap().unwrap();
    let handle = guard.handle();
    guard.release().await.unwrap();
    assert!(matches!(handle.mark_not_held(), Error::NotHeld { .. }));
    assert!(!handle.is_held());
    assert!(
        tokio::time::timeout(Duration::from_secs(60), handle.lost())
            .await
            .is_err(),
        "a released lease is never lost"
    );

    // Lost first (taken away, so the next renewal is rejected): the reason stays.
    let guard: LeaseGuard = client.try_acquire("alerts").await.unwrap().unwrap();
    assert!(
        store
            .release(guard.name(), guard.holder(), Duration::ZERO)
            .await
            .unwrap()
    );
    assert_eq!(guard.lost().await, LossReason::Rejected);
    let _ = guard.mark_not_held();
    assert_eq!(guard.lost().await, LossReason::Rejected);
    assert!(matches!(
        guard.release().await,
        Err(Error::Lost {
            reason: LossReason::Rejected,
            ..
        })
    ));
}
