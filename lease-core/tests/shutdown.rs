//! A graceful shutdown: no new acquisitions, running work finishes within the grace period or is
//! stopped, every lease is handed back (minimum holds kept), campaigns resign, and the report
//! says so. On tokio's paused clock; each hand-over is checked beside the control of a client
//! that stops without it, whose leases stay taken until their TTL.

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{Faulty, Mode, fast_client, tokio_memory};
use futures::StreamExt;
use lease_core::{
    Error, LeaseClient, LeaseStore, LossReason, MemoryStore, RunOptions, RunOutcome, ShutdownReport,
};
use tokio::time::Instant;

const GRACE: Duration = Duration::from_secs(5);

/// Whether a fresh client on `store` takes `name` at once.
async fn free(store: &impl LeaseStore, name: &str) -> bool {
    let name = lease_core::LeaseName::new(name).unwrap();
    let holder = lease_core::HolderId::generate();
    let taken = store
        .try_acquire(&name, &holder, lease_core::Ttl::from_secs(60).unwrap())
        .await
        .unwrap();
    if taken.is_some() {
        store.release(&name, &holder, Duration::ZERO).await.unwrap();
    }
    taken.is_some()
}

#[tokio::test(start_paused = true)]
async fn the_control_without_a_shutdown_the_leases_stay_taken() {
    let store = tokio_memory();
    let client = fast_client(store.clone());
    let (started_tx, started) = futures::channel::oneshot::channel();
    let run = tokio::spawn({
        let client = client.clone();
        async move {
            client
                .run_exclusive("sweep", |_| async move {
                    started_tx.send(()).unwrap();
                    futures::future::pending::<()>().await
                })
                .await
        }
    });
    started.await.unwrap();
    let guard = client.try_acquire("report").await.unwrap().unwrap();
    // The process goes on with its business: nothing hands the leases over.
    drop(client);
    tokio::time::sleep(GRACE).await;
    assert!(!free(&store, "sweep").await);
    assert!(!free(&store, "report").await);
    assert!(guard.is_held());
    run.abort();
}

#[tokio::test(start_paused = true)]
async fn work_that_ends_within_the_grace_period_finishes_and_gives_its_lease_back() {
    let store = tokio_memory();
    let client = fast_client(store.clone());
    let (started_tx, started) = futures::channel::oneshot::channel();
    let run = tokio::spawn({
        let client = client.clone();
        async move {
            client
                .run_exclusive("sweep", |_| async move {
                    started_tx.send(()).unwrap();
                    // Longer than a TTL, so it only finishes if it stays renewed meanwhile.
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    7
                })
                .await
        }
    });
    started.await.unwrap();
    let began = Instant::now();
    let report = client.shutdown(GRACE).await;
    assert_eq!(
        run.await.unwrap().unwrap(),
        Some(RunOutcome::Finished(7)),
        "let finish"
    );
    assert_eq!(
        began.elapsed(),
        Duration::from_secs(2),
        "no longer than the work"
    );
    assert_eq!(
        (
            report.finished,
            report.cancelled,
            report.released,
            report.forced
        ),
        (1, 0, 1, 0),
        "{report:?}"
    );
    assert!(report.is_clean(), "{report:?}");
    assert!(free(&store, "sweep").await, "handed over at once");
}

#[tokio::test(start_paused = true)]
async fn work_still_running_when_the_grace_period_ends_is_stopped_and_its_lease_given_back() {
    let store = tokio_memory();
    let client = fast_client(store.clone());
    let (started_tx, started) = futures::channel::oneshot::channel();
    let run = tokio::spawn({
        let client = client.clone();
        async move {
            client
                .run_exclusive("sweep", |_| async move {
                    started_tx.send(()).unwrap();
                    futures::future::pending::<()>().await
                })
                .await
        }
    });
    started.await.unwrap();
    let began = Instant::now();
    let report = client.shutdown(GRACE).await;
    assert_eq!(
        began.elapsed(),
        GRACE,
        "stopped when the grace period ended"
    );
    assert_eq!(
        run.await.unwrap().unwrap(),
        Some(RunOutcome::Cancelled {
            reason: LossReason::ShutDown
        })
    );
    assert_eq!(
        (report.finished, report.cancelled, report.released),
        (0, 1, 1),
        "{report:?}"
    );
    assert!(report.is_clean(), "{report:?}");
    assert!(free(&store, "sweep").await);
}

