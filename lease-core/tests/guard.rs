//! The guard and the shared renewer: lost signals, deadlines, releases, many leases.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{Faulty, Mode, fast_client, name, tokio_memory};
use lease_core::{
    Error, HolderId, LeaseClient, LeaseGuard, LeaseStore, LossReason, Ttl, runtime::TokioRuntime,
};
use tokio::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_client_among_many_wins_and_the_others_skip() {
    let store = std::sync::Arc::new(lease_core::MemoryStore::new());
    let tasks = (0..32).map(|_| {
        let client = LeaseClient::new(store.clone(), TokioRuntime);
        // Winners keep their guard, so nobody can take the lease after a release.
        tokio::spawn(async move { client.try_acquire("sweep").await.unwrap() })
    });
    let mut winners = Vec::new();
    for task in tasks {
        winners.extend(task.await.unwrap());
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
}

#[tokio::test(start_paused = true)]
async fn a_held_lease_is_renewed_and_never_taken_over() {
    let store = Faulty::new(tokio_memory());
    let holder = fast_client(store.clone());
    let guard = holder.try_acquire("alerts").await.unwrap().unwrap();
    let other = fast_client(store.clone());
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(other.try_acquire("alerts").await.unwrap().is_none());
        assert!(guard.is_held());
    }
    assert!(
        store.renew_manys.load(Ordering::SeqCst) >= 20,
        "renewed every 250 ms for 6 s"
    );
    guard.release().await.unwrap();
    assert!(
        other.try_acquire("alerts").await.unwrap().is_some(),
        "released means free"
    );
}

/// Another transaction keeps one lease's row locked (a fenced transaction checked at its start
/// and left open past the store timeout, a console's `UPDATE` not committed): every renewal
/// statement that carries it waits until the store timeout cuts it. The client's other leases,
/// renewed in the same statement, must not lapse with it: after a statement of several leases
/// failed, they are renewed each in a statement of its own, until each succeeds; and however
/// many rows are locked, their renewals each alone wait one store timeout, all at once.
#[tokio::test(start_paused = true)]
async fn a_locked_row_costs_its_own_lease_not_the_others_renewed_with_it() {
    for locked in [1, 20] {
        let layout: Vec<bool> = (0..locked + 3).map(|n| n < locked).collect();
        // The default batch: every lease in one statement.
        locked_rows_cost_their_own_leases(&layout, 1_000).await;
    }
}

/// Rows locked in several batches of one round (a client of more leases than a batch holds):
/// a batch held up by its locked row lets the next start beside it after an eighth of the
/// store timeout, and the batches after that wait for their own answers only, so they are
/// renewed in time. Before, each batch waited for the one before it to time out: four held up
/// first cost the round four store timeouts (1 s, past the 900 ms local validity), and the
/// leases of the batches after them lapsed. With a held-up batch every eighth, one is always
/// waiting: batches that waited for every batch still running went out an eighth of the store
/// timeout apart, the last 970 ms into the round.
#[tokio::test(start_paused = true)]
async fn locked_rows_in_several_batches_cost_no_lease_of_the_batches_after_them() {
    let first_four: Vec<bool> = (0..7).map(|n| n < 4).collect();
    let every_eighth: Vec<bool> = (0..32).map(|n| n % 8 == 0).collect();
    for locked in [first_four, every_eighth] {
        locked_rows_cost_their_own_leases(&locked, 1).await;
    }
}

/// A lease for each entry of `locked`, taken in its order by a client with `fast_client`'s
/// settings (a store timeout of 250 ms) renewing `batch` leases a statement (batches go in the
/// order the leases were taken), the row of each whose entry is true locked once all are
/// taken: the others are all renewed in time, and the locked ones lost by their deadline.
async fn locked_rows_cost_their_own_leases(locked: &[bool], batch: usize) {
    let store = Faulty::new(tokio_memory());
    let client = LeaseClient::builder(store.clone(), TokioRuntime)
        .ttl(Ttl::from_millis(1_000).unwrap())
        .renew_every(Duration::from_millis(250))
        .safety_margin(Duration::from_millis(100))
        .renew_batch(batch)
        .build()
        .unwrap();
    let (mut stuck, mut others) = (Vec::new(), Vec::new());
    for (n, &locked) in locked.iter().enumerate() {
        let guard = client
            .try_acquire(&format!("lease-{n}"))
            .await
            .unwrap()
            .unwrap();
        if locked {
            stuck.push(guard);
        } else {
            others.push(guard);
        }
    }
    for guard in &stuck {
        store.lock_row(guard.name().as_str());
    }
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        for guard in &others {
            assert!(
                guard.is_held(),
                "{} lapsed with the leases whose rows are locked ({} of {}, {batch} a batch)",
                guard.name(),
                stuck.len(),
                locked.len()
            );
        }
    }
    for guard in &stuck {
        assert_eq!(guard.lost().await, LossReason::DeadlinePassed);
    }
}

