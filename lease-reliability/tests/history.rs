//! History check: several worker processes, several tasks each, contend for a few names with
//! a one-second TTL for a bounded time, while faults are injected: proxies in front of some
//! workers stall, delay and cut their connections, and workers are paused past the TTL with
//! `SIGSTOP` (a worker that holds a name, as the table says, where one does; the first two
//! faults are such pauses). Every critical section is logged with its name, fence, holder and
//! believed-valid interval on the shared monotonic clock (see `lease_tests::history`), and the
//! checker proves that fences strictly increase per name in acquisition order and that no two
//! intervals of one name overlap. A run whose pauses of holders (two or more) ended no section
//! by its loss fails: its faults missed the moments the checker is there for.
//!
//! Half the workers use lease-sqlx, half lease-diesel, on the same table. Each worker must log
//! critical sections of its own and see at most half its attempts fail: a clean history made by
//! one driver alone, the other's every call failing, would prove nothing about the other.
//!
//! Each backend runs for `LEASE_RELIABILITY_HISTORY_SECS` seconds (default 20: CI runs about a
//! minute over the three). PostgreSQL and MariaDB run on private servers; SQLite, which has no
//! connection to cut, gets pauses only.

use std::path::Path;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lease_core::DynLeaseStore;
use lease_reliability::contenders::{Contenders, Contest};
use lease_reliability::db::{Db, Target};
use lease_reliability::factory::StoreFactory;
use lease_reliability::report::Counts;
use lease_reliability::scenario::runtime;
use lease_reliability::{Driver, with_sqlx};
use lease_tests::env;
use lease_tests::proxy::FaultProxy;
use rand::RngExt;

const WORKER: &str = env!("CARGO_BIN_EXE_lease-reliability-worker");
const PROCESSES: usize = 4;
/// Workers 0 and 1 reach the database through a proxy each; the others directly.
const PROXIED: usize = 2;
const TASKS: u32 = 3;
const NAMES: &str = "sweep,alerts,mail-checks";
const TTL_MS: u64 = 1_000;
/// The least number of critical sections each worker must log (a worker logs a few dozen in
/// the default 20 s, five or more in 5 s).
const SECTIONS_EACH: usize = 3;

/// Even workers go through lease-sqlx, odd ones through lease-diesel: the two drivers share
/// one table and must exclude each other.
fn driver(worker: usize) -> Driver {
    if worker.is_multiple_of(2) {
        Driver::Sqlx
    } else {
        Driver::Diesel
    }
}

fn duration() -> Duration {
    let secs = std::env::var("LEASE_RELIABILITY_HISTORY_SECS")
        .ok()
        .and_then(|secs| secs.parse().ok())
        .unwrap_or(20);
    Duration::from_secs(secs)
}

fn signal(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill {signal} {} failed", child.id());
}

/// The process ids of the holders of unexpired leases, as the table says now (a holder id
/// carries its process's id); none when the table does not answer within a second.
fn holding(rt: &tokio::runtime::Runtime, reader: &DynLeaseStore) -> Vec<u32> {
    let listed =
        rt.block_on(async { tokio::time::timeout(Duration::from_secs(1), reader.list()).await });
    match listed {
        Ok(Ok(leases)) => leases
            .iter()
            .filter(|lease| !lease.is_expired())
            .filter_map(|lease| lease.holder.as_str().rsplit(':').nth(1)?.parse().ok())
            .collect(),
        _ => Vec::new(),
    }
}

/// A worker among those whose process ids are in `holding`; `None` when none is.
fn a_holder(holding: &[u32], workers: &Contenders, rng: &mut impl rand::Rng) -> Option<usize> {
    let holders: Vec<usize> = (0..PROCESSES)
        .filter(|&i| holding.contains(&workers.process(i).id()))
        .collect();
    match holders.as_slice() {
        [] => None,
        holders => Some(holders[rng.random_range(0..holders.len())]),
    }
}

