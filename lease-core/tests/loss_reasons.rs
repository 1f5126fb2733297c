//! How a lease was lost is what happened to it first, and every loss is counted once: a
//! deadline that passed unnoticed is the loss, whatever noticed it (a renewal refused or
//! answered after it, a shutdown, a release); a release that finds the row taken over counts a
//! rejection; a release tried again after an answer was lost is not taken for a loss. On
//! tokio's paused clock.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Faulty, Mode, fast_client, name, tokio_memory};
use lease_core::{Error, HolderId, LeaseGuard, LeaseStore, LossReason, Ttl};

/// An operator's forced release of `guard`'s lease on the store behind the client, and another
/// instance takes it: the guard, its deadline far off, still believes it holds the lease.
async fn take_over_behind(store: &Faulty, guard: &LeaseGuard) {
    assert!(
        store
            .inner
            .release(guard.name(), guard.holder(), Duration::ZERO)
            .await
            .unwrap()
    );
    assert!(
        store
            .inner
            .try_acquire(
                guard.name(),
                &HolderId::generate(),
                Ttl::from_secs(60).unwrap()
            )
            .await
            .unwrap()
            .is_some()
    );
}

/// Another instance trying to take `invoices` every millisecond, on the store behind the
/// client, for up to 2 s: whether it took it.
async fn take_once_free(store: Arc<Faulty>) -> bool {
    for _ in 0..2_000 {
        let taken = store
            .inner
            .try_acquire(
                &name("invoices"),
                &HolderId::generate(),
                Ttl::from_secs(60).unwrap(),
            )
            .await
            .unwrap();
        if taken.is_some() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    false
}

/// Whether the row of `invoices` names no holder.
async fn is_free(store: &Faulty) -> bool {
    store
        .inner
        .inspect(&name("invoices"))
        .await
        .unwrap()
        .is_none()
}

fn lost(result: Result<(), Error>) -> LossReason {
    match result {
        Err(Error::Lost { reason, .. }) => reason,
        other => panic!("not a loss: {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_release_after_the_deadline_passed_in_an_outage_reports_the_loss() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(Arc::clone(&store));
    let guard = client.try_acquire("invoices").await.unwrap().unwrap();
    store.set(Mode::Fail);
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The release fails too: the caller must still hear that the lease was lost first.
    assert_eq!(
        lost(guard.release().await),
        LossReason::DeadlinePassed,
        "a store error hid the loss"
    );
}

#[tokio::test(start_paused = true)]
async fn a_release_that_finds_the_lease_taken_over_counts_a_loss() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(Arc::clone(&store));
    let guard = client.try_acquire("invoices").await.unwrap().unwrap();
    take_over_behind(&store, &guard).await;
    assert_eq!(lost(guard.release().await), LossReason::Rejected);
    let stats = client.stats();
    assert_eq!(
        stats.losses.rejected, 1,
        "the loss went uncounted: {stats:?}"
    );
    assert_eq!(stats.released, 0);
}

#[tokio::test(start_paused = true)]
async fn a_release_tried_again_after_its_answer_was_lost_is_a_release() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(Arc::clone(&store));
    let guard = client.try_acquire("invoices").await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The first try frees the row (its hold is over) and its answer is lost; the next try
    // matches nothing.
    store.lose_release_answers(1);
    guard
        .release_after(Duration::from_millis(100))
        .await
        .expect("released by the try whose answer was lost");
    assert!(store.releases.load(std::sync::atomic::Ordering::SeqCst) >= 2);
    let stats = client.stats();
    assert_eq!(stats.losses.total(), 0, "{stats:?}");
    assert_eq!(stats.released, 1, "{stats:?}");
    assert!(is_free(&store).await);
}

/// The first try frees the row and its answer is lost; another instance, waiting, takes the
/// lease before the next try: taken after the work was over, it is a release, not a loss.
#[tokio::test(start_paused = true)]
async fn a_release_whose_freed_lease_was_taken_before_the_next_try_is_a_release() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(Arc::clone(&store));
    let guard = client.try_acquire("invoices").await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    store.lose_release_answers(1);
    store.delay_releases(Duration::from_millis(50));
    let other = tokio::spawn(take_once_free(Arc::clone(&store)));
    guard
        .release_after(Duration::from_millis(100))
        .await
        .expect("released: the lease was taken only once the work was over");
    assert!(other.await.unwrap(), "the other instance took the lease");
    let stats = client.stats();
    assert_eq!(stats.losses.total(), 0, "{stats:?}");
}

/// A release with a hold of `min_hold` whose tries fail at once until 720 ms (they may have
/// reached the store, for all the guard knows), and the next one reaches the store `late` after
/// it goes out (between 750 and 900 ms: the pauses double from 100 ms, and the last try goes
/// out by the local deadline at 900 ms), past the row's expiry at 1 s, when another instance
/// has taken the lease if `taken`.
async fn released_once_the_row_lapsed(
    min_hold: Duration,
    late: Duration,
    taken: bool,
) -> Result<(), Error> {
    let store = Faulty::new(tokio_memory());
    let client = common::fast_client_timing_out_after(Arc::clone(&store), Duration::from_secs(2));
    let guard = client.try_acquire("invoices").await.unwrap().unwrap();
    store.set(Mode::Fail);
    store.delay_releases(late);
    let passing = Arc::clone(&store);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(720)).await;
        passing.set(Mode::Pass);
    });
    let other = taken.then(|| tokio::spawn(take_once_free(Arc::clone(&store))));
    let released = guard.release_after(min_hold).await;
    if let Some(other) = other {
        assert!(other.await.unwrap(), "the other instance took the lease");
    }
    assert_eq!(
        store.releases.load(std::sync::atomic::Ordering::SeqCst),
        5,
        "four tries failed, the fifth reached the row"
    );
    let stats = client.stats();
    if released.is_ok() {
        assert_eq!(stats.released, 1, "{stats:?}");
    } else {
        assert_eq!(stats.released, 0, "{stats:?}");
    }
    released
}

