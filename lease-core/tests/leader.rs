//! Leader election hands over when the leader stops.

mod common;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Faulty, fast_client, tokio_memory};
use futures::StreamExt;
use lease_core::runtime::TokioRuntime;
use lease_core::{Leader, LeaseClient, LeaseHandle, LeaseStore, LossReason};

#[tokio::test(start_paused = true)]
async fn leadership_passes_on_when_the_leader_resigns_or_goes_away() {
    let store = tokio_memory();
    let (a, b, c) = (
        fast_client(store.clone()),
        fast_client(store.clone()),
        fast_client(store.clone()),
    );

    let first = a.campaign("alerts").unwrap();
    let mut first_changes = first.changes();
    assert_eq!(first_changes.next().await, Some(true));
    assert!(first.is_leader());
    let first_fence = first.fence().unwrap();

    let second = b.campaign("alerts").unwrap();
    let mut second_changes = second.changes();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(first.is_leader());
    assert!(!second.is_leader(), "two leaders at once");

    first.resign().await;
    let started = tokio::time::Instant::now();
    assert_eq!(second_changes.next().await, Some(true));
    assert!(
        started.elapsed() <= Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );
    assert!(second.fence().unwrap() > first_fence);
    assert_eq!(first_changes.next().await, Some(false));

    // Dropping the last handle ends the campaign and gives the lease back.
    let third = c.campaign("alerts").unwrap();
    let mut third_changes = third.changes();
    drop(second);
    assert_eq!(third_changes.next().await, Some(true));
    let info = store
        .inspect(&common::name("alerts"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(Some(info.fence), third.fence());
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_loses_its_lease_stops_leading_and_campaigns_again() {
    let store = tokio_memory();
    let client = fast_client(store.clone());
    let leader = client.campaign("sweep").unwrap();
    let mut changes = leader.changes();
    assert_eq!(changes.next().await, Some(true));
    let info = store.inspect(leader.name()).await.unwrap().unwrap();

    // The lease is taken away; the next renewal is rejected.
    assert!(
        store
            .release(leader.name(), &info.holder, Duration::ZERO)
            .await
            .unwrap()
    );
    assert_eq!(changes.next().await, Some(false));
    // And it campaigns again (woken by the release at once), winning the free lease with a
    // higher fence.
    assert_eq!(changes.next().await, Some(true));
    assert!(leader.fence().unwrap() > info.fence);
}

/// On a store that pushes no releases, a campaign that does not lead tries again every
/// `campaign_retry` (5 s with the defaults), not every renewal period (30 s): a leader's clean
/// shutdown leaves the leadership free for at most that long.
#[tokio::test(start_paused = true)]
async fn without_pushed_releases_a_follower_leads_within_the_campaign_retry() {
    let store = Faulty::new(tokio_memory());
    let (a, b) = (
        LeaseClient::new(Arc::clone(&store), TokioRuntime),
        LeaseClient::new(Arc::clone(&store), TokioRuntime),
    );
    let retry = b.config().campaign_retry();
    assert_eq!(retry, Duration::from_secs(5));
    assert!(retry < b.config().renew_every);

    let first = a.campaign("alerts").unwrap();
    assert_eq!(first.changes().next().await, Some(true));
    let first_fence = first.fence().unwrap();
    let second = b.campaign("alerts").unwrap();
    let mut second_changes = second.changes();
    // Past the follower's first attempt, and a second into its renewal period.
    tokio::time::sleep(Duration::from_secs(31)).await;
    assert!(!second.is_leader(), "two leaders at once");

    first.resign().await;
    let resigned = tokio::time::Instant::now();
    assert_eq!(second_changes.next().await, Some(true));
    let free_for = resigned.elapsed();
    assert!(
        free_for <= retry + Duration::from_millis(100),
        "the leadership stayed free for {free_for:?} after a clean resignation"
    );
    assert!(second.fence().unwrap() > first_fence);
}

#[tokio::test(start_paused = true)]
async fn every_clone_that_resigns_returns_once_the_lease_is_given_back() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(store.clone());
    let leader = client.campaign("alerts").unwrap();
    assert_eq!(leader.changes().next().await, Some(true));
    // Giving the lease back takes a round trip.
    store.delay_releases(Duration::from_millis(200));
    let (first, second) = (leader.clone(), leader);
    let resigning = tokio::spawn(first.resign());
    // The first clone has asked the campaign to stop; the second finds it asked already.
    tokio::task::yield_now().await;
    second.resign().await;
    let name = lease_core::LeaseName::new("alerts").unwrap();
    assert_eq!(
        store.inner.inspect(&name).await.unwrap(),
        None,
        "the second resignation returned before the lease was given back"
    );
    resigning.await.unwrap();
}

/// A campaign future let go before it ended (a `select!` against a shutdown signal, a task that
/// panicked or was aborted): the `Leader` learns that the campaign ended, its `changes` stream
/// ends, and `resign` returns instead of waiting for a campaign that no longer runs.
#[tokio::test(start_paused = true)]
async fn resign_returns_when_the_campaign_future_is_gone() {
    let client = fast_client(tokio_memory());
    let (leader, campaign) = client.campaign_on_this_task("alerts").unwrap();
    let mut changes = leader.changes();
    let running = tokio::spawn(campaign);
    assert_eq!(changes.next().await, Some(true));
    running.abort();
    assert!(running.await.unwrap_err().is_cancelled());
    assert!(!leader.is_leader());
    // Told that the leadership ended, then the stream ends; a stream made now says nothing
    // (it had said `true`, the leadership of a campaign that no longer runs).
    assert_eq!(changes.next().await, Some(false));
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(10), changes.next()).await,
        Ok(None),
        "the changes stream did not end with the campaign"
    );
    assert_eq!(leader.changes().next().await, None);
    tokio::time::timeout(Duration::from_secs(10), leader.resign())
        .await
        .expect("resign waited for a campaign that no longer runs");
}

