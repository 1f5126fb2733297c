//! Process paused longer than the TTL: a worker process holds a lease and does numbered steps,
//! each after `is_held()` said yes. The test stops it with `SIGSTOP`, waits past the TTL, takes
//! the lease itself, and continues the worker with `SIGCONT`. On resume the worker must report
//! the loss before any further step: no step read the clock after the pause began, and every
//! step came before the new holder's acquisition. On PostgreSQL, MariaDB and SQLite.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use lease_core::runtime::TokioRuntime;
use lease_core::{LeaseClient, Ttl};
use lease_reliability::db::{Db, remove_sqlite};
use lease_reliability::factory::StoreFactory;
use lease_reliability::reaped::Reaped;
use lease_reliability::report::Counts;
use lease_reliability::scenario::runtime;
use lease_reliability::{Driver, with_driver};
use lease_tests::env;
use lease_tests::history::now;

const WORKER: &str = env!("CARGO_BIN_EXE_lease-reliability-worker");
const NAME: &str = "sweep";
const TTL_MS: u64 = 2_000;
/// How often the worker steps, and how many steps it would do if it never saw the loss: about
/// 33 minutes.
const STEP_MS: u64 = 20;
const STEPS: u64 = 100_000;
/// How long after `SIGCONT` the worker may take to report the loss, release and exit. Its
/// validity ran out during the pause (stopped for more than a TTL), so the first check after
/// it resumes must say lost; then comes one release, bounded by its store timeout (a quarter
/// of the TTL), and the exit. Five TTLs leave room for a loaded machine and stay far below
/// what a worker that never sees its loss would step for (`STEPS` × `STEP_MS`).
const RESUME_LIMIT: Duration = Duration::from_millis(5 * TTL_MS);
/// How long the worker may take to exit once it printed `end`.
const EXIT_LIMIT: Duration = Duration::from_secs(5);
/// How long the stopped worker's threads may take to show as stopped once `kill -STOP` returned.
const STOP_LIMIT: Duration = Duration::from_secs(5);

fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill {signal} {pid} failed");
}

/// How many times [`pause`] stops the worker at most.
const PAUSE_ATTEMPTS: u32 = 20;