#[tokio::test(start_paused = true)]
async fn a_minimum_hold_is_kept_through_the_shutdown() {
    let store = tokio_memory();
    let client = fast_client(store.clone());
    let outcome = client
        .run_exclusive_with(
            "report",
            RunOptions::default().min_hold(Duration::from_secs(600)),
            |_| async {},
        )
        .await
        .unwrap();
    assert_eq!(outcome, Some(RunOutcome::Finished(())));
    let (started_tx, started) = futures::channel::oneshot::channel();
    let run = tokio::spawn({
        let client = client.clone();
        async move {
            client
                .run_exclusive_with(
                    "digest",
                    RunOptions::default().min_hold(Duration::from_secs(600)),
                    |_| async move {
                        started_tx.send(()).unwrap();
                        futures::future::pending::<()>().await
                    },
                )
                .await
        }
    });
    started.await.unwrap();
    let report = client.shutdown(GRACE).await;
    assert!(run.await.unwrap().unwrap().is_some());
    assert_eq!(report.cancelled, 1, "{report:?}");
    assert!(!free(&store, "report").await, "kept for its hold");
    assert!(
        !free(&store, "digest").await,
        "stopped work keeps its hold too"
    );
    tokio::time::sleep(Duration::from_secs(601)).await;
    assert!(free(&store, "digest").await, "free once the hold ended");
}

#[tokio::test(start_paused = true)]
async fn guards_not_released_within_the_grace_period_are_released_and_marked_lost() {
    let store = tokio_memory();
    let client = fast_client(store.clone());
    let kept = client.try_acquire("uptime:node-a").await.unwrap().unwrap();
    let handed_back = client.try_acquire("uptime:node-b").await.unwrap().unwrap();
    let owner = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        handed_back.release().await
    });
    let report = client.shutdown(GRACE).await;
    owner.await.unwrap().unwrap();
    assert_eq!((report.forced, report.released), (1, 2), "{report:?}");
    assert!(!kept.is_held());
    assert_eq!(kept.lost().await, LossReason::ShutDown);
    assert!(free(&store, "uptime:node-a").await);
    assert!(free(&store, "uptime:node-b").await);
    assert!(matches!(
        kept.release().await,
        Err(Error::Lost {
            reason: LossReason::ShutDown,
            ..
        })
    ));
}