/// The same with a campaign future that was never polled (a `select!` whose other branch was
/// ready first): dropped, it ends the `Leader`.
#[tokio::test(start_paused = true)]
async fn resign_returns_when_the_campaign_future_was_never_polled() {
    let client = fast_client(tokio_memory());
    let (leader, campaign) = client.campaign_on_this_task("alerts").unwrap();
    drop(campaign);
    assert!(!leader.is_leader());
    tokio::time::timeout(Duration::from_secs(10), leader.resign())
        .await
        .expect("resign waited for a campaign that never ran");
}

/// Work under the leader's term, on a task of its own, that stops as soon as it is told (its
/// lease is lost or given back): the task answers how.
fn work_that_stops_when_told(leader: &Leader) -> tokio::task::JoinHandle<LossReason> {
    let (lease, working) = leader.lease_for_work().expect("leading");
    tokio::spawn(async move {
        let reason = lease.lost().await;
        drop(working);
        reason
    })
}

/// The lease of the term `leader` leads in, once it leads.
async fn term(leader: &Leader) -> LeaseHandle {
    let leading = tokio::time::timeout(Duration::from_secs(10), leader.changes().next()).await;
    assert_eq!(leading, Ok(Some(true)), "the campaign did not lead");
    leader.lease().expect("leads")
}

/// Runs `stop`, which ends a leading campaign, while the store takes 200 ms to answer a
/// release: the term's lease (`Leader::lease`, what work under the leadership races against)
/// must report its loss with `expected` at once, while the store still names its holder, that
/// is before another instance could take the leadership. Answers what `stop` did.
async fn lost_before_given_back<T: Send + 'static>(
    store: &Faulty,
    lease: LeaseHandle,
    stop: impl Future<Output = T> + Send + 'static,
    expected: LossReason,
) -> T {
    store.delay_releases(Duration::from_millis(200));
    let stopping = tokio::spawn(stop);
    let reason = tokio::time::timeout(Duration::from_millis(100), lease.lost())
        .await
        .expect("the term's lease never reported the loss: work raced against it runs on");
    assert_eq!(reason, expected);
    assert!(!lease.is_held());
    let row = store.inner.inspect(lease.name()).await.unwrap();
    assert_eq!(
        row.map(|row| row.holder),
        Some(lease.holder().clone()),
        "the loss was reported only once the lease was given back"
    );
    let stopped = tokio::time::timeout(Duration::from_secs(10), stopping)
        .await
        .expect("the campaign did not stop")
        .unwrap();
    // Given back once the store answers (in the background, for a dropped campaign).
    tokio::time::timeout(Duration::from_secs(1), async {
        while store.inner.inspect(lease.name()).await.unwrap().is_some() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the leadership was not given back");
    stopped
}

#[tokio::test(start_paused = true)]
async fn a_leaders_lease_is_lost_when_the_shutdown_gives_the_leadership_back() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(Arc::clone(&store));
    let leader = client.campaign("alerts").unwrap();
    let lease = term(&leader).await;
    let stopping = client.clone();
    let report = lost_before_given_back(
        &store,
        lease,
        async move { stopping.shutdown(Duration::from_secs(5)).await },
        LossReason::ShutDown,
    )
    .await;
    assert!(report.is_clean(), "{report:?}");
    assert_eq!((report.resigned, report.forced), (1, 0), "{report:?}");
    assert!(!leader.is_leader());
    // Given back, not lost: a release in the statistics.
    let stats = client.stats();
    assert_eq!((stats.losses.total(), stats.released), (0, 1), "{stats:?}");
}

#[tokio::test(start_paused = true)]
async fn a_leaders_lease_is_lost_when_the_campaign_resigns() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(Arc::clone(&store));
    let leader = client.campaign("alerts").unwrap();
    let lease = term(&leader).await;
    lost_before_given_back(&store, lease, leader.resign(), LossReason::Resigned).await;
    let stats = client.stats();
    assert_eq!((stats.losses.total(), stats.released), (0, 1), "{stats:?}");
    assert_eq!(
        LossReason::Resigned.to_string(),
        "the campaign resigned and gave it back"
    );
}