/// Renewals refused at once (an outage that answers: a refused connection, a permission
/// revoked) are no sign of a locked row: the leases stay renewed together, one statement a
/// round, not one per lease.
#[tokio::test(start_paused = true)]
async fn renewals_refused_at_once_stay_together() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(store.clone());
    let mut guards = Vec::new();
    for name in ["alerts", "digest", "mail"] {
        guards.push(client.try_acquire(name).await.unwrap().unwrap());
    }
    let calls = store.renew_manys.load(Ordering::SeqCst);
    let leases = store.renewed_leases.load(Ordering::SeqCst);
    store.set(Mode::Fail);
    tokio::time::sleep(Duration::from_millis(800)).await;
    let calls = store.renew_manys.load(Ordering::SeqCst) - calls;
    let leases = store.renewed_leases.load(Ordering::SeqCst) - leases;
    assert!(calls >= 2, "{calls} renewal statements in 800 ms");
    assert_eq!(
        leases,
        calls * 3,
        "{calls} statements carried {leases} leases"
    );
    drop(guards);
}

/// The runtime's thread is blocked past the lease's local deadline (a long computation, a
/// blocking call in another task): the next poll of `lost()` completes, before the runtime has
/// run its timers. tokio fires a timer when its driver next runs, not when the timer is polled,
/// so a signal that only waited for the timer stayed pending for that poll (and the one after,
/// and so on until the driver ran), while the work it guards took its steps.
#[tokio::test(flavor = "current_thread")]
async fn lost_reads_the_clock_at_every_poll_not_only_the_timer() {
    let client = LeaseClient::builder(tokio_memory(), TokioRuntime)
        .ttl(Ttl::from_secs(1).unwrap())
        .build()
        .unwrap();
    let guard = client.try_acquire("alerts").await.unwrap().unwrap();
    let mut lost = std::pin::pin!(guard.lost());
    assert!(futures::poll!(lost.as_mut()).is_pending());
    // Blocks this runtime's only thread: neither the renewer nor the timers run meanwhile.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        futures::poll!(lost.as_mut()),
        std::task::Poll::Ready(LossReason::DeadlinePassed),
        "the deadline passed, but the lost signal was still pending"
    );
}

#[tokio::test(start_paused = true)]
async fn the_lost_signal_fires_within_one_renewal_period_after_a_takeover() {
    let store = tokio_memory();
    let client = fast_client(store.clone());
    let guard = client.try_acquire("alerts").await.unwrap().unwrap();

    // Somebody takes the lease behind the holder's back (as after a partition healed).
    assert!(
        store
            .release(guard.name(), guard.holder(), Duration::ZERO)
            .await
            .unwrap()
    );
    let thief = HolderId::generate();
    let taken = store
        .try_acquire(guard.name(), &thief, Ttl::from_secs(60).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(taken > guard.fence());

    let started = Instant::now();
    assert_eq!(guard.lost().await, LossReason::Rejected);
    assert!(
        started.elapsed() <= Duration::from_millis(250),
        "{:?}",
        started.elapsed()
    );
    assert!(!guard.is_held());
    assert!(matches!(
        guard.release().await,
        Err(Error::Lost {
            reason: LossReason::Rejected,
            ..
        })
    ));
}

async fn lost_before_the_store_expires_it(mode: Mode) {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(store.clone());
    let guard = client.try_acquire("mail-checks").await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(guard.is_held());

    store.set(mode);
    assert_eq!(guard.lost().await, LossReason::DeadlinePassed);
    assert!(!guard.is_held());
    // The store still has the lease: the holder knew before anybody else could take it.
    let info = store.inner.inspect(guard.name()).await.unwrap().unwrap();
    assert!(
        !info.is_expired(),
        "the holder must give up before the store's expiry"
    );
    assert!(info.expires_in() >= Duration::from_millis(100) - Duration::from_millis(1));
}

#[tokio::test(start_paused = true)]
async fn a_failing_store_makes_the_guard_give_up_before_the_ttl() {
    lost_before_the_store_expires_it(Mode::Fail).await;
}

#[tokio::test(start_paused = true)]
async fn a_hanging_store_makes_the_guard_give_up_before_the_ttl() {
    lost_before_the_store_expires_it(Mode::Hang).await;
}

#[tokio::test(start_paused = true)]
async fn a_store_that_recovers_in_time_keeps_the_lease() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(store.clone());
    let guard = client.try_acquire("sweep").await.unwrap().unwrap();
    store.set(Mode::Fail);
    tokio::time::sleep(Duration::from_millis(500)).await;
    store.set(Mode::Pass);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(guard.is_held());
}