/// A release whose tries failed until the row lapsed short of the hold, the lease then taken
/// by another instance, which may run the work again within the hold: not a release, though
/// any try may have reached the store for all the guard knows. Found by a try answered within
/// the hold, which would have matched the row had an earlier one reached it; and by one answered
/// later, from the row: taken before the hold's end, when no try could have freed it.
#[tokio::test(start_paused = true)]
async fn a_release_whose_tries_failed_until_the_row_lapsed_within_the_hold_is_a_loss() {
    let answered_within =
        released_once_the_row_lapsed(Duration::from_secs(10), Duration::from_millis(300), true)
            .await;
    assert_eq!(lost(answered_within), LossReason::Rejected);
    let answered_after = released_once_the_row_lapsed(
        Duration::from_millis(1_200),
        Duration::from_millis(500),
        true,
    )
    .await;
    assert_eq!(lost(answered_after), LossReason::Rejected);
}

/// The same tries, the row lapsed short of the hold and nobody took it yet: not a release
/// either (anybody may take it within the hold now), though the row still names this holder,
/// which a lost try's release within the hold would have left so too. Found by the try answered
/// within the hold alone.
#[tokio::test(start_paused = true)]
async fn a_release_whose_row_lapsed_within_the_hold_untaken_is_a_loss() {
    let untaken =
        released_once_the_row_lapsed(Duration::from_secs(10), Duration::from_millis(300), false)
            .await;
    assert_eq!(lost(untaken), LossReason::Rejected);
}

/// The control: the same tries, the hold over before the row lapsed (at 500 ms): the lease
/// lapsed once the hold was kept, and another instance took it after: a release.
#[tokio::test(start_paused = true)]
async fn a_release_whose_row_lapsed_after_the_hold_is_a_release() {
    released_once_the_row_lapsed(Duration::from_millis(500), Duration::from_millis(300), true)
        .await
        .expect("released: the row lapsed after the hold");
}

/// The control of the cases above: a try whose answer was lost, on a lease already taken over,
/// is a loss, not a release.
#[tokio::test(start_paused = true)]
async fn a_release_tried_again_on_a_lease_taken_over_is_a_loss() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(Arc::clone(&store));
    let guard = client.try_acquire("invoices").await.unwrap().unwrap();
    take_over_behind(&store, &guard).await;
    // The work goes on a while under the lease it no longer holds.
    tokio::time::sleep(Duration::from_millis(10)).await;
    store.lose_release_answers(1);
    assert_eq!(
        lost(guard.release_after(Duration::from_millis(100)).await),
        LossReason::Rejected
    );
    assert_eq!(client.stats().losses.rejected, 1);
}

#[tokio::test(start_paused = true)]
async fn a_renewal_refused_after_the_deadline_is_the_deadlines_loss() {
    let store = Faulty::new(tokio_memory());
    let client = common::fast_client_timing_out_after(Arc::clone(&store), Duration::from_secs(2));
    let guard = client.try_acquire("invoices").await.unwrap().unwrap();
    // The renewal sent at 250 ms reaches the store at 1,150 ms, after the row's expiry.
    store.delay_renewals(Duration::from_millis(900));
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    let losses = client.stats().losses;
    assert_eq!(
        (losses.deadline_passed, losses.rejected),
        (1, 0),
        "{losses:?}"
    );
    assert_eq!(lost(guard.release().await), LossReason::DeadlinePassed);
}

#[tokio::test(start_paused = true)]
async fn a_renewal_answered_after_the_deadline_does_not_take_the_loss_back() {
    let store = Faulty::new(tokio_memory());
    let client = common::fast_client_timing_out_after(Arc::clone(&store), Duration::from_secs(2));
    let guard = client.try_acquire("invoices").await.unwrap().unwrap();
    // Sent at 250 ms, it renews the row at 950 ms, 50 ms after the local deadline.
    store.delay_renewals(Duration::from_millis(700));
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert!(
        !guard.is_held(),
        "a lease past its deadline was held again by a late renewal"
    );
    assert_eq!(client.stats().losses.deadline_passed, 1);
    // Its row was renewed: the guard's release frees it for the next instance.
    assert_eq!(lost(guard.release().await), LossReason::DeadlinePassed);
    assert!(is_free(&store).await);
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_releases_a_lease_past_its_deadline_without_counting_it_forced() {
    let store = Faulty::new(tokio_memory());
    let client = common::fast_client_timing_out_after(Arc::clone(&store), Duration::from_secs(2));
    let guard = client.try_acquire("invoices").await.unwrap().unwrap();
    // The renewal at 250 ms hangs; the deadline passes at 900 ms with nothing to notice.
    store.set(Mode::Hang);
    tokio::time::sleep(Duration::from_millis(950)).await;
    store.set(Mode::Pass);
    let report = client.shutdown(Duration::ZERO).await;
    assert_eq!(report.forced, 0, "{report:?}");
    let losses = client.stats().losses;
    assert_eq!(
        (losses.deadline_passed, losses.shut_down),
        (1, 0),
        "{losses:?}"
    );
    assert!(is_free(&store).await, "the row still names the holder");
    drop(guard);
}
