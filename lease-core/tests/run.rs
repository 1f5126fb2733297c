//! run_exclusive: the work runs once, is cancelled on loss, and renewal needs no spawn.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;

use common::{Faulty, Mode, NoSpawn, Stoppable, fast_client, tokio_memory};
use lease_core::{
    LeaseClient, LeaseStore, LossReason, OnLoss, RunOptions, RunOutcome, Ttl, runtime::TokioRuntime,
};

#[tokio::test(start_paused = true)]
async fn the_work_runs_renewed_and_the_lease_is_released_after() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(store.clone());
    let outcome = client
        .run_exclusive("sweep", |lease| async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            assert!(lease.is_held());
            lease.fence().get()
        })
        .await
        .unwrap();
    assert_eq!(outcome, Some(RunOutcome::Finished(1)));
    assert!(
        store.renew_manys.load(Ordering::SeqCst) >= 15,
        "five seconds at 250 ms"
    );
    assert_eq!(
        store.inner.inspect(&common::name("sweep")).await.unwrap(),
        None
    );
}

#[tokio::test(start_paused = true)]
async fn a_held_lease_means_the_round_is_skipped() {
    let store = tokio_memory();
    let holder = fast_client(store.clone());
    let _guard = holder.try_acquire("sweep").await.unwrap().unwrap();
    let ran = AtomicUsize::new(0);
    let outcome = fast_client(store)
        .run_exclusive("sweep", |_| async { ran.fetch_add(1, Ordering::SeqCst) })
        .await
        .unwrap();
    assert_eq!(outcome, None);
    assert_eq!(ran.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn losing_the_lease_cancels_the_work() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(store.clone());
    let steps = AtomicUsize::new(0);
    let outcome = client
        .run_exclusive("alerts", |_| async {
            loop {
                if steps.fetch_add(1, Ordering::SeqCst) == 4 {
                    store.set(Mode::Fail);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await
        .unwrap();
    let outcome: RunOutcome<()> = outcome.unwrap();
    assert_eq!(
        outcome,
        RunOutcome::Cancelled {
            reason: LossReason::DeadlinePassed
        }
    );
    let steps = steps.load(Ordering::SeqCst);
    // Failing from 400 ms on, the local deadline (900 ms after the last renewal sent, at the
    // latest 250 ms) passed by 1.15 s: no step ran after that.
    assert!(steps <= 12, "{steps} steps");
}

#[tokio::test(start_paused = true)]
async fn on_loss_finish_lets_the_work_end_and_says_so() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(store.clone());
    let outcome = client
        .run_exclusive_with(
            "alerts",
            RunOptions::default().on_loss(OnLoss::Finish),
            |_| async {
                store.set(Mode::Fail);
                tokio::time::sleep(Duration::from_secs(3)).await;
                "done"
            },
        )
        .await
        .unwrap();
    assert_eq!(
        outcome,
        Some(RunOutcome::FinishedAfterLoss {
            output: "done",
            reason: LossReason::DeadlinePassed
        })
    );
}

#[tokio::test(start_paused = true)]
async fn the_work_is_dropped_before_the_lease_is_released() {
    /// Records how many releases the store had seen when the work's future was dropped.
    struct SeenAtDrop<'a>(&'a Faulty, &'a AtomicUsize);
    impl Drop for SeenAtDrop<'_> {
        fn drop(&mut self) {
            self.1
                .store(self.0.releases.load(Ordering::SeqCst) + 1, Ordering::SeqCst);
        }
    }
    let store = Faulty::new(tokio_memory());
    let client = fast_client(store.clone());
    let seen = AtomicUsize::new(0);
    let outcome: Option<RunOutcome<()>> = client
        .run_exclusive("alerts", |lease| {
            let (store, seen) = (&store, &seen);
            async move {
                // What the work owns (a child task, an open transaction) lives as long as
                // this.
                let _owned = SeenAtDrop(store, seen);
                tokio::time::sleep(Duration::from_millis(300)).await;
                let _ = lease.mark_not_held();
                futures::future::pending().await
            }
        })
        .await
        .unwrap();
    assert_eq!(
        outcome,
        Some(RunOutcome::Cancelled {
            reason: LossReason::NotHeld
        })
    );
    assert_eq!(store.releases.load(Ordering::SeqCst), 1, "released once");
    assert_eq!(
        seen.load(Ordering::SeqCst),
        1,
        "the work's future was dropped after the release was sent: the next holder could \
         start while it still owned what it held"
    );
}

#[tokio::test(start_paused = true)]
async fn work_that_ends_as_its_deadline_passes_did_not_finish_under_the_lease() {
    let runtime = Stoppable::default();
    let client = LeaseClient::builder(tokio_memory(), runtime.clone())
        .ttl(Ttl::from_secs(1).unwrap())
        .build()
        .unwrap();
    let outcome = client
        .run_exclusive("alerts", |_| async {
            // Stopped past the lease's deadline in the middle of its last step, the process
            // resumes to the work's end and to the deadline at once.
            runtime.stopped_for(Duration::from_secs(10));
            "done"
        })
        .await
        .unwrap();
    assert_eq!(
        outcome,
        Some(RunOutcome::FinishedAfterLoss {
            output: "done",
            reason: LossReason::DeadlinePassed
        })
    );
}

/// A client whose acquisitions answer 950 ms after they were sent, past the local deadline of
/// its 1 s TTL less a 100 ms margin: every lease it takes is lost as it is answered. With its
/// store.
fn answered_after_the_deadline() -> (LeaseClient, Arc<Faulty>) {
    let store = Faulty::new(tokio_memory());
    store.delay_acquire_answers(Duration::from_millis(950));
    let client = common::fast_client_timing_out_after(Arc::clone(&store), Duration::from_secs(2));
    (client, store)
}

/// What a run on [`answered_after_the_deadline`]'s client answered, within ten seconds, checked
/// to be the cancellation of a lease lost to its deadline before the work started.
async fn cancelled_before_the_start<T: std::fmt::Debug + PartialEq>(
    run: impl std::future::Future<Output = Result<Option<RunOutcome<T>>, lease_core::Error>>,
) {
    let outcome = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("the run did not end")
        .unwrap();
    assert_eq!(
        outcome,
        Some(RunOutcome::Cancelled {
            reason: LossReason::DeadlinePassed
        })
    );
}

/// A lease already past its local deadline when the acquisition answers (an answer slower than
/// the TTL less the margin): the work is never polled, not even once.
#[tokio::test(start_paused = true)]
async fn work_whose_lease_is_lost_before_it_starts_is_never_polled() {
    let (client, _) = answered_after_the_deadline();
    let polls = AtomicUsize::new(0);
    cancelled_before_the_start(client.run_exclusive("sweep", |_| {
        futures::future::poll_fn(|_| {
            polls.fetch_add(1, Ordering::SeqCst);
            Poll::<()>::Pending
        })
    }))
    .await;
    assert_eq!(
        polls.load(Ordering::SeqCst),
        0,
        "the work was polled under a lease whose deadline had passed"
    );
}

/// The same with `OnLoss::Finish`, which lets work go on after a loss that comes while it runs:
/// under a lease lost before it would start, the work is not even made (its closure is not
/// called), and the outcome says it was cancelled, not that it finished.
#[tokio::test(start_paused = true)]
async fn work_whose_lease_is_lost_before_it_starts_is_not_made_even_with_on_loss_finish() {
    let (client, _) = answered_after_the_deadline();
    let made = AtomicUsize::new(0);
    cancelled_before_the_start(client.run_exclusive_with(
        "sweep",
        RunOptions::default().on_loss(lease_core::OnLoss::Finish),
        |_| {
            made.fetch_add(1, Ordering::SeqCst);
            async {}
        },
    ))
    .await;
    assert_eq!(made.load(Ordering::SeqCst), 0, "the work was made");
}

/// A lease lost before its work starts (the acquisition answered past its local deadline) ran
/// nothing under it: it is given back without the run's minimum hold, so the next instance may
/// run the work at once rather than find the round kept for a run that never happened.
#[tokio::test(start_paused = true)]
async fn a_lease_lost_before_its_work_starts_is_given_back_without_the_hold() {
    let (client, store) = answered_after_the_deadline();
    cancelled_before_the_start(client.run_exclusive_with(
        "sweep",
        RunOptions::default().min_hold(Duration::from_secs(60)),
        |_| async {},
    ))
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let next = fast_client(store.inner.clone());
    assert!(
        next.try_acquire("sweep").await.unwrap().is_some(),
        "a round that never ran was kept for its minimum hold"
    );
}

/// A release with a minimum hold that fails while a shutdown's grace period runs (work let
/// finish, a connection cut by the deploy) is tried again as at any other time: the hold is
/// kept, and the next instance does not run the work again within the period.
#[tokio::test(start_paused = true)]
async fn a_release_with_a_minimum_hold_in_a_shutdowns_grace_is_tried_again() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(store.clone());
    let hold = Duration::from_secs(15 * 60);
    let run = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .run_exclusive_with("mail-checks", RunOptions::default().min_hold(hold), |_| {
                    tokio::time::sleep(Duration::from_millis(300))
                })
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    store.fail_next_releases(2);
    let report = client.shutdown(Duration::from_secs(5)).await;
    let outcome = run.await.unwrap().unwrap();
    assert_eq!(outcome, Some(RunOutcome::Finished(())), "{report:?}");
    assert_eq!(store.releases.load(Ordering::SeqCst), 3, "{report:?}");
    assert_kept_for(&store, hold).await;
}

/// A release with a minimum hold that keeps failing fast is tried 20 times at the most, even
/// with its lease's local deadline far off (a TTL of an hour).
#[tokio::test(start_paused = true)]
async fn a_release_with_a_minimum_hold_is_tried_twenty_times_at_the_most() {
    let store = Faulty::new(tokio_memory());
    let client = LeaseClient::builder(store.clone(), TokioRuntime)
        .ttl(Ttl::from_secs(3600).unwrap())
        .build()
        .unwrap();
    store.fail_next_releases(usize::MAX);
    let outcome = client
        .run_exclusive_with(
            "mail-checks",
            RunOptions::default().min_hold(Duration::from_secs(7200)),
            |_| async {},
        )
        .await
        .unwrap();
    assert_eq!(outcome, Some(RunOutcome::Finished(())));
    assert_eq!(store.releases.load(Ordering::SeqCst), 20);
}

/// The process is stopped past the lease's local deadline while the work waits for an answer:
/// when it resumes, the answer and the loss are both there, and the loss is seen first: the
/// work takes no step after it.
#[tokio::test(start_paused = true)]
async fn after_a_stall_past_the_deadline_the_work_takes_no_further_step() {
    let runtime = Stoppable::default();
    let client = LeaseClient::builder(tokio_memory(), runtime.clone())
        .ttl(Ttl::from_secs(1).unwrap())
        .build()
        .unwrap();
    let (waiting, waits) = futures::channel::oneshot::channel::<()>();
    let (answer, answered) = futures::channel::oneshot::channel::<()>();
    let steps = AtomicUsize::new(0);
    let run = client.run_exclusive("sweep", |_| async {
        steps.fetch_add(1, Ordering::SeqCst);
        let _ = waiting.send(());
        let _ = answered.await;
        // The next step, a write under a lease the process no longer holds.
        steps.fetch_add(1, Ordering::SeqCst);
        futures::future::pending::<()>().await
    });
    let stall = async {
        let _ = waits.await;
        runtime.stopped_for(Duration::from_secs(10));
        let _ = answer.send(());
    };
    let (outcome, ()) = tokio::time::timeout(Duration::from_secs(10), async {
        futures::join!(run, stall)
    })
    .await
    .expect("the run did not end");
    assert_eq!(
        outcome.unwrap(),
        Some(RunOutcome::Cancelled {
            reason: LossReason::DeadlinePassed
        })
    );
    assert_eq!(
        steps.load(Ordering::SeqCst),
        1,
        "the work took a step after its lease's deadline had passed"
    );
}

/// The same stall on tokio's own timers: another task blocks the runtime's thread past the
/// lease's local deadline, then answers the work. tokio fires a timer when its driver next runs,
/// not when the timer is polled, so the loss is read from the clock at every poll, and the work
/// takes no step after the deadline.
#[tokio::test(flavor = "current_thread")]
async fn after_a_blocked_runtime_thread_the_work_takes_no_further_step() {
    let client = LeaseClient::builder(tokio_memory(), TokioRuntime)
        .ttl(Ttl::from_secs(1).unwrap())
        .build()
        .unwrap();
    let (waiting, waits) = futures::channel::oneshot::channel::<()>();
    let (answer, answered) = futures::channel::oneshot::channel::<()>();
    let steps = Arc::new(AtomicUsize::new(0));
    let stepped = steps.clone();
    let blocker = tokio::spawn(async move {
        let _ = waits.await;
        std::thread::sleep(Duration::from_millis(1500));
        let _ = answer.send(());
    });
    // A task of its own, as the blocker is: the runtime polls the one the other wakes next.
    let run = tokio::spawn(async move {
        client
            .run_exclusive("sweep", |_| async move {
                stepped.fetch_add(1, Ordering::SeqCst);
                let _ = waiting.send(());
                let _ = answered.await;
                // The next step, a write under a lease the process no longer holds.
                stepped.fetch_add(1, Ordering::SeqCst);
                futures::future::pending::<()>().await
            })
            .await
    });
    let outcome = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("the run did not end")
        .unwrap();
    blocker.await.unwrap();
    assert_eq!(
        outcome.unwrap(),
        Some(RunOutcome::Cancelled {
            reason: LossReason::DeadlinePassed
        })
    );
    assert_eq!(
        steps.load(Ordering::SeqCst),
        1,
        "the work took a step after its lease's deadline had passed"
    );
}

/// Work let finish after a loss ([`OnLoss::Finish`]) that a shutdown stops as it could take
/// its next step: the shutdown is seen first, and the step is not taken.
#[tokio::test(start_paused = true)]
async fn on_loss_finish_work_stopped_by_the_shutdown_takes_no_further_step() {
    let client = fast_client(tokio_memory());
    let (go, gone) = futures::channel::oneshot::channel::<()>();
    let (lost, lost_seen) = futures::channel::oneshot::channel::<()>();
    let steps = AtomicUsize::new(0);
    let stepped = &steps;
    let run = client.run_exclusive_with(
        "sweep",
        RunOptions::default().on_loss(OnLoss::Finish),
        |lease| async move {
            let _ = lease.mark_not_held();
            let _ = lost.send(());
            let _ = gone.await;
            stepped.fetch_add(1, Ordering::SeqCst);
            "done"
        },
    );
    let stop = async {
        let _ = lost_seen.await;
        // The work's next step and the end of the grace period fall due together.
        let _ = go.send(());
        client.shutdown(Duration::ZERO).await
    };
    let (outcome, report) =
        tokio::time::timeout(Duration::from_secs(10), async { futures::join!(run, stop) })
            .await
            .expect("the run did not end");
    assert_eq!(
        outcome.unwrap(),
        Some(RunOutcome::Cancelled {
            reason: LossReason::ShutDown
        })
    );
    assert_eq!(report.cancelled, 1, "{report:?}");
    assert_eq!(
        steps.load(Ordering::SeqCst),
        0,
        "the work took a step after the shutdown stopped it"
    );
}

#[tokio::test(start_paused = true)]
async fn min_hold_keeps_the_next_instance_out_for_the_period() {
    let store = tokio_memory();
    let options = RunOptions::default().min_hold(Duration::from_secs(15 * 60));
    let first = fast_client(store.clone())
        .run_exclusive_with("mail-checks", options, |_| async {})
        .await
        .unwrap();
    assert!(first.is_some());
    tokio::time::sleep(Duration::from_secs(60)).await;
    let second = fast_client(store.clone())
        .run_exclusive_with("mail-checks", options, |_| async {})
        .await
        .unwrap();
    assert_eq!(second, None, "ran again within 15 minutes");
}

/// Asserts that `store` keeps `mail-checks` taken for `hold` after it was taken.
async fn assert_kept_for(store: &Faulty, hold: Duration) {
    let info = store
        .inner
        .inspect(&common::name("mail-checks"))
        .await
        .unwrap()
        .expect("kept for its hold");
    let kept = info.expires_at.duration_since(info.taken_at).unwrap();
    assert!(kept >= hold, "kept {kept:?} of a {hold:?} hold");
}

/// A release with a minimum hold that fails (a connection that broke) is tried again, so the
/// lease is kept for the hold, not only until one TTL after its last renewal; without the tries
/// the next instance would run the work again a second after the first.
#[tokio::test(start_paused = true)]
async fn a_failed_release_with_a_minimum_hold_is_tried_again() {
    let store = Faulty::new(tokio_memory());
    let hold = Duration::from_secs(15 * 60);
    let options = RunOptions::default().min_hold(hold);
    store.fail_next_releases(2);
    let first = fast_client(store.clone())
        .run_exclusive_with("mail-checks", options, |_| async {})
        .await
        .unwrap();
    assert_eq!(first, Some(RunOutcome::Finished(())));
    assert_eq!(
        store.releases.load(Ordering::SeqCst),
        3,
        "two failed tries, then one"
    );
    assert_kept_for(&store, hold).await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    let second = fast_client(store.clone())
        .run_exclusive_with("mail-checks", options, |_| async {})
        .await
        .unwrap();
    assert_eq!(second, None, "ran again within the hold");
}

/// A release with a minimum hold that keeps failing is not tried past the lease's local
/// deadline: the run ends, its release reported failed, within the TTL.
#[tokio::test(start_paused = true)]
async fn a_release_with_a_minimum_hold_is_not_tried_past_the_deadline() {
    let store = Faulty::new(tokio_memory());
    let options = RunOptions::default().min_hold(Duration::from_secs(15 * 60));
    store.fail_next_releases(usize::MAX);
    let started = tokio::time::Instant::now();
    let outcome = fast_client(store.clone())
        .run_exclusive_with("mail-checks", options, |_| async {})
        .await
        .unwrap();
    assert_eq!(outcome, Some(RunOutcome::Finished(())));
    assert!(
        started.elapsed() <= Duration::from_secs(1),
        "tried for {:?}, past the 900 ms of local validity",
        started.elapsed()
    );
    let tries = store.releases.load(Ordering::SeqCst);
    assert!((2..=20).contains(&tries), "{tries} tries");
}

/// A client with a 1 s TTL on a runtime that cannot spawn: the work drives its renewer.
fn no_spawn_client(store: impl LeaseStore) -> LeaseClient {
    LeaseClient::builder(store, NoSpawn)
        .ttl(Ttl::from_secs(1).unwrap())
        .build()
        .unwrap()
}

/// On a runtime that cannot spawn, a wait for a held lease polls (the release subscription
/// cannot run) and gives up at its limit. The subscription's task, handed back by the runtime,
/// once cleared the client's state under the lock the wait held: the first `acquire` hung for
/// good. Run on a thread of its own, so that a hang fails the test instead of stopping it.
#[test]
fn without_spawn_a_wait_for_a_held_lease_polls_and_gives_up() {
    let (answered, answer) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let waited = common::paused_runtime().block_on(async {
            let store = tokio_memory();
            let _held = fast_client(store.clone())
                .try_acquire("sweep")
                .await
                .unwrap()
                .unwrap();
            let client = no_spawn_client(store);
            client.acquire("sweep", Duration::from_secs(2)).await
        });
        let _ = answered.send(waited.is_err());
    });
    let gave_up = answer
        .recv_timeout(Duration::from_secs(30))
        .expect("the wait hung on a runtime that cannot spawn");
    assert!(gave_up, "the held lease was taken");
}