#[tokio::test(start_paused = true)]
async fn a_leaders_lease_is_lost_when_the_last_leader_is_dropped() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(Arc::clone(&store));
    let leader = client.campaign("alerts").unwrap();
    let lease = term(&leader).await;
    let dropped = async move { drop(leader) };
    lost_before_given_back(&store, lease, dropped, LossReason::Resigned).await;
}

/// The campaign's future let go while it leads (a task aborted): its guard releases the lease
/// in the background, as a dropped guard does, and the term's lease is told first.
#[tokio::test(start_paused = true)]
async fn a_leaders_lease_is_lost_when_the_campaign_future_is_dropped() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(Arc::clone(&store));
    let (leader, campaign) = client.campaign_on_this_task("alerts").unwrap();
    let running = tokio::spawn(campaign);
    let lease = term(&leader).await;
    let aborted = async move {
        running.abort();
        assert!(running.await.unwrap_err().is_cancelled());
    };
    lost_before_given_back(&store, lease, aborted, LossReason::Resigned).await;
    assert!(!leader.is_leader());
}

/// A campaign future polled on the caller's own task (`campaign_on_this_task`, raced in a
/// `select!` against other work) does not take over the renewal of the client's leases where
/// the runtime can spawn the renewer: while the caller runs something else and leaves the
/// campaign unpolled, the term's lease and every other lease of the client are still renewed.
/// Before, the campaign, polled first, ran the renewal loop itself, and the spawned renewer
/// waited for it: both leases passed their local deadline within a second.
#[tokio::test(start_paused = true)]
async fn a_campaign_on_this_task_leaves_the_renewals_to_the_spawned_renewer() {
    let client = fast_client(tokio_memory());
    let (leader, campaign) = client.campaign_on_this_task("alerts").unwrap();
    let mut campaign = std::pin::pin!(campaign);
    let mut changes = leader.changes();
    tokio::select! {
        _ = &mut campaign => panic!("the campaign ended before it led"),
        leading = changes.next() => assert_eq!(leading, Some(true)),
    }
    let term = leader.lease().expect("leads");
    let other = client.try_acquire("sweep").await.unwrap().expect("free");
    // The caller works on for ten TTLs without polling the campaign.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(term.is_held(), "the term's lease was not renewed");
    assert!(
        other.is_held(),
        "another lease of the client was not renewed"
    );
    // Polled again, the campaign still leads.
    tokio::select! {
        _ = &mut campaign => panic!("the campaign ended"),
        () = tokio::time::sleep(Duration::from_secs(1)) => {}
    }
    assert!(leader.is_leader());
}