/// Stops process `pid` and answers an instant by which it was stopped: read once the `kill
/// -STOP` command returned and, where `/proc` shows it, every thread of the process was seen
/// stopped. A step the worker stamped before that instant may be legitimate (the signal takes
/// effect some time after the command starts); one stamped after it means the worker ran while
/// it should have been paused.
///
/// On SQLite the write lock lives in the writing process: stopped half-way through a write (a
/// renewal), the worker would keep every other writer out of the file until it resumed, and no
/// takeover could happen while it is paused (seen once in CI: the takeover failed with
/// "database is locked"). There, it is let go on for a moment to finish its write and stopped
/// again, until a write could begin while it is stopped. PostgreSQL and MariaDB finish a
/// statement without its client.
async fn pause(db: Db, url: &str, pid: u32) -> u64 {
    for _ in 0..PAUSE_ATTEMPTS {
        signal(pid, "-STOP");
        wait_stopped(pid).await;
        let stopped = now();
        if db != Db::Sqlite || sqlite_writable(url).await {
            return stopped;
        }
        signal(pid, "-CONT");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the worker held SQLite's write lock at each of {PAUSE_ATTEMPTS} stops");
}

/// Waits until every thread of process `pid` is stopped, as `/proc/<pid>/task/*/stat` shows
/// (state `T`, or gone), for at most [`STOP_LIMIT`]. Where there is no `/proc`, it answers at
/// once: the `kill` command has returned, which is as close as it can see.
///
/// # Panics
/// When a thread still runs after [`STOP_LIMIT`].
async fn wait_stopped(pid: u32) {
    let tasks = format!("/proc/{pid}/task");
    let started = Instant::now();
    loop {
        let Ok(entries) = std::fs::read_dir(&tasks) else {
            return;
        };
        let running: Vec<String> = entries
            .flatten()
            .filter_map(|task| {
                let stat = std::fs::read_to_string(task.path().join("stat")).ok()?;
                // `tid (comm) state ...`: the command may hold spaces and parentheses.
                let state = stat.rsplit_once(')')?.1.split_whitespace().next()?;
                (!matches!(state, "T" | "t" | "Z" | "X")).then(|| format!("{stat:.60}"))
            })
            .collect();
        if running.is_empty() {
            return;
        }
        assert!(
            started.elapsed() < STOP_LIMIT,
            "the worker's threads still ran {STOP_LIMIT:?} after kill -STOP: {running:?}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Whether a write can begin on the SQLite database at `url` now: `BEGIN IMMEDIATE` on a
/// connection of its own, set up as a store's but waiting at most 100 ms for the write lock.
async fn sqlite_writable(url: &str) -> bool {
    use lease_sqlx::sqlx::sqlite::SqliteConnectOptions;
    use lease_sqlx::sqlx::{ConnectOptions, Connection, raw_sql};

    let options = SqliteConnectOptions::from_str(url).expect("a SQLite URL");
    let mut connection = lease_sqlx::sqlite_connect_options(options)
        .busy_timeout(Duration::from_millis(100))
        .connect()
        .await
        .expect("the SQLite file opens");
    let began = raw_sql("BEGIN IMMEDIATE")
        .execute(&mut connection)
        .await
        .is_ok();
    if began {
        raw_sql("ROLLBACK")
            .execute(&mut connection)
            .await
            .expect("an empty transaction rolls back");
    }
    let _ = connection.close().await;
    began
}

/// One line of the worker's output: its words, and when the test read it.
struct Line {
    words: Vec<String>,
}

impl Line {
    fn kind(&self) -> &str {
        &self.words[0]
    }

    /// The clock reading at the end of an `acquired`, `step` or `lost` line.
    fn time(&self) -> u64 {
        self.words.last().unwrap().parse().unwrap()
    }
}

async fn paused<F: StoreFactory>(factory: F, driver: &str, url: String) -> Counts {
    let mut counts = Counts::new("process-paused", factory.label());
    let table = env::unique_table("paused");
    let store = factory.connect(&url, &table, 2).await.unwrap();
    factory.setup(&store).await.unwrap();

    let mut child = Reaped(
        Command::new(WORKER)
            .args([
                "mode=pause".to_owned(),
                format!("db={}", factory.db()),
                format!("driver={driver}"),
                format!("url={url}"),
                format!("table={table}"),
                format!("name={NAME}"),
                format!("ttl_ms={TTL_MS}"),
                format!("step_ms={STEP_MS}"),
                format!("steps={STEPS}"),
            ])
            .stdout(Stdio::piped())
            .spawn()
            .expect("the worker starts"),
    );
    let (lines, received) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let words = line.split_whitespace().map(str::to_owned).collect();
            if lines.send(Line { words }).is_err() {
                break;
            }
        }
    });
    let next = |limit: Duration| received.recv_timeout(limit);

    // Running: acquired, then a few steps.
    let acquired = next(Duration::from_secs(30)).expect("the worker acquired");
    assert_eq!(acquired.kind(), "acquired", "{:?}", acquired.words);
    let worker_fence: u64 = acquired.words[1].parse().unwrap();
    let mut log = vec![acquired];
    while log.iter().filter(|l| l.kind() == "step").count() < 25 {
        log.push(next(Duration::from_secs(10)).expect("the worker steps"));
    }

    let stopped = pause(factory.db(), &url, child.id()).await;
    counts.faults += 1;
    tokio::time::sleep(Duration::from_millis(TTL_MS) + Duration::from_secs(1)).await;
    // The lease has expired in the store: another holder takes it.
    let other = LeaseClient::builder(store.clone(), TokioRuntime)
        .ttl(Ttl::from_secs(30).unwrap())
        .build()
        .unwrap();
    let taken_sent = now();
    let taken = other.try_acquire(NAME).await.unwrap();
    counts.operations += 1;
    let Some(taken) = taken else {
        panic!("the lease of the paused worker was not taken over");
    };
    counts.expect(taken.fence().get() > worker_fence, || {
        format!(
            "the new fence {} is not above the worker's {worker_fence}",
            taken.fence()
        )
    });
    let resumed = now();
    let log_at_resume = log.len();
    signal(child.id(), "-CONT");

    // One deadline for everything after the resume, not a limit per line: a worker that never
    // saw its loss would go on stepping, a line every STEP_MS, for half an hour.
    let finish_by = Instant::now() + RESUME_LIMIT;
    let mut ended = false;
    while !ended {
        let left = finish_by.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match received.recv_timeout(left) {
            Ok(line) => {
                ended = line.kind() == "end";
                log.push(line);
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
        }
    }
    let after_resume = log.len() - log_at_resume;
    counts.expect(ended, || {
        let lost = log[log_at_resume..].iter().any(|l| l.kind() == "lost");
        let steps = log[log_at_resume..]
            .iter()
            .filter(|l| l.kind() == "step")
            .count();
        format!(
            "the worker did not end within {RESUME_LIMIT:?} of SIGCONT ({after_resume} lines \
             since, {steps} of them steps, loss reported: {lost}): {}",
            if lost {
                "it reported the loss but did not finish"
            } else {
                "its guard never reported the loss"
            }
        )
    });
    // After its `end` the worker only exits; without one it is killed at once.
    let exit_limit = if ended { EXIT_LIMIT } else { Duration::ZERO };
    let by = Instant::now() + exit_limit;
    match tokio::task::block_in_place(|| child.exit_by(by)) {
        Some(status) => counts.expect(status.success(), || {
            format!("the worker exited with {status}")
        }),
        None if ended => counts.violation(format!(
            "the worker printed `end` but had not exited {EXIT_LIMIT:?} later, and was killed"
        )),
        // The violation above names why.
        None => {}
    }

    let steps: Vec<&Line> = log.iter().filter(|l| l.kind() == "step").collect();
    counts.operations += steps.len() as u64;
    for step in &steps {
        counts.expect(step.time() < stopped, || {
            format!(
                "step {} read the clock {} ms after the pause began",
                step.words[1],
                (step.time() - stopped) / 1_000_000
            )
        });
        counts.expect(step.time() < taken_sent, || {
            format!(
                "step {} came after the new holder's acquisition",
                step.words[1]
            )
        });
    }
    let lost = log.iter().position(|l| l.kind() == "lost");
    counts.expect(lost.is_some(), || {
        "the worker never reported the loss".into()
    });
    if let Some(lost) = lost {
        let steps_after = log[lost..].iter().filter(|l| l.kind() == "step").count();
        counts.expect(steps_after == 0, || {
            format!("{steps_after} steps after the worker reported the loss")
        });
        // A loss before the pause (renewals that failed on a loaded machine) would leave the
        // scenario nothing to show: the pause stopped a worker that no longer held the lease.
        counts.expect(log[lost].time() > resumed, || {
            format!(
                "the worker reported the loss ({}) {} ms before it was resumed: the pause did \
                 not stop a holder",
                log[lost].words[1],
                resumed.saturating_sub(log[lost].time()) / 1_000_000
            )
        });
        eprintln!(
            "{}: paused {} ms, worker reported {} ({} ms after resume)",
            counts.backend,
            (resumed - stopped) / 1_000_000,
            log[lost].words[1],
            log[lost].time().saturating_sub(resumed) / 1_000_000
        );
    }
    taken.release().await.unwrap();
    factory
        .execute(&store, &format!("DROP TABLE {table}"))
        .await
        .unwrap();
    counts
}

fn run(db: Db, driver: Driver) {
    let url = db.shared_url();
    let counts = runtime().block_on(async {
        with_driver!(driver, db, |f| {
            if let Err(error) = f.connect(&url, "unused", 1).await {
                env::skip_or_fail(db.as_str(), &error.to_string());
                return None;
            }
            Some(paused(f, driver.as_str(), url.clone()).await)
        })
    });
    remove_sqlite(&url);
    if let Some(counts) = counts {
        counts.conclude();
    }
}

#[test]
fn postgres_process_paused() {
    run(Db::Postgres, Driver::Sqlx);
}

#[test]
fn postgres_process_paused_diesel() {
    run(Db::Postgres, Driver::Diesel);
}

#[test]
fn mariadb_process_paused() {
    run(Db::MariaDb, Driver::Sqlx);
}

#[test]
fn mariadb_process_paused_diesel() {
    run(Db::MariaDb, Driver::Diesel);
}

#[test]
fn sqlite_process_paused() {
    run(Db::Sqlite, Driver::Sqlx);
}

#[test]
fn sqlite_process_paused_diesel() {
    run(Db::Sqlite, Driver::Diesel);
}

/// The check [`pause`] relies on: no write can begin while another connection holds the write
/// lock, and one can once it is given back.
#[test]
fn a_sqlite_write_cannot_begin_while_another_connection_holds_the_lock() {
    use lease_sqlx::sqlx::sqlite::SqliteConnectOptions;
    use lease_sqlx::sqlx::{ConnectOptions, raw_sql};

    let url = Db::Sqlite.shared_url();
    runtime().block_on(async {
        let options = SqliteConnectOptions::from_str(&url).unwrap();
        let mut holder = lease_sqlx::sqlite_connect_options(options)
            .connect()
            .await
            .unwrap();
        raw_sql("CREATE TABLE t (v INTEGER)")
            .execute(&mut holder)
            .await
            .unwrap();
        assert!(sqlite_writable(&url).await, "nobody writes yet");
        raw_sql("BEGIN IMMEDIATE; INSERT INTO t VALUES (1)")
            .execute(&mut holder)
            .await
            .unwrap();
        assert!(
            !sqlite_writable(&url).await,
            "a write began while another connection held the write lock"
        );
        raw_sql("COMMIT").execute(&mut holder).await.unwrap();
        assert!(sqlite_writable(&url).await, "the write lock was given back");
    });
    remove_sqlite(&url);
}
