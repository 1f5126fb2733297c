//! Schedules on tokio's paused clock: one run per round across instances, aligned rounds and
//! jitter, minimum holds, rounds missed and not replayed, the leader's rounds, stop and
//! shutdown. Each "once" is checked beside the control of instances that share no store, which
//! run every round twice.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{Stoppable, fast_client, lapsing_client, taken_before, tokio_memory};
use lease_core::{LeaseClient, MemoryStore, Schedule, Scheduled, ShutdownReport, Ttl};
use tokio::time::Instant;

/// When each run started, in ms since the test's start, and on which instance.
#[derive(Clone, Default)]
struct Runs(Arc<Mutex<Vec<(u128, &'static str)>>>);

impl Runs {
    fn record(&self, started: Instant, instance: &'static str) {
        self.0
            .lock()
            .unwrap()
            .push((started.elapsed().as_millis(), instance));
    }

    fn times(&self) -> Vec<u128> {
        self.0.lock().unwrap().iter().map(|(at, _)| *at).collect()
    }

    fn on(&self, instance: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, on)| *on == instance)
            .count()
    }
}

fn every(secs: u64) -> Schedule {
    Schedule::every(Duration::from_secs(secs)).unwrap()
}

/// Schedules `work_for` of work on `client` as `instance`, recording each run.
fn sweep(
    client: &LeaseClient,
    schedule: Schedule,
    runs: &Runs,
    instance: &'static str,
    work_for: Duration,
) -> Scheduled {
    sweep_since(client, schedule, runs, instance, work_for, Instant::now())
}