/// An acquisition that answers after its local deadline gives a lease already lost: no
/// leadership. The campaign tells nobody `true` for it (it had told `true`, and `false` at
/// once, while `is_leader` said no), and tries again.
#[tokio::test(start_paused = true)]
async fn a_term_lost_on_arrival_is_never_told_as_leadership() {
    let store = Faulty::new(tokio_memory());
    // Past the local validity of 900 ms, within the store timeout.
    store.delay_acquire_answers(Duration::from_millis(1_000));
    let client = common::fast_client_timing_out_after(Arc::clone(&store), Duration::from_secs(2));
    let leader = client.campaign("alerts").unwrap();
    let mut changes = leader.changes();
    let told = tokio::time::timeout(Duration::from_secs(10), changes.next()).await;
    assert!(told.is_err(), "told {told:?} for terms lost on arrival");
    assert!(
        store.acquires.load(std::sync::atomic::Ordering::SeqCst) >= 2,
        "the campaign did not try again"
    );
    assert!(!leader.is_leader());
}

/// How the leadership is given back while the work under it runs.
#[derive(Clone, Copy, Debug)]
enum GiveBack {
    Resign,
    /// The last `Leader` dropped, which ends the campaign too.
    DropLeader,
    /// The campaign's future dropped (its task aborted), with nobody left to wait for the work.
    DropCampaign,
    /// A resignation, then, while the campaign waits for the work, its future dropped.
    ResignThenDropCampaign,
}

/// How soon after its work stopped a released term's lease is taken. A lease left to lapse
/// instead is taken 2.45 s after the step at the soonest: its last renewal at most 250 ms
/// before the step began, its TTL 3 s, the step 300 ms.
const RELEASED_WITHIN: Duration = Duration::from_millis(1_500);

/// When another instance took the lease, seen from the blocking step of the work under it.
#[derive(Debug)]
enum Taken {
    /// Before the step ended: two instances led at once.
    DuringTheStep,
    /// This long after the step ended.
    After(Duration),
}

/// Leads on a client of `store` with a 3 s TTL, runs work on a task of its own that spends
/// 300 ms in a blocking step once started, gives the leadership back as `give_back` says while
/// the step runs, and answers when another instance took the lease. With `wait_for_work`, the
/// work holds the term's [`lease_core::WorkUnderTerm`]; without, only its lease.
async fn taken_during_a_blocking_step(
    store: lease_core::MemoryStore,
    wait_for_work: bool,
    give_back: GiveBack,
) -> Taken {
    let client = common::lapsing_client(store.clone(), Duration::from_secs(2));
    let (leader, campaign) = client.campaign_on_this_task("alerts").unwrap();
    let campaign = tokio::spawn(campaign);
    let mut changes = leader.changes();
    assert_eq!(changes.next().await, Some(true));
    let (lease, working) = match leader.lease_for_work() {
        Some((lease, working)) => (lease, wait_for_work.then_some(working)),
        None => panic!("leading, yet no lease for work"),
    };
    let step_ended = Arc::new(std::sync::OnceLock::<Instant>::new());
    let (started_tx, started) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn({
        let step_ended = Arc::clone(&step_ended);
        async move {
            let work = async {
                let _ = started_tx.send(());
                std::thread::sleep(Duration::from_millis(300));
                let _ = step_ended.set(Instant::now());
                futures::future::pending::<()>().await
            };
            tokio::select! {
                biased;
                _ = lease.lost() => {}
                () = work => {}
            }
            drop(working);
        }
    });
    started.await.unwrap();
    let resigning = tokio::spawn({
        let step_ended = Arc::clone(&step_ended);
        async move {
            match give_back {
                GiveBack::Resign => leader.resign().await,
                GiveBack::DropLeader => drop(leader),
                GiveBack::DropCampaign | GiveBack::ResignThenDropCampaign => {
                    if matches!(give_back, GiveBack::ResignThenDropCampaign) {
                        let resigning = leader.clone().resign();
                        let waited =
                            tokio::time::timeout(Duration::from_millis(100), resigning).await;
                        // A loaded machine may answer it after the step ended: then the work had
                        // stopped.
                        assert!(
                            waited.is_err() || step_ended.get().is_some(),
                            "the resignation did not wait for the work"
                        );
                    }
                    campaign.abort();
                    // Kept until the campaign's future is gone: dropped first, it would end it.
                    let _ = campaign.await;
                    drop(leader);
                }
            }
        }
    });
    let during =
        common::taken_before(&fast_client(store), "alerts", || step_ended.get().is_some()).await;
    let taken = match step_ended.get() {
        Some(ended) if !during => Taken::After(ended.elapsed()),
        _ => Taken::DuringTheStep,
    };
    tokio::time::timeout(Duration::from_secs(10), resigning)
        .await
        .expect("the resignation did not end")
        .unwrap();
    taken
}