#[tokio::test(start_paused = true)]
async fn without_spawn_the_work_drives_renewal_for_every_lease() {
    let store = Faulty::new(tokio_memory());
    let client = no_spawn_client(store.clone());
    let seen = Arc::new(AtomicUsize::new(0));
    let runs = ["sweep", "alerts", "mail-checks", "uptime:node-a"].map(|job| {
        let (client, seen) = (client.clone(), seen.clone());
        async move {
            client
                .run_exclusive(job, |lease| async move {
                    for _ in 0..50 {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        assert!(lease.is_held());
                    }
                    seen.fetch_add(1, Ordering::SeqCst);
                })
                .await
        }
    });
    for outcome in futures::future::join_all(runs).await {
        assert_eq!(outcome.unwrap(), Some(RunOutcome::Finished(())));
    }
    assert_eq!(seen.load(Ordering::SeqCst), 4);
    assert!(store.renew_manys.load(Ordering::SeqCst) >= 15);
}

/// Where the work drives the renewer (a runtime that cannot spawn), a renewal the store refuses
/// stops the work before its next step: the renewer is polled before the loss and the work, so
/// a refusal it reads in the same wake-up as the work's timer is seen first. Before, the loss
/// was polled first, the renewer then marked the lease lost, and the work took one more step
/// under a lease the process knew was gone.
#[tokio::test(start_paused = true)]
async fn without_spawn_a_refused_renewal_stops_the_work_before_its_next_step() {
    let store = Faulty::new(tokio_memory());
    let client = no_spawn_client(store.clone());
    let steps_after_loss = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&steps_after_loss);
    let inner = store.inner.clone();
    let outcome = client
        .run_exclusive("sweep", |lease| async move {
            // An operator's forced release: the next renewal (250 ms on) is refused.
            assert!(
                inner
                    .release(lease.name(), lease.holder(), Duration::ZERO)
                    .await
                    .unwrap()
            );
            // Steps of 1 ms: one falls due in the wake-up that reads the refusal.
            for _ in 0..2_000 {
                tokio::time::sleep(Duration::from_millis(1)).await;
                if !lease.is_held() {
                    seen.fetch_add(1, Ordering::SeqCst);
                }
            }
        })
        .await
        .unwrap();
    assert_eq!(
        outcome,
        Some(RunOutcome::Cancelled {
            reason: LossReason::Rejected
        })
    );
    assert_eq!(
        steps_after_loss.load(Ordering::SeqCst),
        0,
        "the work took a step after the store refused the renewal"
    );
}