#[tokio::test(start_paused = true)]
async fn invalid_input_is_rejected_before_any_store_call() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(store.clone());
    for bad in [String::new(), "x".repeat(256), "a\0b".to_owned()] {
        assert!(matches!(
            client.try_acquire(&bad).await,
            Err(Error::InvalidName { .. })
        ));
        assert!(matches!(
            client.acquire(&bad, Duration::from_secs(1)).await,
            Err(Error::InvalidName { .. })
        ));
        assert!(matches!(
            client.run_exclusive(&bad, |_| async {}).await,
            Err(Error::InvalidName { .. })
        ));
        assert!(matches!(
            client.campaign(&bad),
            Err(Error::InvalidName { .. })
        ));
    }
    let bad_config = LeaseClient::builder(store.clone(), TokioRuntime)
        .ttl(Ttl::from_secs(10).unwrap())
        .renew_every(Duration::from_secs(10))
        .build();
    assert!(matches!(bad_config, Err(Error::InvalidConfig { .. })));
    assert_eq!(store.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn acquire_waits_for_a_release_and_times_out_on_a_held_lease() {
    let store = tokio_memory();
    let holder = fast_client(store.clone());
    let waiter = fast_client(store.clone());
    let guard = holder.try_acquire("sweep").await.unwrap().unwrap();

    let started = Instant::now();
    match waiter.acquire("sweep", Duration::from_secs(3)).await {
        Err(Error::Timeout { name, waited }) => {
            assert_eq!(name.as_str(), "sweep");
            assert!(waited >= Duration::from_secs(3));
        }
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(4));

    let release = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        guard.release().await.unwrap();
    };
    let (taken, ()) = tokio::join!(waiter.acquire("sweep", Duration::from_secs(30)), release);
    assert!(taken.unwrap().fence().get() == 2);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_guard_is_released_in_the_background() {
    let store = tokio_memory();
    let client = fast_client(store.clone());
    drop(client.try_acquire("uptime:node-a").await.unwrap().unwrap());
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(store.inspect(&name("uptime:node-a")).await.unwrap(), None);
}

#[tokio::test(start_paused = true)]
async fn a_guard_dropped_after_its_deadline_passed_frees_the_lease_the_store_still_has() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(store.clone());
    let guard = client.try_acquire("alerts").await.unwrap().unwrap();
    store.set(Mode::Fail);
    assert_eq!(guard.lost().await, LossReason::DeadlinePassed);
    // The store answers again while it still has the lease (the holder gave up first).
    store.set(Mode::Pass);
    assert!(store.inner.inspect(guard.name()).await.unwrap().is_some());
    drop(guard);
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(
        store.inner.inspect(&name("alerts")).await.unwrap(),
        None,
        "the dropped guard left the lease to lapse"
    );
}