/// Work under a term on a task of its own, in a blocking step when the leadership is given
/// back: holding the term's `WorkUnderTerm`, the release waits for the work to stop; the
/// control, holding only the lease, is released at once and the next instance leads beside
/// the step. Real time, two worker threads: the step blocks one of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_release_waits_for_work_under_the_term() {
    for give_back in [GiveBack::Resign, GiveBack::DropLeader] {
        // With the last Leader dropped nobody waits on the campaign: it still waits for the
        // work, and then releases the lease, well before the 3 s TTL would let it lapse.
        match taken_during_a_blocking_step(tokio_memory(), true, give_back).await {
            Taken::After(after) => assert!(
                after < RELEASED_WITHIN,
                "{give_back:?}: the lease was taken {after:?} after the work stopped: it \
                 lapsed instead of being released"
            ),
            Taken::DuringTheStep => {
                panic!("{give_back:?}: another instance led while the work under the term ran")
            }
        }
    }
    assert!(
        matches!(
            taken_during_a_blocking_step(tokio_memory(), false, GiveBack::Resign).await,
            Taken::DuringTheStep
        ),
        "the control, which does not hold the term's work, was waited for too"
    );
}

/// The campaign's future dropped while work under its term runs a blocking step (its task
/// aborted, `campaign_on_this_task` raced in a `select!` another branch won), during the term
/// or while a resignation waits for the work: nobody is left to wait for it, so the lease is
/// left to lapse rather than released under it, and no other instance leads during the step.
/// Before, the dropped term released it at once. The control, whose work holds only the lease,
/// is released at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_campaign_leaves_the_lease_of_running_work_to_lapse() {
    for give_back in [GiveBack::DropCampaign, GiveBack::ResignThenDropCampaign] {
        match taken_during_a_blocking_step(tokio_memory(), true, give_back).await {
            Taken::After(after) => assert!(
                after >= RELEASED_WITHIN,
                "{give_back:?}: the lease was taken {after:?} after the work stopped: released, \
                 not left to lapse"
            ),
            Taken::DuringTheStep => panic!(
                "{give_back:?}: another instance led while the work under the dropped \
                 campaign's term ran"
            ),
        }
    }
    assert!(
        matches!(
            taken_during_a_blocking_step(tokio_memory(), false, GiveBack::DropCampaign).await,
            Taken::DuringTheStep
        ),
        "the control, which does not hold the term's work, was not released at once"
    );
}

/// A shutdown with no grace that finds work under the term (a `WorkUnderTerm` alive) leaves
/// the lease alone: the campaign gives the leadership back, waits for the work, and releases
/// it. Before, the shutdown marked it lost and skipped it, and the campaign, reading the loss,
/// dropped the guard without a release: the lease stayed taken for its TTL.
#[tokio::test(start_paused = true)]
async fn a_shutdown_leaves_a_term_with_work_to_its_campaign_which_releases_it() {
    let store = tokio_memory();
    let client = fast_client(store.clone());
    let leader = client.campaign("alerts").unwrap();
    let mut changes = leader.changes();
    assert_eq!(changes.next().await, Some(true));
    let (lease, working) = leader.lease_for_work().expect("leading");
    let shutting_down = tokio::spawn({
        let client = client.clone();
        async move { client.shutdown(Duration::ZERO).await }
    });
    // The work stops when told.
    assert_eq!(lease.lost().await, LossReason::ShutDown);
    drop(working);
    let report = shutting_down.await.unwrap();
    assert_eq!((report.resigned, report.forced), (1, 0), "{report:?}");
    assert!(
        fast_client(store)
            .try_acquire("alerts")
            .await
            .unwrap()
            .is_some(),
        "the term's lease was not released once its work stopped ({report:?})"
    );
}