#[tokio::test(start_paused = true)]
async fn without_spawn_a_minimum_hold_release_does_not_wait_for_the_renewal_it_stopped() {
    let store = Faulty::new(tokio_memory());
    // Each renewal takes 200 ms: the work ends while the one sent at 250 ms is in flight.
    store.delay_renewals(Duration::from_millis(200));
    let client = no_spawn_client(store.clone());
    let options = RunOptions::default().min_hold(Duration::from_secs(60));
    let run = client.run_exclusive_with("mail-checks", options, |_| async {
        tokio::time::sleep(Duration::from_millis(300)).await;
    });
    let outcome = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the release waited forever for a renewal nobody drove")
        .unwrap();
    assert_eq!(outcome, Some(RunOutcome::Finished(())));
    assert!(store.renew_manys.load(Ordering::SeqCst) >= 1);
    assert_eq!(store.releases.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn with_tokio_the_renewer_is_spawned_for_plain_guards() {
    let store = Faulty::new(tokio_memory());
    let client = LeaseClient::builder(store.clone(), TokioRuntime)
        .ttl(Ttl::from_secs(1).unwrap())
        .build()
        .unwrap();
    let guard = client.try_acquire("sweep").await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(guard.is_held());
    assert!(store.renew_manys.load(Ordering::SeqCst) >= 30);
}