/// A lease whose renewals failed until its local deadline passed, its guard kept: the row may
/// still name this holder (here for the 5 s margin). The renewer stops looking after it at its
/// next round; the shutdown still gives it back, as a dropped guard's is, without counting it
/// as released by force (it was lost before). The control first: kept past the renewer's round,
/// the row still names the holder.
#[tokio::test(start_paused = true)]
async fn a_lease_past_its_deadline_is_given_back_after_the_renewer_let_it_go() {
    let store = Faulty::new(tokio_memory());
    let client = LeaseClient::builder(store.clone(), lease_core::runtime::TokioRuntime)
        .ttl(lease_core::Ttl::from_secs(10).unwrap())
        .renew_every(Duration::from_secs(1))
        .safety_margin(Duration::from_secs(5))
        .build()
        .unwrap();
    let guard = client.try_acquire("report").await.unwrap().unwrap();
    store.set(Mode::Fail);
    // Past the local deadline (5 s) and the renewer's rounds after it.
    tokio::time::sleep(Duration::from_millis(6_500)).await;
    assert_eq!(guard.lost().await, LossReason::DeadlinePassed);
    store.set(Mode::Pass);
    let row = store.inspect(guard.name()).await.unwrap().unwrap();
    assert!(
        row.holder == *guard.holder() && !row.is_expired(),
        "the control: the row no longer names the holder, so the case would show nothing"
    );
    let report = client.shutdown(Duration::ZERO).await;
    assert_eq!((report.released, report.forced), (1, 0), "{report:?}");
    // The shutdown gave it back: its guard, dropped now, sends no release of its own.
    let releases = store.releases.load(Ordering::SeqCst);
    drop(guard);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(store.releases.load(Ordering::SeqCst), releases);
    assert!(free(&*store, "report").await);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_guard_is_given_back_before_the_shutdown_returns() {
    let store = tokio_memory();
    let client = fast_client(store.clone());
    let guard = client.try_acquire("sweep").await.unwrap().unwrap();
    drop(guard);
    // The control: on this one-thread runtime, the background release has not run yet.
    assert!(
        store
            .inspect(&common::name("sweep"))
            .await
            .unwrap()
            .is_some()
    );
    let report = client.shutdown(Duration::ZERO).await;
    assert_eq!((report.released, report.forced), (1, 0), "{report:?}");
    assert!(free(&store, "sweep").await);
}

#[tokio::test(start_paused = true)]
async fn campaigns_resign_and_the_next_instance_leads_at_once() {
    let store = tokio_memory();
    let client = fast_client(store.clone());
    let leader = client.campaign("alerts").unwrap();
    let mut changes = leader.changes();
    assert_eq!(changes.next().await, Some(true));
    let follower = client.campaign("billing").unwrap();
    let other = fast_client(store.clone());
    let _billing = other.try_acquire("billing").await.unwrap().unwrap();

    let report = client.shutdown(GRACE).await;
    assert_eq!(changes.next().await, Some(false));
    assert!(!leader.is_leader() && !follower.is_leader());
    assert_eq!((report.resigned, report.released), (1, 1), "{report:?}");
    assert!(report.elapsed < Duration::from_millis(10), "{report:?}");
    let next = other.campaign("alerts").unwrap();
    let mut next_changes = next.changes();
    assert_eq!(next_changes.next().await, Some(true));
    // Resigning a campaign the shutdown ended returns at once.
    leader.resign().await;
}

#[tokio::test(start_paused = true)]
async fn nothing_new_starts_once_the_shutdown_has_begun() {
    let store = tokio_memory();
    let client = fast_client(store.clone());
    let other = fast_client(store.clone());
    let _held = other.try_acquire("sweep").await.unwrap().unwrap();
    let waiter = tokio::spawn({
        let client = client.clone();
        async move { client.acquire("sweep", Duration::from_secs(60)).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let report = client.shutdown(GRACE).await;
    assert!(report.elapsed < Duration::from_millis(10), "{report:?}");
    assert!(client.is_shutting_down());
    assert!(matches!(
        waiter.await.unwrap(),
        Err(Error::ShuttingDown { .. })
    ));
    assert!(matches!(
        client.try_acquire("free").await,
        Err(Error::ShuttingDown { .. })
    ));
    assert!(matches!(
        client.run_exclusive("free", |_| async {}).await,
        Err(Error::ShuttingDown { .. })
    ));
    assert!(matches!(
        client.campaign("free"),
        Err(Error::ShuttingDown { .. })
    ));
    assert!(free(&store, "free").await, "nothing was taken");
    assert_eq!(client.shutdown(GRACE).await, report, "a second call");
}

#[tokio::test(start_paused = true)]
async fn an_acquisition_in_flight_when_the_shutdown_begins_gives_its_lease_straight_back() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(Arc::clone(&store));
    store.delay_acquires(Duration::from_millis(100));
    let acquiring = tokio::spawn({
        let client = client.clone();
        async move { client.try_acquire("sweep").await }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    let report = client.shutdown(GRACE).await;
    assert!(matches!(
        acquiring.await.unwrap(),
        Err(Error::ShuttingDown { .. })
    ));
    assert_eq!(report.released, 1, "{report:?}");
    assert!(free(&store.inner, "sweep").await);
}

#[tokio::test(start_paused = true)]
async fn a_hanging_store_cannot_hold_the_shutdown_past_its_bound() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(Arc::clone(&store));
    let _kept = client.try_acquire("sweep").await.unwrap().unwrap();
    let dropped = client.try_acquire("report").await.unwrap().unwrap();
    store.set(Mode::Hang);
    drop(dropped);
    // Shorter than the local deadline, so the kept guard is still held when it ends.
    let grace = Duration::from_millis(100);
    let report = client.shutdown(grace).await;
    let bound = grace + client.config().store_timeout * 4;
    assert!(report.elapsed <= bound, "{report:?} against {bound:?}");
    assert!(!report.is_clean(), "{report:?}");
    assert_eq!((report.forced, report.failed), (1, 2), "{report:?}");
    assert!(store.releases.load(Ordering::SeqCst) >= 2);
}

#[tokio::test(start_paused = true)]
async fn a_report_is_empty_for_a_client_that_held_nothing() {
    let client = fast_client(MemoryStore::new());
    let report = client.shutdown(GRACE).await;
    assert_eq!(report, ShutdownReport::default());
    let _ = LeaseClient::clone(&client);
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_waits_for_the_give_back_of_an_acquisition_that_timed_out() {
    let store = Faulty::new(tokio_memory());
    let client = LeaseClient::builder(Arc::clone(&store), lease_core::runtime::TokioRuntime)
        .ttl(lease_core::Ttl::from_secs(60).unwrap())
        .renew_every(Duration::from_secs(10))
        .store_timeout(Duration::from_millis(250))
        .build()
        .unwrap();
    // The statement takes the lease, its answer comes too late: the acquisition times out and
    // gives the lease back in the background.
    store.delay_acquire_answers(Duration::from_millis(400));
    assert!(client.try_acquire("sweep").await.is_err(), "timed out");
    let report = client.shutdown(GRACE).await;
    assert_eq!(
        report.released, 1,
        "the shutdown did not wait for the give-back: {report:?}"
    );
    assert!(free(&store.inner, "sweep").await, "given back by then");
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_waits_for_an_acquisition_in_flight_and_its_give_back() {
    let store = Faulty::new(tokio_memory());
    let client = LeaseClient::builder(Arc::clone(&store), lease_core::runtime::TokioRuntime)
        .ttl(lease_core::Ttl::from_secs(60).unwrap())
        .renew_every(Duration::from_secs(10))
        .store_timeout(Duration::from_secs(8))
        .build()
        .unwrap();
    // A guard its owner keeps past the grace period, so the shutdown releases it itself.
    let kept = client.try_acquire("report").await.unwrap().unwrap();
    // An acquisition that reaches the store 6 s after it was sent: after the grace period and
    // the forced release, it takes the lease, and gives it straight back.
    store.delay_acquires(Duration::from_secs(6));
    let acquisition = tokio::spawn({
        let client = client.clone();
        async move { client.try_acquire("sweep").await }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    let report = client.shutdown(GRACE).await;
    assert_eq!(
        (report.forced, report.released, report.unfinished),
        (1, 2, 0),
        "the shutdown did not wait for the acquisition in flight: {report:?}"
    );
    assert!(report.is_clean(), "{report:?}");
    assert!(free(&store.inner, "sweep").await, "given back by then");
    assert!(matches!(
        acquisition.await.unwrap(),
        Err(Error::ShuttingDown { .. })
    ));
    drop(kept);
}

/// A second shutdown reports the tally so far, the guards the first released by force
/// included: before, every count added up across calls but `forced`, which read 0 the second
/// time.
#[tokio::test(start_paused = true)]
async fn a_second_shutdown_reports_the_guards_the_first_released_by_force() {
    let store = tokio_memory();
    let client = fast_client(store.clone());
    let guard = client.try_acquire("sweep").await.unwrap().unwrap();
    let first = client.shutdown(Duration::from_millis(10)).await;
    assert_eq!(first.forced, 1, "{first:?}");
    assert!(!guard.is_held());
    drop(guard);
    let second = client.shutdown(Duration::from_millis(10)).await;
    assert_eq!(
        (second.forced, second.released),
        (first.forced, first.released),
        "{second:?} after {first:?}"
    );
}

/// A shutdown of `client` with a grace of 10 ms, cut by a timeout of 100 ms around it while its
/// release is on its way (the store answers later).
async fn shutdown_cut_during_its_release(client: &LeaseClient) {
    let cut = tokio::time::timeout(
        Duration::from_millis(100),
        client.shutdown(Duration::from_millis(10)),
    )
    .await;
    assert!(
        cut.is_err(),
        "the shutdown ended before its release answered"
    );
}

/// A shutdown cancelled while its forced releases run (a timeout around it) has counted them:
/// the next shutdown, which finds nothing left to release, reports them.
#[tokio::test(start_paused = true)]
async fn a_shutdown_cancelled_during_its_forced_releases_has_counted_them() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(store.clone());
    let _guard = client.try_acquire("sweep").await.unwrap().unwrap();
    store.delay_releases(Duration::from_secs(60));
    shutdown_cut_during_its_release(&client).await;
    store.delay_releases(Duration::ZERO);
    let next = client.shutdown(Duration::from_millis(10)).await;
    assert_eq!(next.forced, 1, "{next:?}");
}

/// A shutdown cancelled while its forced release is on its way (a timeout around it) has lost
/// the guard's lease to the shutdown, whose release the guard leaves to it: the release is sent
/// in the background instead, counted as a release running, so the next shutdown waits for it
/// and reports it, and returns with the lease free, long before its TTL (3 s) ends. Before, the
/// dropped release was never sent again, and the lease stayed taken by a holder that had shut
/// down.
#[tokio::test(start_paused = true)]
async fn a_shutdown_cancelled_during_its_forced_releases_still_releases() {
    let store = Faulty::new(tokio_memory());
    let client = common::lapsing_client(store.clone(), Duration::from_secs(2));
    let guard = client.try_acquire("sweep").await.unwrap().unwrap();
    // Answered within the store timeout, after the timeout around the shutdown.
    store.delay_releases(Duration::from_secs(1));
    shutdown_cut_during_its_release(&client).await;
    assert!(!guard.is_held());
    let next = client.shutdown(Duration::from_millis(10)).await;
    let row = store.inner.inspect(&common::name("sweep")).await.unwrap();
    assert!(
        row.is_none(),
        "the lease of a cancelled shutdown's release is still taken: {row:?} ({next:?})"
    );
    assert_eq!(
        (next.forced, next.released),
        (1, 1),
        "the next shutdown did not report the owed release: {next:?}"
    );
    drop(guard);
}

/// Work in a synchronous step (a blocking call, CPU work) when the grace period ends cannot be
/// stopped until the step is over: the shutdown does not free its lease under it, and reports
/// it unfinished. Real time, two worker threads: the step (1.5 s) blocks one of them for
/// longer than the shutdown runs (the 50 ms grace, two store timeouts of 250 ms for stopped
/// work, one to settle: about 800 ms), and ends well before the lease, no longer renewed,
/// lapses (its 3 s TTL after its last renewal).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_of_work_that_cannot_be_stopped_is_not_released_under_it() {
    let store = tokio_memory();
    let client = common::lapsing_client(store.clone(), Duration::from_millis(250));
    let (started_tx, started) = tokio::sync::oneshot::channel::<()>();
    let step_ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let run = tokio::spawn({
        let (client, step_ended) = (client.clone(), Arc::clone(&step_ended));
        async move {
            client
                .run_exclusive("sweep", move |_| async move {
                    let _ = started_tx.send(());
                    std::thread::sleep(Duration::from_millis(1_500));
                    step_ended.store(true, Ordering::SeqCst);
                    futures::future::pending::<()>().await
                })
                .await
        }
    });
    tokio::time::timeout(Duration::from_secs(10), started)
        .await
        .expect("the work did not start")
        .unwrap();
    let shutting_down = tokio::spawn({
        let client = client.clone();
        async move { client.shutdown(Duration::from_millis(50)).await }
    });
    let taken_before_the_step_ended = common::taken_before(&fast_client(store), "sweep", || {
        step_ended.load(Ordering::SeqCst)
    })
    .await;
    assert!(
        !taken_before_the_step_ended,
        "the shutdown freed the lease while its work still ran"
    );
    let report = shutting_down.await.unwrap();
    assert_eq!(report.forced, 0, "{report:?}");
    assert!(report.unfinished >= 1, "{report:?}");
    let outcome = run.await.unwrap().unwrap();
    assert!(
        matches!(
            outcome,
            Some(RunOutcome::Cancelled {
                reason: LossReason::ShutDown
            })
        ),
        "{outcome:?}"
    );
}

/// On `store`, which pushes releases: a client holding `sweep` with its guard, and another
/// client waiting for it, with that waiting acquisition's task (which opens the waiting
/// client's subscription to releases).
async fn waiting_for_sweep(
    store: &Arc<Faulty>,
) -> (
    LeaseClient,
    lease_core::LeaseGuard,
    LeaseClient,
    tokio::task::JoinHandle<Result<lease_core::LeaseGuard, Error>>,
) {
    store.push_releases_after(Duration::ZERO);
    let (holding, waiting) = (
        fast_client(Arc::clone(store)),
        fast_client(Arc::clone(store)),
    );
    let held = holding.try_acquire("sweep").await.unwrap().unwrap();
    let wait = tokio::spawn({
        let waiting = waiting.clone();
        async move { waiting.acquire("sweep", Duration::from_secs(60)).await }
    });
    (holding, held, waiting, wait)
}

/// The subscription to the store's release events (on PostgreSQL a connection of its own) is
/// closed by the shutdown, though the application keeps the client: no acquisition waits on it
/// any more. Before, it stayed open for as long as a clone of the client lived.
#[tokio::test(start_paused = true)]
async fn a_shutdown_closes_the_subscription_to_releases() {
    let store = Faulty::new(tokio_memory());
    let (_holding, _held, waiting, wait) = waiting_for_sweep(&store).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        store.live_subscriptions.load(Ordering::SeqCst),
        1,
        "the waiting acquisition subscribed"
    );
    let report = waiting.shutdown(Duration::from_secs(1)).await;
    assert!(report.is_clean(), "{report:?}");
    assert!(matches!(
        wait.await.unwrap(),
        Err(lease_core::Error::ShuttingDown { .. })
    ));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        store.live_subscriptions.load(Ordering::SeqCst),
        0,
        "the subscription outlived the shutdown"
    );
    // A client that lives on after its shutdown takes no lease, and opens none again.
    assert!(
        waiting
            .acquire("report", Duration::from_secs(1))
            .await
            .is_err()
    );
    assert_eq!(store.live_subscriptions.load(Ordering::SeqCst), 0);
}

/// A shutdown whose future is dropped in its grace period (the process's own deadline came
/// first) has closed the subscription to releases all the same: it closes it as it begins.
#[tokio::test(start_paused = true)]
async fn a_shutdown_cut_short_has_closed_the_subscription_to_releases() {
    let store = Faulty::new(tokio_memory());
    let (_holding, _held, waiting, wait) = waiting_for_sweep(&store).await;
    // Work that never ends keeps the shutdown in its grace period.
    let (started_tx, started) = futures::channel::oneshot::channel();
    let run = tokio::spawn({
        let waiting = waiting.clone();
        async move {
            waiting
                .run_exclusive("report", |_| async move {
                    started_tx.send(()).unwrap();
                    futures::future::pending::<()>().await
                })
                .await
        }
    });
    started.await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        store.live_subscriptions.load(Ordering::SeqCst),
        1,
        "the waiting acquisition subscribed"
    );
    // The process's own deadline cuts the shutdown short, long before its grace ends.
    let cut = tokio::time::timeout(
        Duration::from_millis(200),
        waiting.shutdown(Duration::from_secs(60)),
    )
    .await;
    assert!(cut.is_err(), "the shutdown ended within its grace: {cut:?}");
    assert!(matches!(
        wait.await.unwrap(),
        Err(Error::ShuttingDown { .. })
    ));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        store.live_subscriptions.load(Ordering::SeqCst),
        0,
        "the subscription outlived a shutdown cut short"
    );
    run.abort();
}