/// A term lost by its deadline (its renewals failed) while work under it runs, and a shutdown
/// that finds the work still running: the shutdown leaves the lease to the campaign, which
/// releases it once the work stops, as after any loss by the deadline (the row may still name
/// this holder for the safety margin). The control: without the release, the row still names
/// the holder when the work stops.
#[tokio::test(start_paused = true)]
async fn a_term_past_its_deadline_is_released_once_its_work_stops_in_a_shutdown() {
    let store = Faulty::new(tokio_memory());
    let client = LeaseClient::builder(store.clone(), TokioRuntime)
        .ttl(lease_core::Ttl::from_secs(10).unwrap())
        .renew_every(Duration::from_secs(1))
        .safety_margin(Duration::from_secs(5))
        .build()
        .unwrap();
    let leader = client.campaign("alerts").unwrap();
    let mut changes = leader.changes();
    assert_eq!(changes.next().await, Some(true));
    let (lease, working) = leader.lease_for_work().expect("leading");
    store.set(common::Mode::Fail);
    assert_eq!(lease.lost().await, LossReason::DeadlinePassed);
    store.set(common::Mode::Pass);
    let row = store.inspect(lease.name()).await.unwrap().unwrap();
    assert!(
        row.holder == *lease.holder() && !row.is_expired(),
        "the control: the row no longer names the holder, so the case would show nothing"
    );
    let started = tokio::time::Instant::now();
    let shutting_down = tokio::spawn({
        let client = client.clone();
        async move { client.shutdown(Duration::ZERO).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(working);
    shutting_down.await.unwrap();
    // Well before the row would have lapsed by itself (5 s after the loss).
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(
        fast_client(store)
            .try_acquire("alerts")
            .await
            .unwrap()
            .is_some(),
        "the term's lease was not released once its work stopped"
    );
}

/// A campaign whose future is dropped while the client's shutdown waits for its term's work
/// (the work still running) leaves the lease to lapse, and the shutdown's report counts it as a
/// lease not given back: the report is not clean.
#[tokio::test(start_paused = true)]
async fn a_campaign_dropped_in_a_shutdown_counts_the_lease_it_leaves_to_lapse() {
    let client = fast_client(tokio_memory());
    let (leader, campaign) = client.campaign_on_this_task("alerts").unwrap();
    let campaign = tokio::spawn(campaign);
    let mut changes = leader.changes();
    assert_eq!(changes.next().await, Some(true));
    let (lease, working) = leader.lease_for_work().expect("leading");
    let shutting_down = tokio::spawn({
        let client = client.clone();
        async move { client.shutdown(Duration::from_secs(30)).await }
    });
    // The work is told, and goes on; the campaign waits for it, and its future is dropped.
    assert_eq!(lease.lost().await, LossReason::ShutDown);
    campaign.abort();
    let _ = campaign.await;
    let report = shutting_down.await.unwrap();
    drop(working);
    assert_eq!(
        (report.resigned, report.failed),
        (0, 1),
        "the lease left to lapse was not counted: {report:?}"
    );
    assert!(!report.is_clean());
}

/// A campaign whose future is dropped while the client's shutdown has it give its term back,
/// after the work under the term stopped but before the release went out (its renewal of the
/// lease given back still on its way): nothing runs under the lease, so it is released, not
/// left taken for its TTL. Before, the dropped guard read the shutdown's reason and left the
/// release to the shutdown, which leaves a term to its campaign.
#[tokio::test(start_paused = true)]
async fn a_campaign_dropped_in_a_shutdown_after_its_work_stopped_releases_the_lease() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(Arc::clone(&store));
    let (leader, campaign) = client.campaign_on_this_task("alerts").unwrap();
    let campaign = tokio::spawn(campaign);
    let mut changes = leader.changes();
    assert_eq!(changes.next().await, Some(true));
    let (lease, working) = leader.lease_for_work().expect("leading");
    // The renewal the campaign sends as it begins to wait for the work hangs.
    store.delay_renewals(Duration::from_secs(10));
    let shutting_down = tokio::spawn({
        let client = client.clone();
        async move { client.shutdown(Duration::from_secs(30)).await }
    });
    assert_eq!(lease.lost().await, LossReason::ShutDown);
    drop(working);
    campaign.abort();
    let _ = campaign.await;
    let report = shutting_down.await.unwrap();
    store.delay_renewals(Duration::ZERO);
    // Released, not left to lapse: the row names nobody, long before its TTL ends.
    let row = store.inner.inspect(&common::name("alerts")).await.unwrap();
    assert!(
        row.is_none(),
        "the lease of a term whose work had stopped was left taken: {row:?} ({report:?})"
    );
}

/// On a runtime that cannot spawn, a campaign's future runs the client's renewer. A resign
/// that finds a renewal on its way (answered 300 ms later) while work runs under the term gives
/// the term back: the renewal answers, the work is told and stops, the lease is released and
/// `resign` returns. Before, the campaign stopped polling the renewer once it was stopped, the
/// renewal stayed half-way holding the renewer's lock, and the give-back's renewal of the lease
/// waited for that lock for ever: `resign` never returned.
#[tokio::test(start_paused = true)]
async fn a_campaign_that_drives_the_renewer_resigns_with_a_renewal_on_its_way() {
    let store = Faulty::new(tokio_memory());
    let client = LeaseClient::builder(Arc::clone(&store), common::NoSpawn)
        .ttl(lease_core::Ttl::from_secs(1).unwrap())
        .renew_every(Duration::from_millis(250))
        .safety_margin(Duration::from_millis(100))
        .build()
        .unwrap();
    let (leader, campaign) = client.campaign_on_this_task("alerts").unwrap();
    let campaign = tokio::spawn(campaign);
    let mut changes = leader.changes();
    assert_eq!(changes.next().await, Some(true));
    let work = work_that_stops_when_told(&leader);
    store.delay_renewals(Duration::from_millis(300));
    store
        .next_renewal_sent("the campaign's renewer sent no renewal")
        .await;
    tokio::time::timeout(Duration::from_secs(10), leader.resign())
        .await
        .expect("resign never returned: the give-back waited for a renewal nobody ran");
    assert_eq!(work.await.unwrap(), LossReason::Resigned);
    campaign.await.unwrap();
    let row = store.inner.inspect(&common::name("alerts")).await.unwrap();
    assert!(row.is_none(), "the lease was not released: {row:?}");
}

/// A campaign whose acquisition is answered past its deadline gives that lease back as never
/// held and campaigns on: no term begins, and no loss is counted or logged for it (a loss alert
/// would fire for a leadership nobody had). Then it leads.
#[tokio::test(start_paused = true)]
async fn a_campaign_answered_past_its_deadline_counts_no_loss() {
    let store = Faulty::new(tokio_memory());
    let client = common::fast_client_timing_out_after(store.clone(), Duration::from_secs(2));
    store.delay_acquire_answers(Duration::from_millis(950));
    let leader = client.campaign("alerts").unwrap();
    let mut changes = leader.changes();
    tokio::time::sleep(Duration::from_millis(960)).await;
    store.delay_acquire_answers(Duration::ZERO);
    let led = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(leading) = changes.next().await {
            if leading {
                return;
            }
        }
    })
    .await;
    assert!(
        led.is_ok(),
        "the campaign never led once answers came in time"
    );
    let losses = client.stats().losses;
    assert_eq!(
        (losses.deadline_passed, losses.rejected),
        (0, 0),
        "the late answer was counted as a lost leadership: {losses:?}"
    );
    leader.resign().await;
}