#[tokio::test(start_paused = true)]
async fn release_after_min_hold_keeps_others_out_until_then() {
    let store = tokio_memory();
    let client = fast_client(store.clone());
    let guard = client.try_acquire("mail-checks").await.unwrap().unwrap();
    guard.release_after(Duration::from_secs(900)).await.unwrap();
    tokio::time::sleep(Duration::from_secs(899)).await;
    assert!(client.try_acquire("mail-checks").await.unwrap().is_none());
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(client.try_acquire("mail-checks").await.unwrap().is_some());
}

#[tokio::test(start_paused = true)]
async fn ten_thousand_leases_are_renewed_in_batches_by_one_renewer() {
    let store = Faulty::new(tokio_memory());
    let client = LeaseClient::new(store.clone(), TokioRuntime);
    let mut guards = Vec::with_capacity(10_000);
    for i in 0..10_000 {
        guards.push(
            client
                .try_acquire(format!("job-{i}"))
                .await
                .unwrap()
                .unwrap(),
        );
        if i % 1_000 == 999 {
            // Leases taken at scattered moments still end up renewed together.
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    tokio::time::sleep(Duration::from_secs(10 * 60)).await;

    assert!(guards.iter().all(|guard| guard.is_held()));
    assert_eq!(
        store.renews.load(Ordering::SeqCst),
        0,
        "no lease renewed on its own"
    );
    let calls = store.renew_manys.load(Ordering::SeqCst);
    let renewed = store.renewed_leases.load(Ordering::SeqCst);
    // Ten minutes at one round per 30 s is about 20 rounds of 10 batches of 1,000.
    assert!(renewed >= 10_000 * 19, "{renewed} lease renewals");
    assert!(
        calls <= 10 * 22,
        "{calls} renew_many calls for 10,000 leases over 10 minutes"
    );
    let info = store.inner.inspect(&name("job-0")).await.unwrap().unwrap();
    assert!(info.expires_in() > Duration::from_secs(60));
}

#[tokio::test(start_paused = true)]
async fn a_waiter_takes_a_released_lease_at_once_where_the_store_pushes_releases() {
    let store = tokio_memory();
    let holder = fast_client(store.clone());
    let waiter = LeaseClient::builder(store.clone(), TokioRuntime)
        .acquire_backoff(Duration::from_secs(1), Duration::from_secs(60))
        .build()
        .unwrap();
    let guard = holder.try_acquire("sweep").await.unwrap().unwrap();
    // Long enough for the waiter's pauses to have grown to 30-60 s.
    let (taken, after) = taken_after_release(&waiter, guard, Duration::from_secs(200)).await;
    assert_eq!(taken.unwrap().fence().get(), 2);
    assert!(after < Duration::from_millis(10), "{after:?}");
}

/// `waiter` waits for the lease `guard` holds, which is released once `waiting` has passed:
/// what the wait answered, and how long after the release.
async fn taken_after_release(
    waiter: &LeaseClient,
    guard: LeaseGuard,
    waiting: Duration,
) -> (Result<LeaseGuard, Error>, Duration) {
    let name = guard.name().clone();
    let waiter = waiter.clone();
    let wait = tokio::spawn(async move {
        let taken = waiter.acquire(name, Duration::from_secs(600)).await;
        (taken, Instant::now())
    });
    tokio::time::sleep(waiting).await;
    let released_at = Instant::now();
    guard.release().await.unwrap();
    let (taken, taken_at) = wait.await.unwrap();
    (taken, taken_at - released_at)
}

#[tokio::test(start_paused = true)]
async fn a_store_without_release_events_is_polled() {
    // The wrapper does not forward the memory store's release events.
    let store = Faulty::new(tokio_memory());
    let holder = fast_client(store.clone());
    let waiter = fast_client(store.clone());
    let guard = holder.try_acquire("sweep").await.unwrap().unwrap();
    let release = async {
        tokio::time::sleep(Duration::from_secs(20)).await;
        guard.release().await.unwrap();
    };
    let (taken, ()) = tokio::join!(waiter.acquire("sweep", Duration::from_secs(60)), release);
    assert_eq!(taken.unwrap().fence().get(), 2);
    assert!(store.acquires.load(Ordering::SeqCst) > 3, "polled");
}

#[tokio::test(start_paused = true)]
async fn a_release_before_the_subscription_opens_still_wakes_the_waiter() {
    // The waiter's subscription takes 2 s to open; the release at 1 s is pushed to nobody.
    let store = Faulty::new(tokio_memory());
    store.push_releases_after(Duration::from_secs(2));
    let holder = fast_client(store.clone());
    let waiter = LeaseClient::builder(store.clone(), TokioRuntime)
        .store_timeout(Duration::from_secs(5))
        .acquire_backoff(Duration::from_secs(20), Duration::from_secs(60))
        .build()
        .unwrap();
    let guard = holder.try_acquire("sweep").await.unwrap().unwrap();
    let started = Instant::now();
    let waiting = tokio::spawn(async move {
        let taken = waiter.acquire("sweep", Duration::from_secs(600)).await;
        (taken, Instant::now(), waiter.stats())
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    guard.release().await.unwrap();
    let (taken, taken_at, stats) = waiting.await.unwrap();
    assert_eq!(taken.unwrap().fence().get(), 2);
    // The first pause is at least 10 s: only the subscription's opening can have woken it.
    let waited = taken_at - started;
    assert!(
        waited < Duration::from_millis(2_010),
        "taken {waited:?} after the wait began"
    );
    assert_eq!(
        (stats.subscribe_calls.calls, stats.subscribe_calls.errors),
        (1, 0),
        "{stats:?}"
    );
    assert_eq!(
        stats.acquire_calls.calls, 2,
        "the first attempt, and one on waking"
    );
}

#[tokio::test(start_paused = true)]
async fn a_renewal_in_flight_cannot_extend_a_lease_released_with_a_minimum_hold() {
    let store = Faulty::new(tokio_memory());
    let client = fast_client(store.clone());
    let guard = client.try_acquire("mail-checks").await.unwrap().unwrap();
    // The renewal sent at 250 ms reaches the store only at 350 ms.
    store.delay_renewals(Duration::from_millis(100));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        store.renew_manys.load(Ordering::SeqCst),
        1,
        "a renewal is in flight"
    );
    guard
        .release_after(Duration::from_millis(500))
        .await
        .unwrap();

    // Kept until 500 ms after it was taken, and not a TTL after the late renewal.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let other = fast_client(store.clone());
    assert!(other.try_acquire("mail-checks").await.unwrap().is_none());
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(other.try_acquire("mail-checks").await.unwrap().is_some());
}

#[tokio::test(start_paused = true)]
async fn leases_taken_one_by_one_are_renewed_in_few_rounds() {
    let store = Faulty::new(tokio_memory());
    let client = LeaseClient::new(store.clone(), TokioRuntime);
    let mut guards = Vec::new();
    // One lease a second for two minutes, as a process picking up work piece by piece.
    for i in 0..120 {
        guards.push(
            client
                .try_acquire(format!("job-{i}"))
                .await
                .unwrap()
                .unwrap(),
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    tokio::time::sleep(Duration::from_secs(8 * 60)).await;
    assert!(guards.iter().all(LeaseGuard::is_held));
    // Ten minutes at a renewal period of 30 s, renewing what is due within half a period each
    // round: about one round per 15 s. A round per acquisition would be over a hundred more.
    let calls = store.renew_manys.load(Ordering::SeqCst);
    assert!(
        calls <= 45,
        "{calls} renew_many calls for 120 leases over 10 minutes"
    );
}

/// A client that outlives the runtime its renewer was spawned on (a client kept in a `static`
/// across tests, a command-line tool that makes a runtime per command): the renewer's task went
/// with that runtime, and the leases taken on the next runtime are still renewed.
#[test]
fn a_client_renews_on_the_next_runtime_once_its_first_is_gone() {
    let store = tokio_memory();
    let client = fast_client(store);
    common::paused_runtime().block_on(async {
        let guard = client.try_acquire("sweep").await.unwrap().expect("free");
        guard.release().await.unwrap();
    });
    common::paused_runtime().block_on(async {
        let guard = client.try_acquire("alerts").await.unwrap().expect("free");
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(
            guard.is_held(),
            "no renewal on the second runtime: the renewer's task went with the first"
        );
        guard.release().await.unwrap();
    });
}

/// A client that outlives the runtime its release subscription was spawned on: the
/// subscription's task went with that runtime, and a waiter on the next runtime opens one
/// again and is woken by the release, not by its next poll. Before, the client still believed
/// it was subscribed: its waiters polled for as long as it lived.
#[test]
fn a_waiter_on_the_next_runtime_subscribes_again_once_the_first_is_gone() {
    let store = Faulty::new(tokio_memory());
    store.push_releases_after(Duration::ZERO);
    let holder = fast_client(store.clone());
    let waiter = LeaseClient::builder(store.clone(), TokioRuntime)
        .acquire_backoff(Duration::from_secs(20), Duration::from_secs(60))
        .build()
        .unwrap();
    common::paused_runtime().block_on(async {
        let guard = holder.try_acquire("sweep").await.unwrap().expect("free");
        // Waits, subscribed, until it gives up.
        let waited = waiter.acquire("sweep", Duration::from_secs(1)).await;
        assert!(waited.is_err(), "{waited:?}");
        guard.release().await.unwrap();
    });
    common::paused_runtime().block_on(async {
        let guard = holder.try_acquire("alerts").await.unwrap().expect("free");
        // Past the first attempt; the next poll would be 20 s on.
        let (taken, after) = taken_after_release(&waiter, guard, Duration::from_secs(1)).await;
        assert!(taken.is_ok(), "{taken:?}");
        assert!(
            after < Duration::from_millis(100),
            "taken {after:?} after the release: no subscription on the second runtime"
        );
        assert_eq!(waiter.stats().subscribe_calls.calls, 2);
    });
}

/// Release events that end as soon as they open (a listening connection cut at once, again
/// and again): each opening wakes every waiter to try again, and each try opened them again,
/// so a waiter spun through attempts and openings as fast as the store answered. Openings
/// that keep ending at once are now spaced out, doubling from 1 s, and the waiter polls
/// meanwhile: over 30 s a handful of openings, and the waiter still takes the lease.
#[tokio::test(start_paused = true)]
async fn release_events_that_keep_ending_are_not_reopened_in_a_loop() {
    let store = Faulty::new(tokio_memory());
    store.end_release_events_at_once();
    let holder = fast_client(store.clone());
    let waiter = fast_client(store.clone());
    let guard = holder.try_acquire("sweep").await.unwrap().unwrap();
    let release = async {
        tokio::time::sleep(Duration::from_secs(30)).await;
        guard.release().await.unwrap();
    };
    let (taken, ()) = tokio::join!(waiter.acquire("sweep", Duration::from_secs(60)), release);
    assert_eq!(taken.unwrap().fence().get(), 2);
    let opened = store.subscribes.load(Ordering::SeqCst);
    assert!(opened <= 10, "release events opened {opened} times in 30 s");
    let attempts = store.acquires.load(Ordering::SeqCst);
    assert!(attempts <= 60, "{attempts} attempts in 30 s");
}

/// Release events whose opening hangs until the store timeout (a database that takes the
/// connection and never answers): each failed opening counted as a subscription that lived
/// the timeout, long enough to start the pauses again, so a waiter opened them again at once,
/// back to back for the whole outage. A failed opening lives no time now, and the openings
/// are spaced out as those that end at once: over 300 s, by the pauses' arithmetic, about 9,
/// where one opening every 15 s makes 20 (the bound of 12 failed before the change).
#[tokio::test(start_paused = true)]
async fn release_events_whose_opening_times_out_are_not_reopened_back_to_back() {
    let store = Faulty::new(tokio_memory());
    // Each opening outlives the waiter's store timeout of 15 s.
    store.push_releases_after(Duration::from_secs(20));
    let holder = fast_client(store.clone());
    let waiter = common::fast_client_timing_out_after(store.clone(), Duration::from_secs(15));
    let _guard = holder.try_acquire("sweep").await.unwrap().unwrap();
    let waited = waiter.acquire("sweep", Duration::from_secs(300)).await;
    assert!(waited.is_err(), "took a lease still held: {waited:?}");
    let opened = store.subscribes.load(Ordering::SeqCst);
    assert!(
        (2..=12).contains(&opened),
        "release events opened {opened} times in 300 s"
    );
}

/// An acquisition answered after the lease's local deadline (here a store timeout longer than
/// the TTL lets an answer 950 ms late through, past the 900 ms the lease is believed for): the
/// guard would be lost before `acquire` returned it. `acquire` gives it back and goes on, and
/// returns only a lease still held. `try_acquire` returns what it took, lost, for its caller to
/// see.
#[tokio::test(start_paused = true)]
async fn acquire_never_returns_a_lease_answered_past_its_deadline() {
    let store = Faulty::new(tokio_memory());
    let client = common::fast_client_timing_out_after(store.clone(), Duration::from_secs(2));
    store.delay_acquire_answers(Duration::from_millis(950));
    let late = client.try_acquire("sweep").await.unwrap().expect("taken");
    assert!(!late.is_held(), "answered past its deadline, yet held");
    drop(late);
    tokio::time::sleep(Duration::from_millis(10)).await;
    // `try_acquire` hands the late lease to its caller, who learns it lost: counted once.
    assert_eq!(client.stats().losses.deadline_passed, 1);
    let acquiring = tokio::spawn({
        let client = client.clone();
        async move { client.acquire("sweep", Duration::from_secs(10)).await }
    });
    // The first answer comes late again; the later ones on time.
    tokio::time::sleep(Duration::from_millis(960)).await;
    store.delay_acquire_answers(Duration::ZERO);
    let guard = acquiring.await.unwrap().unwrap();
    assert!(guard.is_held(), "acquire returned a lease already lost");
    assert!(
        store.acquires.load(Ordering::SeqCst) >= 3,
        "the late answer was not tried again"
    );
    // `acquire` gave its late lease back itself: nobody held it, so no loss was counted (a
    // loss alert would have fired for a lease the caller never had).
    assert_eq!(
        client.stats().losses.deadline_passed,
        1,
        "acquire's own late answer was counted as a lost lease"
    );
    guard.release().await.unwrap();
}

/// A lease `acquire` was answered past its deadline and is giving back as a shutdown begins:
/// the shutdown waits for that release and reports it, as it does any release in flight.
#[tokio::test(start_paused = true)]
async fn a_shutdown_reports_the_give_back_of_a_late_answer() {
    let store = Faulty::new(tokio_memory());
    let client = common::fast_client_timing_out_after(store.clone(), Duration::from_secs(2));
    store.delay_acquire_answers(Duration::from_millis(950));
    store.delay_releases(Duration::from_millis(30));
    let acquiring = tokio::spawn({
        let client = client.clone();
        async move { client.acquire("sweep", Duration::from_secs(10)).await }
    });
    tokio::time::sleep(Duration::from_millis(960)).await;
    let report = client.shutdown(Duration::from_secs(5)).await;
    assert_eq!((report.released, report.failed), (1, 0), "{report:?}");
    assert!(
        acquiring.await.unwrap().is_err(),
        "acquired during the shutdown"
    );
}

/// A lease `acquire` was answered past its deadline whose row another instance took meanwhile
/// (a store timeout longer than the TTL): given back, the release matches nothing, and that is
/// no loss either, of a lease nobody here held.
#[tokio::test(start_paused = true)]
async fn acquire_counts_no_loss_for_a_late_answer_taken_over_meanwhile() {
    let shared = tokio_memory();
    let store = Faulty::new(shared.clone());
    let client = common::fast_client_timing_out_after(store.clone(), Duration::from_secs(3));
    store.delay_acquire_answers(Duration::from_millis(1_100));
    let acquiring = tokio::spawn({
        let client = client.clone();
        async move { client.acquire("sweep", Duration::from_millis(1_500)).await }
    });
    // The statement took the row at once; it expires after the TTL of 1 s, before its answer.
    tokio::time::sleep(Duration::from_millis(1_050)).await;
    let other = fast_client(shared.clone());
    let taken = other
        .try_acquire("sweep")
        .await
        .unwrap()
        .expect("expired, and free to take");
    assert!(
        acquiring.await.unwrap().is_err(),
        "acquired a lease held elsewhere"
    );
    let losses = client.stats().losses;
    assert_eq!(
        (losses.rejected, losses.deadline_passed),
        (0, 0),
        "{losses:?}"
    );
    taken.release().await.unwrap();
}