fn run(db: Db) {
    let Some(target) = Target::private(db) else {
        return;
    };
    let table = env::unique_table("history");
    let rt = runtime();
    // Made once, and kept to read who holds what (directly, past the proxies).
    let reader: Arc<DynLeaseStore> = rt.block_on(async {
        with_sqlx!(db, |f| {
            let store = f.connect(&target.url, &table, 1).await.unwrap();
            f.setup(&store).await.unwrap();
            Arc::new(store) as Arc<DynLeaseStore>
        })
    });
    let label = format!("{db}/sqlx+diesel");
    let mut counts = Counts::new("history", label);

    let proxies: Vec<FaultProxy> = match &target.server {
        Some(server) => (0..PROXIED)
            .map(|_| FaultProxy::start(server.port()).unwrap())
            .collect(),
        None => Vec::new(),
    };
    let secs = duration();
    let contest = Contest {
        db,
        table: table.clone(),
        names: NAMES.to_owned(),
        tasks: TASKS,
        ttl_ms: TTL_MS,
        secs: secs.as_secs(),
    };
    let members: Vec<(Driver, String)> = (0..PROCESSES)
        .map(|i| {
            let url = proxies
                .get(i)
                .map_or_else(|| target.url.clone(), |p| p.rewrite_url(&target.url));
            (driver(i), url)
        })
        .collect();
    let workers =
        Contenders::start(Path::new(WORKER), &contest, &members).expect("the workers start");

    // Faults until the workers stop, one every third of a second to a second, each healed before
    // the next.
    let started = Instant::now();
    let (mut pauses, mut holder_pauses, mut faults_made) = (0, 0, 0);
    let mut rng = rand::rng();
    while started.elapsed() + Duration::from_secs(3) < secs {
        std::thread::sleep(Duration::from_millis(rng.random_range(300..1_000)));
        // The first two are pauses (of holders, where one holds a name), so that every run
        // has sections that end by their loss; then any.
        let fault = if faults_made < 2 {
            3
        } else {
            rng.random_range(0..4)
        };
        faults_made += 1;
        match (fault, proxies.get(rng.random_range(0..PROXIED))) {
            (0, Some(proxy)) => {
                proxy.stall();
                std::thread::sleep(Duration::from_millis(1_500));
                proxy.pass();
            }
            (1, Some(proxy)) => {
                proxy.delay(Duration::from_millis(rng.random_range(50..400)));
                std::thread::sleep(Duration::from_millis(2_000));
                proxy.pass();
            }
            (2, Some(proxy)) => {
                proxy.cut();
                std::thread::sleep(Duration::from_millis(1_000));
                proxy.pass();
            }
            _ => {
                // A holder, where one holds a name: a pause that lands in a critical section
                // is what can cost a lease, and the overlap the checker looks for.
                let holder = a_holder(&holding(&rt, &*reader), &workers, &mut rng);
                let worker =
                    workers.process(holder.unwrap_or_else(|| rng.random_range(0..PROCESSES)));
                signal(worker, "-STOP");
                // Counted as a pause of a holder where it still holds a name once stopped: its
                // section cannot end meanwhile, and ends by its loss when it resumes.
                holder_pauses += u64::from(holding(&rt, &*reader).contains(&worker.id()));
                std::thread::sleep(Duration::from_millis(1_500));
                signal(worker, "-CONT");
                pauses += 1;
            }
        }
    }
    counts.faults = pauses + proxies.iter().map(|p| p.stats().faults).sum::<u64>();
    // A run too short for a fault (`LEASE_RELIABILITY_HISTORY_SECS` of 3 or less) tested
    // nothing: it fails rather than report a clean history.
    counts.expect(counts.faults > 0, || {
        format!("no fault in {secs:?}: give the run more than 3 s")
    });
    // Each proxied worker really went through its proxy (a driver that moved to a Unix socket
    // would dodge every fault).
    for (i, proxy) in proxies.iter().enumerate() {
        let stats = proxy.stats();
        counts.expect(stats.bytes > 20_000, || {
            format!("worker {i}'s proxy carried only {stats:?}")
        });
    }

    let outcome = workers.finish(&mut counts, secs + Duration::from_secs(30));
    counts.operations += outcome.attempts;
    let verdict = &outcome.verdict;
    counts.expect(verdict.sections >= 10, || {
        format!(
            "only {} critical sections: the history shows little",
            verdict.sections
        )
    });
    outcome.expect_each(&mut counts, SECTIONS_EACH);
    // Evidence that the pauses reached holders: a section ended by its loss, resumed past its
    // deadline, where the overlap the checker looks for could have been.
    counts.expect(holder_pauses < 2 || verdict.lost >= 1, || {
        format!(
            "{holder_pauses} pauses of holders and no critical section ended by its loss: the \
             faults missed the sections"
        )
    });
    eprintln!(
        "{}: {} critical sections ({} ended by loss; {holder_pauses} of {pauses} pauses of a \
         holder) per name {:?}, {} acquisition attempts, {} failed",
        counts.backend,
        verdict.sections,
        verdict.lost,
        verdict.per_name,
        counts.operations,
        outcome.errors
    );
    for (i, member) in outcome.members.iter().enumerate() {
        eprintln!(
            "  worker {i} ({}): {} sections, {} attempts, {} failed",
            member.driver.as_str(),
            member.sections,
            member.attempts,
            member.errors
        );
    }
    // The critical sections are the operations that count here; attempts come with them.
    counts.operations += verdict.sections as u64;
    counts.conclude();
}

#[test]
fn postgres_history() {
    run(Db::Postgres);
}

#[test]
fn mariadb_history() {
    run(Db::MariaDb);
}

#[test]
fn sqlite_history() {
    run(Db::Sqlite);
}