/// A leader whose work stops at once when told, resigning while a renewal round of the client
/// waits on another lease's locked row (cut only by the 800 ms store timeout): the lease is
/// released as soon as the work has stopped. Before, the give-back's renewal of the lease
/// waited for that round to end, and the release with it: with many such leases, several
/// store timeouts, past a shutdown's settling.
#[tokio::test(start_paused = true)]
async fn a_release_after_the_work_stopped_waits_for_no_renewal_round_in_flight() {
    let store = Faulty::new(tokio_memory());
    let client = common::lapsing_client(Arc::clone(&store), Duration::from_millis(800));
    let stuck = client.try_acquire("stuck").await.unwrap().expect("free");
    let leader = client.campaign("alerts").unwrap();
    let mut changes = leader.changes();
    assert_eq!(changes.next().await, Some(true));
    let work = work_that_stops_when_told(&leader);
    store.lock_row("stuck");
    store.next_renewal_sent("the renewer sent no renewal").await;
    let asked = tokio::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(10), leader.resign())
        .await
        .expect("resign never returned");
    let took = asked.elapsed();
    assert_eq!(work.await.unwrap(), LossReason::Resigned);
    let row = store.inner.inspect(&common::name("alerts")).await.unwrap();
    assert!(row.is_none(), "the lease was not released: {row:?}");
    assert!(
        took < Duration::from_millis(400),
        "the release came {took:?} after the resignation, though the work stopped at once: it \
         waited for the renewal round held up on another lease's row"
    );
    drop(stuck);
}