/// [`sweep`], recording each run's start since `started`.
fn sweep_since(
    client: &LeaseClient,
    schedule: Schedule,
    runs: &Runs,
    instance: &'static str,
    work_for: Duration,
    started: Instant,
) -> Scheduled {
    let runs = runs.clone();
    client
        .schedule("sweep", schedule, move |_| {
            runs.record(started, instance);
            tokio::time::sleep(work_for)
        })
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn every_round_runs_once_across_instances() {
    let store = tokio_memory();
    let runs = Runs::default();
    let (a, b) = (fast_client(store.clone()), fast_client(store.clone()));
    let on_a = sweep(&a, every(10), &runs, "a", Duration::from_secs(1));
    let on_b = sweep(&b, every(10), &runs, "b", Duration::from_secs(1));
    tokio::time::sleep(Duration::from_secs(55)).await;
    assert_eq!(runs.times(), [0, 10_000, 20_000, 30_000, 40_000, 50_000]);
    let (sa, sb) = (on_a.stats(), on_b.stats());
    assert_eq!(sa.ran + sb.ran, 6);
    assert_eq!(sa.skipped + sb.skipped, 6, "{sa:?} {sb:?}");
    assert_eq!((sa.missed, sa.failed, sa.lost), (0, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn the_control_instances_on_separate_stores_run_every_round_twice() {
    let runs = Runs::default();
    let (a, b) = (fast_client(tokio_memory()), fast_client(tokio_memory()));
    let _a = sweep(&a, every(10), &runs, "a", Duration::from_secs(1));
    let _b = sweep(&b, every(10), &runs, "b", Duration::from_secs(1));
    tokio::time::sleep(Duration::from_secs(25)).await;
    assert_eq!(runs.times(), [0, 0, 10_000, 10_000, 20_000, 20_000]);
}

#[tokio::test(start_paused = true)]
async fn by_default_a_round_is_not_run_again_by_an_instance_that_tries_it_later() {
    let store = tokio_memory();
    let runs = Runs::default();
    let (a, b) = (fast_client(store.clone()), fast_client(store.clone()));
    let started = Instant::now();
    // The rounds of b fall 3 s after a's (it started later, or its clock differs): a's work has
    // ended by then, and only the hold keeps b from running the round again.
    let _a = sweep_since(&a, every(10), &runs, "a", Duration::from_secs(1), started);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let _b = sweep_since(&b, every(10), &runs, "b", Duration::from_secs(1), started);
    tokio::time::sleep(Duration::from_secs(25)).await;
    assert_eq!(runs.times(), [0, 10_000, 20_000], "{:?}", runs.0);
}

#[test]
fn the_default_hold_outlasts_any_jitter_and_ends_before_the_winners_next_round() {
    let period = Duration::from_secs(3600);
    let tenth = period / 10;
    for asked in (0..=3600).step_by(60).map(Duration::from_secs) {
        let schedule = Schedule::every(period).unwrap().jitter(asked);
        let (hold, jitter) = (schedule.hold(), schedule.jitter_limit());
        assert_eq!(
            jitter,
            asked.min(period * 2 / 5),
            "the jitter as set, or cut"
        );
        // Every attempt of a round falls within the jitter of the winner's; the winner's next
        // falls at least the period less the jitter after its own: a tenth of the period
        // between the hold and each, for the store's latency and the clocks' difference.
        assert!(
            hold >= jitter + tenth && hold + tenth <= period - jitter,
            "a hold of {hold:?} for a jitter of {jitter:?}"
        );
    }
    let set = Schedule::every(period)
        .unwrap()
        .min_hold(Duration::from_secs(60));
    assert_eq!(set.hold(), Duration::from_secs(60), "a hold set is kept");
}

#[tokio::test(start_paused = true)]
async fn the_control_without_a_hold_the_later_instance_runs_each_round_again() {
    let store = tokio_memory();
    let runs = Runs::default();
    let (a, b) = (fast_client(store.clone()), fast_client(store.clone()));
    let started = Instant::now();
    let schedule = every(10).min_hold(Duration::ZERO);
    let _a = sweep_since(&a, schedule, &runs, "a", Duration::from_secs(1), started);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let _b = sweep_since(&b, schedule, &runs, "b", Duration::from_secs(1), started);
    tokio::time::sleep(Duration::from_secs(25)).await;
    assert_eq!(
        runs.times(),
        [0, 3_000, 10_000, 13_000, 20_000, 23_000],
        "{:?}",
        runs.0
    );
}

#[tokio::test(start_paused = true)]
async fn aligned_rounds_fall_on_the_wall_clocks_boundaries_within_their_jitter() {
    let runs = Runs::default();
    let client = fast_client(tokio_memory());
    let hour = Duration::from_secs(3600);
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let to_boundary = hour.as_millis() - since_epoch.as_millis() % hour.as_millis();
    let jitter = Duration::from_secs(60);
    let _sweep = sweep(
        &client,
        Schedule::every(hour).unwrap().aligned().jitter(jitter),
        &runs,
        "a",
        Duration::from_secs(1),
    );
    tokio::time::sleep(hour * 3).await;
    let times = runs.times();
    assert!(times.len() >= 2, "{times:?}");
    for (k, at) in times.iter().enumerate() {
        let boundary = to_boundary + hour.as_millis() * k as u128;
        assert!(
            *at + 20 >= boundary && *at < boundary + jitter.as_millis(),
            "run {k} at {at} ms, the boundary at {boundary} ms: {times:?}"
        );
    }
    assert!(
        times.windows(2).any(|w| w[1] - w[0] != hour.as_millis()),
        "jitter moved the rounds: {times:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_minimum_hold_runs_the_work_at_most_once_per_hold() {
    let store = tokio_memory();
    let runs = Runs::default();
    let (a, b) = (fast_client(store.clone()), fast_client(store.clone()));
    let schedule = every(10).min_hold(Duration::from_secs(25));
    let _a = sweep(&a, schedule, &runs, "a", Duration::from_millis(100));
    let _b = sweep(&b, schedule, &runs, "b", Duration::from_millis(100));
    tokio::time::sleep(Duration::from_secs(65)).await;
    assert_eq!(runs.times(), [0, 30_000, 60_000]);
}

#[tokio::test(start_paused = true)]
async fn rounds_that_fall_while_one_runs_are_skipped_and_counted_not_replayed() {
    let runs = Runs::default();
    let client = fast_client(tokio_memory());
    let sweep = sweep(&client, every(10), &runs, "a", Duration::from_secs(25));
    tokio::time::sleep(Duration::from_secs(65)).await;
    assert_eq!(runs.times(), [0, 30_000, 60_000]);
    assert_eq!(sweep.stats().missed, 4, "10, 20, 40 and 50 s");
    assert_eq!(sweep.stats().ran, 2, "the third is still running");
}

/// A round falls at its time plus its delay: a run that ends after the next round's time but
/// before its delay has not missed it. With rounds of 10 s, delays below 4 s and runs of 7 s, a
/// round is missed only when its delay is more than 3 s shorter than the one before (one round
/// in 32); missed whenever a run ended past the next round's time without its delay, one run
/// in four was followed by a missed round.
#[tokio::test(start_paused = true)]
async fn a_round_delayed_past_the_end_of_the_run_before_is_not_missed() {
    let runs = Runs::default();
    let client = fast_client(tokio_memory());
    let sweep = sweep(
        &client,
        every(10).jitter(Duration::from_secs(4)),
        &runs,
        "a",
        Duration::from_secs(7),
    );
    tokio::time::sleep(Duration::from_secs(10_000)).await;
    let stats = sweep.stats();
    assert!(stats.missed < 80, "{stats:?}");
    // Every round ran or was missed, none run late one after another.
    assert!(
        (995..=1_001).contains(&(stats.ran + stats.missed)),
        "{stats:?}"
    );
    let times = runs.times();
    assert!(times.windows(2).all(|w| w[1] - w[0] >= 7_000), "{times:?}");
}

#[tokio::test(start_paused = true)]
async fn the_leader_runs_every_round_and_another_takes_over_when_it_shuts_down() {
    let store = tokio_memory();
    let runs = Runs::default();
    let started = Instant::now();
    let (a, b) = (fast_client(store.clone()), fast_client(store.clone()));
    let on_leader = |client: &LeaseClient, instance: &'static str| {
        let runs = runs.clone();
        client
            .schedule_on_leader("alerts", every(5), move |lease| {
                assert!(lease.is_held());
                runs.record(started, instance);
                async {}
            })
            .unwrap()
    };
    let alerts_a = on_leader(&a, "a");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let alerts_b = on_leader(&b, "b");
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(runs.on("b"), 0, "b never led: {:?}", runs.times());
    let ran_a = runs.on("a");
    assert!(ran_a >= 2, "{:?}", runs.times());
    assert!(alerts_b.stats().skipped >= 2);

    let report = a.shutdown(Duration::from_secs(1)).await;
    assert_eq!(report.resigned, 1, "{report:?}");
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert!(alerts_a.is_stopped(), "the shutdown stopped it");
    assert_eq!(runs.on("a"), ran_a, "nothing ran on a after its shutdown");
    assert!(runs.on("b") >= 2, "b leads and runs: {:?}", runs.times());
}

/// An hourly leader schedule on the wall clock's boundaries with the most jitter (two fifths
/// of the hour): what the tests of the leader's jitter run, and where its next boundary falls
/// in ms since now, with the hour and the jitter in ms.
fn hourly_with_jitter() -> (Schedule, u128, u128, u128) {
    let hour = Duration::from_secs(3600);
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let to_boundary = hour.as_millis() - since_epoch.as_millis() % hour.as_millis();
    let schedule = Schedule::every(hour).unwrap().aligned().jitter(hour / 2);
    let jitter = schedule.jitter_limit();
    assert_eq!(
        jitter,
        hour * 2 / 5,
        "the jitter cut to two fifths of the period"
    );
    (schedule, to_boundary, hour.as_millis(), jitter.as_millis())
}

/// The boundary of the first of `runs` (ms since the start, in order), in ms since the start:
/// the next boundary, `to_boundary` ms on; or the last one, an hour before, whose shared delay
/// had not run out as the schedule started (its round then runs before the next boundary).
fn first_boundary(runs: &[u128], to_boundary: u128, hour: u128) -> i128 {
    match runs.first() {
        Some(first) if *first < to_boundary => to_boundary as i128 - hour as i128,
        _ => to_boundary as i128,
    }
}

/// Records the runs of a leader schedule of `name` on `client` as `instance`.
fn on_leader_recording(
    client: &LeaseClient,
    name: &str,
    schedule: Schedule,
    runs: &Runs,
    instance: &'static str,
    started: Instant,
) -> Scheduled {
    let runs = runs.clone();
    client
        .schedule_on_leader(name, schedule, move |_| {
            runs.record(started, instance);
            async {}
        })
        .unwrap()
}

/// An aligned leader schedule delays each boundary's round by the same jitter on every
/// instance (drawn from the lease's name and the boundary, not at random on each), so a new
/// leader's round of a boundary falls when the old leader's did. Two instances that share no
/// store each lead and run every round: at the same times. A schedule of another name falls at
/// other times, and the jitter does move the rounds off their boundaries.
#[tokio::test(start_paused = true)]
async fn a_leaders_aligned_rounds_fall_alike_on_every_instance() {
    let started = Instant::now();
    let (schedule, to_boundary, hour, jitter) = hourly_with_jitter();
    let (a, b, c) = (Runs::default(), Runs::default(), Runs::default());
    let clients = [
        fast_client(tokio_memory()),
        fast_client(tokio_memory()),
        fast_client(tokio_memory()),
    ];
    let _a = on_leader_recording(&clients[0], "alerts", schedule, &a, "a", started);
    let _b = on_leader_recording(&clients[1], "alerts", schedule, &b, "b", started);
    let _c = on_leader_recording(&clients[2], "reports", schedule, &c, "c", started);
    tokio::time::sleep(Duration::from_secs(4 * 3600)).await;
    let (a, b, c) = (a.times(), b.times(), c.times());
    assert!(a.len() >= 3 && a.len() == b.len(), "{a:?} and {b:?}");
    let first = first_boundary(&a, to_boundary, hour);
    let boundary = |k: usize| first + (hour * k as u128) as i128;
    for (k, (at_a, at_b)) in a.iter().zip(&b).enumerate() {
        assert!(
            at_a.abs_diff(*at_b) <= 20,
            "round {k} ran at {at_a} ms on one instance and at {at_b} ms on the other: {a:?}, {b:?}"
        );
        let (at, boundary) = (*at_a as i128, boundary(k));
        assert!(
            at + 20 >= boundary && at < boundary + jitter as i128,
            "round {k} at {at} ms, its boundary at {boundary} ms: {a:?}"
        );
    }
    assert!(
        a.iter()
            .enumerate()
            .any(|(k, at)| *at as i128 - boundary(k) > 1_000),
        "no jitter: {a:?}"
    );
    assert!(
        a.iter()
            .zip(&c)
            .any(|(at_a, at_c)| at_a.abs_diff(*at_c) > 1_000),
        "two names' rounds fell alike: {a:?} and {c:?}"
    );
}

/// Leadership handed on after every round, through four instances of an aligned leader
/// schedule with the most jitter: each boundary's round runs once. With a jitter
/// drawn at random on each instance, a new leader whose draw for the boundary just run falls
/// later than the old leader's would run that round again.
#[tokio::test(start_paused = true)]
async fn a_leaders_round_is_not_run_again_after_a_handover_within_its_jitter() {
    let started = Instant::now();
    let (schedule, to_boundary, hour, _) = hourly_with_jitter();
    let store = tokio_memory();
    let runs = Runs::default();
    let names = ["a", "b", "c", "d"];
    let clients: Vec<LeaseClient> = names.iter().map(|_| fast_client(store.clone())).collect();
    // All started at one instant of the paused clock, whose wall clock does not move with it:
    // started apart, their rounds would fall apart by as much, a clock difference.
    let _scheduled: Vec<Scheduled> = clients
        .iter()
        .zip(names)
        .map(|(client, name)| on_leader_recording(client, "alerts", schedule, &runs, name, started))
        .collect();
    // Each instance is shut down a second after its first round, handing leadership on.
    let mut handed_on = Vec::new();
    for _ in 0..(5 * 3600) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let ran: Vec<&str> = runs.0.lock().unwrap().iter().map(|(_, on)| *on).collect();
        if let Some(leader) = ran.iter().find(|on| !handed_on.contains(*on)) {
            let at = names.iter().position(|name| name == leader).unwrap();
            let report = clients[at].shutdown(Duration::from_secs(1)).await;
            assert_eq!(report.resigned, 1, "{report:?}");
            handed_on.push(*leader);
        }
        if handed_on.len() == names.len() {
            break;
        }
    }
    let runs = runs.0.lock().unwrap().clone();
    assert_eq!(
        handed_on.len(),
        names.len(),
        "every instance led once: {runs:?}"
    );
    let times: Vec<u128> = runs.iter().map(|(at, _)| *at).collect();
    let first = first_boundary(&times, to_boundary, hour);
    let boundaries: Vec<i128> = times
        .iter()
        .map(|at| (*at as i128 + 20 - first).div_euclid(hour as i128))
        .collect();
    assert_eq!(
        boundaries,
        [0, 1, 2, 3],
        "each boundary's round once, on the leader of the moment: {runs:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_leaders_first_round_runs_as_the_schedule_starts() {
    let runs = Runs::default();
    let started = Instant::now();
    // A store that answers after a round trip, as a database does: the first round falls
    // before the campaign's first attempt has answered.
    let store = common::Faulty::new(tokio_memory());
    store.delay_acquires(Duration::from_millis(20));
    let client = fast_client(store);
    // An hourly round: a first round skipped would leave the job undone for an hour.
    let alerts = client
        .schedule_on_leader("alerts", every(3600), {
            let runs = runs.clone();
            move |_| {
                runs.record(started, "a");
                async {}
            }
        })
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        runs.times(),
        [20],
        "the first round ran, once the campaign led"
    );
    let stats = alerts.stats();
    assert_eq!((stats.ran, stats.skipped), (1, 0), "{stats:?}");
}

/// A store that does not answer as the schedule starts (a database still starting, a blip):
/// the first round waits for the campaign's next attempt and runs once it leads, about a
/// backoff later. Before, the round was skipped, counted as one another instance had, and the
/// job waited an hour for its next round.
#[tokio::test(start_paused = true)]
async fn a_leaders_round_that_falls_while_the_store_fails_runs_once_the_campaign_leads() {
    let (store, runs, alerts) = faulty_leader_schedule(common::Mode::Fail, 3600);
    // Before the campaign's next attempt, which waits at least half the first backoff (25 ms).
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(runs.times(), Vec::<u128>::new());
    store.set(common::Mode::Pass);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(runs.times().len(), 1, "{:?}", runs.times());
    let stats = alerts.stats();
    assert_eq!(
        (stats.ran, stats.skipped, stats.failed),
        (1, 0, 0),
        "{stats:?}"
    );
}

/// A leader schedule stopped while its round waits for the campaign's next attempt (the
/// store failing) stops at once, and no round runs after the stop, though the store answers
/// again at once.
#[tokio::test(start_paused = true)]
async fn a_leader_schedule_stopped_while_its_round_waits_for_the_store_stops_at_once() {
    let (store, runs, alerts) = faulty_leader_schedule(common::Mode::Fail, 3600);
    tokio::time::sleep(Duration::from_millis(10)).await;
    store.set(common::Mode::Pass);
    let stopping = Instant::now();
    alerts.stop().await;
    assert!(
        stopping.elapsed() < Duration::from_millis(25),
        "the stop waited {:?}",
        stopping.elapsed()
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        runs.times(),
        Vec::<u128>::new(),
        "a round ran after the stop"
    );
}

/// While the store fails, a leader schedule's rounds fail, counted as a plain schedule's
/// rounds whose acquisitions fail (a health check reads `failed`), not as rounds another
/// instance had; each waits for the campaign's next attempt, within the acquire backoff's
/// longest pause and the store timeout, so none runs late without a lease nor hangs.
#[tokio::test(start_paused = true)]
async fn a_leaders_rounds_while_the_store_fails_count_as_failed() {
    let (store, _, alerts) = faulty_leader_schedule(common::Mode::Fail, 1);
    tokio::time::sleep(Duration::from_secs(30)).await;
    let failing = alerts.stats();
    assert!(failing.failed >= 3, "{failing:?}");
    assert_eq!((failing.ran, failing.skipped), (0, 0), "{failing:?}");
    store.set(common::Mode::Pass);
    tokio::time::sleep(Duration::from_secs(15)).await;
    let stats = alerts.stats();
    assert!(
        stats.ran >= 5,
        "the rounds did not run again once the store answered: {stats:?}"
    );
    assert_eq!(stats.skipped, 0, "{stats:?}");
}

/// A leader schedule of `alerts` every `seconds`, whose runs are recorded, on a store that
/// answers as `mode` says until the test changes it.
fn faulty_leader_schedule(
    mode: common::Mode,
    seconds: u64,
) -> (Arc<common::Faulty>, Runs, Scheduled) {
    let store = common::Faulty::new(tokio_memory());
    store.set(mode);
    let client = fast_client(store.clone());
    let runs = Runs::default();
    let started = Instant::now();
    let alerts = client
        .schedule_on_leader("alerts", every(seconds), {
            let runs = runs.clone();
            move |_| {
                runs.record(started, "a");
                async {}
            }
        })
        .unwrap();
    (store, runs, alerts)
}

/// A campaign that a permanent store error ended (a table renamed by a migration, a
/// permission revoked for a while) fails the leader schedule's round, and the schedule
/// campaigns again: once the store answers, the rounds run again, rather than being skipped
/// for good as if another instance led.
#[tokio::test(start_paused = true)]
async fn a_leader_schedule_campaigns_again_after_a_permanent_store_error() {
    let (store, _, alerts) = faulty_leader_schedule(common::Mode::Refuse, 1);
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let refused = alerts.stats();
    assert!(refused.failed >= 2, "{refused:?}");
    assert_eq!(refused.ran, 0, "{refused:?}");
    store.set(common::Mode::Pass);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let stats = alerts.stats();
    assert!(
        stats.ran >= 3,
        "the rounds did not run again once the store answered: {stats:?}"
    );
    assert!(!alerts.is_stopped());
}

/// A permanent error that is over by the next round costs no round more: that round campaigns
/// again and runs as the new campaign leads. Before, the round failed on the old campaign's
/// error, and only the one after ran: a one-second refusal cost an hourly job its next hour.
#[tokio::test(start_paused = true)]
async fn a_leader_round_after_a_permanent_error_that_ended_runs() {
    let (store, _, alerts) = faulty_leader_schedule(common::Mode::Refuse, 10);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(alerts.stats().failed, 1, "{:?}", alerts.stats());
    store.set(common::Mode::Pass);
    tokio::time::sleep(Duration::from_secs(10)).await;
    let stats = alerts.stats();
    assert_eq!(
        (stats.ran, stats.failed),
        (1, 1),
        "the round after the store answered again: {stats:?}"
    );
}

/// A schedule stopped as it starts runs no round, though its first round is due at once.
#[tokio::test(start_paused = true)]
async fn a_schedule_stopped_as_it_starts_runs_no_round() {
    let runs = Runs::default();
    let client = fast_client(tokio_memory());
    let sweep = sweep(&client, every(10), &runs, "a", Duration::ZERO);
    sweep.stop().await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(runs.times(), Vec::<u128>::new(), "a round ran after stop");
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_lets_the_running_round_finish_and_starts_no_other() {
    let store = tokio_memory();
    let runs = Runs::default();
    let client = fast_client(store.clone());
    let sweep = sweep(&client, every(10), &runs, "a", Duration::from_secs(3));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let report = client.shutdown(Duration::from_secs(5)).await;
    assert_eq!((report.finished, report.cancelled), (1, 0), "{report:?}");
    assert_eq!(report.elapsed, Duration::from_secs(2));
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(runs.times(), [0]);
    assert!(sweep.is_stopped());
    let other = fast_client(store);
    assert!(other.try_acquire("sweep").await.unwrap().is_some());
}

#[tokio::test(start_paused = true)]
async fn stop_waits_for_the_running_round_and_gives_the_lease_back() {
    let store = tokio_memory();
    let runs = Runs::default();
    let client = fast_client(store.clone());
    let sweep = sweep(&client, every(10), &runs, "a", Duration::from_secs(3));
    let view = sweep.clone();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let stopping = Instant::now();
    sweep.stop().await;
    assert_eq!(stopping.elapsed(), Duration::from_secs(2));
    assert!(view.is_stopped());
    assert_eq!(view.stats().ran, 1);
    // Given back with the round's hold (9 s from its start, by default): kept until then, so
    // nobody runs the round again, and free after it.
    assert!(
        fast_client(store.clone())
            .try_acquire("sweep")
            .await
            .unwrap()
            .is_none()
    );
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(
        fast_client(store)
            .try_acquire("sweep")
            .await
            .unwrap()
            .is_some()
    );
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(runs.times(), [0]);
}

/// A round whose work panics takes the schedule's task down, as a panic on any task does: the
/// schedule is then stopped on this instance (`is_stopped` says so, for a health check to see),
/// and `stop` returns at once instead of waiting for a loop that no longer runs.
#[tokio::test(start_paused = true)]
async fn a_schedule_whose_round_panicked_is_stopped_and_stop_returns() {
    let client = fast_client(tokio_memory());
    let sweep = client
        .schedule("sweep", every(10), |_| async {
            panic!("a bug in the job (this test's panic)")
        })
        .unwrap();
    let view = sweep.clone();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(view.is_stopped(), "the schedule's task died, yet it runs");
    tokio::time::timeout(Duration::from_secs(10), sweep.stop())
        .await
        .expect("stop waited for a loop that no longer runs");
}

/// The loop of `schedule_on_this_task` dropped before it was ever polled (a `select!` whose
/// other branch was ready first): the schedule is stopped, and `stop` returns.
#[tokio::test(start_paused = true)]
async fn a_schedule_whose_loop_was_never_polled_is_stopped() {
    let client = fast_client(tokio_memory());
    let (sweep, rounds) = client
        .schedule_on_this_task("sweep", every(10), |_| async {})
        .unwrap();
    drop(rounds);
    assert!(sweep.is_stopped());
    tokio::time::timeout(Duration::from_secs(10), sweep.stop())
        .await
        .expect("stop waited for a loop that never ran");
}

#[tokio::test(start_paused = true)]
async fn dropping_the_last_handle_stops_the_schedule() {
    let runs = Runs::default();
    let client = fast_client(MemoryStore::new());
    drop(sweep(&client, every(10), &runs, "a", Duration::ZERO));
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(runs.times().len() <= 1, "{:?}", runs.times());
    assert!(Schedule::every(Duration::ZERO).is_err());
    assert!(Schedule::every(Duration::from_nanos(999_999)).is_err());
    assert!(Schedule::every(Schedule::SHORTEST_PERIOD).is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_stops_a_leaders_running_round_as_it_gives_leadership_back() {
    let store = tokio_memory();
    let client = fast_client(store.clone());
    let (started_tx, started) = tokio::sync::mpsc::unbounded_channel::<()>();
    let finished = Arc::new(Mutex::new(false));
    let alerts = client
        .schedule_on_leader("alerts", every(1), {
            let finished = Arc::clone(&finished);
            move |lease| {
                let (started_tx, finished) = (started_tx.clone(), Arc::clone(&finished));
                async move {
                    let _ = started_tx.send(());
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    *finished.lock().unwrap() = lease.is_held();
                }
            }
        })
        .unwrap();
    let mut started = started;
    started.recv().await.unwrap();
    let report = client.shutdown(Duration::from_secs(60)).await;
    assert!(report.elapsed < Duration::from_secs(1), "{report:?}");
    assert_eq!(report.resigned, 1, "{report:?}");
    assert!(
        !*finished.lock().unwrap(),
        "the work ran on without the lease"
    );
    assert_eq!(alerts.stats().lost, 1, "{:?}", alerts.stats());
    assert!(
        fast_client(store)
            .try_acquire("alerts")
            .await
            .unwrap()
            .is_some()
    );
}

/// The process is stopped past the leader's lease's local deadline while a round's work waits
/// for an answer: when it resumes, the answer and the loss are both there, and the loss is seen
/// first: the round stops without the work taking another step.
#[tokio::test(start_paused = true)]
async fn after_a_stall_past_the_deadline_a_leaders_round_takes_no_further_step() {
    let runtime = Stoppable::default();
    let client = LeaseClient::builder(tokio_memory(), runtime.clone())
        .ttl(Ttl::from_secs(1).unwrap())
        .build()
        .unwrap();
    let (waiting, mut waits) = tokio::sync::mpsc::unbounded_channel::<()>();
    let answer = Arc::new(tokio::sync::Notify::new());
    let steps = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let alerts = client
        .schedule_on_leader("alerts", every(3600), {
            let (answer, steps) = (Arc::clone(&answer), Arc::clone(&steps));
            move |_| {
                let (waiting, answer, steps) =
                    (waiting.clone(), Arc::clone(&answer), Arc::clone(&steps));
                async move {
                    steps.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let _ = waiting.send(());
                    answer.notified().await;
                    // The next step, a write under a lease the process no longer holds.
                    steps.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    futures::future::pending::<()>().await
                }
            }
        })
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), waits.recv())
        .await
        .expect("the leader's first round did not start")
        .unwrap();
    runtime.stopped_for(Duration::from_secs(10));
    answer.notify_one();
    tokio::time::timeout(Duration::from_secs(10), async {
        while alerts.stats().lost == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the round did not stop");
    assert_eq!(
        steps.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the round's work took a step after its lease's deadline had passed"
    );
    tokio::time::timeout(Duration::from_secs(10), alerts.stop())
        .await
        .expect("the schedule did not stop");
}

/// A leader's round whose work ends by itself after its lease's deadline passed (a synchronous
/// step longer than the TTL, the process stopped in it) did not run under the lease: it counts
/// as lost, as a plain schedule's round does, not as run.
#[tokio::test(start_paused = true)]
async fn a_leaders_round_that_ends_past_its_deadline_counts_as_lost() {
    let runtime = Stoppable::default();
    let client = LeaseClient::builder(tokio_memory(), runtime.clone())
        .ttl(Ttl::from_secs(1).unwrap())
        .build()
        .unwrap();
    let alerts = client
        .schedule_on_leader("alerts", every(3600), {
            let runtime = runtime.clone();
            move |_| {
                let runtime = runtime.clone();
                async move { runtime.stopped_for(Duration::from_secs(10)) }
            }
        })
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), async {
        while alerts.stats().ran == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the round did not end");
    let stats = alerts.stats();
    // `ran` counts the rounds lost too.
    assert_eq!((stats.ran, stats.lost), (1, 1), "{stats:?}");
    tokio::time::timeout(Duration::from_secs(10), alerts.stop())
        .await
        .expect("the schedule did not stop");
}

/// Runs a leader schedule on `client` whose round's work, once started, waits `before`, then
/// spends `step` in a synchronous step (a blocking call, a stretch of CPU work: nothing can
/// stop it half-way), then waits for ever; shuts the client down while the step runs (which gives the leadership
/// back at once); and answers whether another instance took the lease before the step had
/// ended, with the shutdown's report.
async fn taken_during_a_synchronous_step(
    client: &LeaseClient,
    store: MemoryStore,
    before: Duration,
    step: Duration,
) -> (bool, ShutdownReport) {
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel::<()>();
    let step_ended = Arc::new(Mutex::new(false));
    let alerts = client
        .schedule_on_leader("alerts", every(3600), {
            let step_ended = Arc::clone(&step_ended);
            move |_| {
                let (started_tx, step_ended) = (started_tx.clone(), Arc::clone(&step_ended));
                async move {
                    tokio::time::sleep(before).await;
                    let _ = started_tx.send(());
                    std::thread::sleep(step);
                    *step_ended.lock().unwrap() = true;
                    futures::future::pending::<()>().await
                }
            }
        })
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), started.recv())
        .await
        .expect("the leader's round did not reach its step")
        .unwrap();
    let stopping = tokio::spawn({
        let client = client.clone();
        async move { client.shutdown(Duration::from_secs(5)).await }
    });
    let taken_before_the_step_ended = taken_before(&fast_client(store), "alerts", || {
        *step_ended.lock().unwrap()
    })
    .await;
    let report = tokio::time::timeout(Duration::from_secs(10), stopping)
        .await
        .expect("the shutdown did not end")
        .unwrap();
    assert!(alerts.is_stopped());
    (taken_before_the_step_ended, report)
}

/// A leader's round in the middle of a synchronous step when the client shuts down learns of it
/// only once the step ends: the lease is given back after the round has stopped, never while
/// its work still runs (real time, two worker threads: the step blocks one of them). The
/// campaign waits up to the store timeout, 2 s, for a step of 100 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaders_lease_is_given_back_only_once_its_round_has_stopped() {
    let store = tokio_memory();
    let client = lapsing_client(store.clone(), Duration::from_secs(2));
    given_back_once_the_step_ended(&client, store, Duration::ZERO, Duration::from_millis(100))
        .await;
}

/// Asserts that the leader's lease of [`taken_during_a_synchronous_step`] was given back, and
/// not before the step ended: the round counted cancelled, the term resigned.
async fn given_back_once_the_step_ended(
    client: &LeaseClient,
    store: MemoryStore,
    before: Duration,
    step: Duration,
) {
    let (taken, report) = taken_during_a_synchronous_step(client, store, before, step).await;
    assert!(
        !taken,
        "another instance took the lease while the round's work still ran"
    );
    assert_eq!((report.resigned, report.cancelled), (1, 1), "{report:?}");
}

/// The leadership is given back while the round's work is in a synchronous step, when the
/// term's lease has little of its TTL left: a client renewing a 2 s lease every 1.7 s, shut
/// down 1.5 s into a term whose round then blocks for 800 ms. The renewer renews no lease
/// given back, so without more the row lapsed 500 ms into the step, inside the campaign's
/// wait for the work (the store timeout, 1.2 s), and another instance took it while the step
/// still ran. The campaign renews the lease once as it gives it back with work running: the
/// lease is free only once the round has stopped (real time, two worker threads; the margins
/// are hundreds of milliseconds for a loaded machine).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaders_lease_with_little_time_left_is_kept_while_its_round_stops() {
    let store = tokio_memory();
    let client = LeaseClient::builder(store.clone(), lease_core::runtime::TokioRuntime)
        .ttl(Ttl::from_millis(2_000).unwrap())
        .renew_every(Duration::from_millis(1_700))
        .safety_margin(Duration::from_millis(100))
        .store_timeout(Duration::from_millis(1_200))
        .build()
        .unwrap();
    given_back_once_the_step_ended(
        &client,
        store,
        Duration::from_millis(1_500),
        Duration::from_millis(800),
    )
    .await;
}

/// A round whose synchronous step (1 s) outlasts the store timeout (250 ms) the campaign waits
/// for it: the lease is not released but left to lapse after its TTL (3 s from its last
/// renewal), still after the step ended; the shutdown reports it not given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaders_lease_whose_round_does_not_stop_in_time_lapses_instead() {
    let store = tokio_memory();
    let client = lapsing_client(store.clone(), Duration::from_millis(250));
    let (taken, report) =
        taken_during_a_synchronous_step(&client, store, Duration::ZERO, Duration::from_secs(1))
            .await;
    assert!(
        !taken,
        "another instance took the lease while the round's work still ran"
    );
    // Not given back: it lapsed.
    assert_eq!(
        (report.resigned, report.released, report.failed),
        (0, 0, 1),
        "{report:?}"
    );
    assert!(!report.is_clean(), "{report:?}");
}

/// A leader whose rounds have all finished gives its term back with a release alone: the
/// renewal a term gets as it is given back with work still running is not sent for the work
/// of rounds that ended long ago.
#[tokio::test(start_paused = true)]
async fn a_leader_with_no_round_running_gives_its_term_back_without_a_renewal() {
    let store = common::Faulty::new(tokio_memory());
    let client = fast_client(Arc::clone(&store));
    let runs = Runs::default();
    let _alerts = on_leader_recording(&client, "alerts", every(3600), &runs, "a", Instant::now());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(runs.times().len(), 1, "the first round ran");
    let (renewals, releases) = (
        store.renew_manys.load(std::sync::atomic::Ordering::SeqCst),
        store.releases.load(std::sync::atomic::Ordering::SeqCst),
    );
    let report = client.shutdown(Duration::from_secs(1)).await;
    assert_eq!(report.resigned, 1, "{report:?}");
    assert_eq!(
        (
            store.renew_manys.load(std::sync::atomic::Ordering::SeqCst) - renewals,
            store.releases.load(std::sync::atomic::Ordering::SeqCst) - releases,
        ),
        (0, 1),
        "the give-back's store calls: (renewals, releases)"
    );
}
