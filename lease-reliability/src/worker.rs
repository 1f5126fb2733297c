//! The worker program the multi-process scenarios start (`lease-reliability-worker`): a lease
//! holder in a process of its own, so a test can pause it with `SIGSTOP` or run several at once.
//!
//! Arguments are `key=value` pairs; `mode=pause`, `mode=history` or `mode=fenced` picks what it
//! does, `db=`
//! the database and `driver=` (`sqlx` or `diesel`) the store. Every
//! line it prints on standard output is one event, with times from
//! [`lease_tests::history::now`] (shared by every process of the machine).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lease_core::runtime::TokioRuntime;
use lease_core::{BoxError, ErrorChain, LeaseClient, LeaseGuard, Ttl};
use lease_sqlx::CheckAt;
use lease_tests::history::{self, Ending, HistoryLog, Section};
use rand::RngExt;

use crate::factory::StoreFactory;
use crate::fenced::{self, FencedWrites, Protected};

/// The worker's arguments, `key=value` each.
#[derive(Debug, Clone, Default)]
pub struct Args(HashMap<String, String>);

impl Args {
    /// Reads `key=value` pairs.
    ///
    /// # Errors
    /// When an argument has no `=`.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, String> {
        let mut map = HashMap::new();
        for arg in args {
            let (key, value) = arg
                .split_once('=')
                .ok_or_else(|| format!("argument {arg:?} is not key=value"))?;
            map.insert(key.to_owned(), value.to_owned());
        }
        Ok(Self(map))
    }

    /// The value of `key`.
    ///
    /// # Errors
    /// When it is missing.
    pub fn get(&self, key: &str) -> Result<&str, String> {
        self.0
            .get(key)
            .map(String::as_str)
            .ok_or_else(|| format!("missing argument {key}="))
    }

    /// The value of `key` as a number.
    ///
    /// # Errors
    /// When it is missing or not a number.
    pub fn number(&self, key: &str) -> Result<u64, String> {
        let value = self.get(key)?;
        value.parse().map_err(|e| format!("{key}={value}: {e}"))
    }
}

/// A client for a worker: `ttl_ms` from the arguments, renewal every quarter, the default
/// margin (a tenth), and a store timeout of a quarter.
fn client<S: lease_core::LeaseStore>(store: S, ttl_ms: u64) -> Result<LeaseClient, BoxError> {
    let ttl = Ttl::from_millis(ttl_ms)?;
    Ok(LeaseClient::builder(store, TokioRuntime)
        .ttl(ttl)
        .renew_every(ttl.get() / 4)
        .store_timeout(ttl.get() / 4)
        .build()?)
}

/// `mode=pause`: takes the lease `name=` on `table=` at `url=` with `ttl_ms=`, then does
/// numbered steps every `step_ms=` until `steps=` are done, each only after `is_held()` said
/// yes. Prints `acquired <fence> <t>`, `step <n> <t>` (t read just before the check that
/// allowed it), and on loss `lost <reason> <t>`, then `end`.
///
/// # Errors
/// When the store cannot be reached or the lease is held elsewhere.
pub async fn pause<F: StoreFactory>(factory: F, args: &Args) -> Result<(), BoxError> {
    let store = factory
        .connect(args.get("url")?, args.get("table")?, 2)
        .await?;
    let client = client(store, args.number("ttl_ms")?)?;
    let guard = client
        .try_acquire(args.get("name")?)
        .await?
        .ok_or("the lease is held elsewhere")?;
    println!("acquired {} {}", guard.fence(), history::now());
    let step = Duration::from_millis(args.number("step_ms")?);
    for n in 0..args.number("steps")? {
        let t = history::now();
        if !guard.is_held() {
            // Which way it was lost: `lost()` is ready at once for a lost lease. Its time is
            // read again: a pause that fell between the step's clock and its check would
            // otherwise date the loss before the pause.
            let reason = guard.lost().await;
            println!("lost {reason:?} {}", history::now());
            break;
        }
        println!("step {n} {t}");
        tokio::time::sleep(step).await;
    }
    // The outcome of the release does not matter here: the parent reads the steps.
    let _ = guard.release().await;
    println!("end");
    Ok(())
}

/// `mode=history`: `tasks=` tasks contend for the names in `names=` (comma-separated) on
/// `table=` at `url=` with `ttl_ms=` for `secs=` seconds. Each critical section does steps of
/// 20 ms for 100 to 600 ms, each after `is_held()` said yes, and is appended to `out=` as a
/// [`Section`] of worker `worker=`. Prints `stats attempts=<n> sections=<n> errors=<n>` at the end.
///
/// # Errors
/// When the store cannot be reached at the start or the log cannot be written.
pub async fn history<F: StoreFactory>(factory: F, args: &Args) -> Result<(), BoxError> {
    let store = factory
        .connect(args.get("url")?, args.get("table")?, 4)
        .await?;
    let client = client(store, args.number("ttl_ms")?)?;
    let names: Arc<Vec<String>> =
        Arc::new(args.get("names")?.split(',').map(str::to_owned).collect());
    let log = Arc::new(HistoryLog::append_to(&PathBuf::from(args.get("out")?))?);
    let worker = args.get("worker")?.to_owned();
    let until = tokio::time::Instant::now() + Duration::from_secs(args.number("secs")?);
    let counts = Arc::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]);
    let mut tasks = Vec::new();
    for task in 0..args.number("tasks")? {
        let (client, names, log, counts) = (
            client.clone(),
            Arc::clone(&names),
            Arc::clone(&log),
            Arc::clone(&counts),
        );
        let worker = format!("{worker}/{task}");
        tasks.push(tokio::spawn(async move {
            while tokio::time::Instant::now() < until {
                let name = &names[rand::rng().random_range(0..names.len())];
                counts[0].fetch_add(1, Ordering::Relaxed);
                match client.try_acquire(name.as_str()).await {
                    Ok(Some(guard)) => {
                        if let Some(section) = critical_section(guard, &worker).await {
                            counts[1].fetch_add(1, Ordering::Relaxed);
                            log.record(&section)?;
                        }
                    }
                    Ok(None) => {}
                    // Faults make calls fail; that is what the scenario is for.
                    Err(_) => {
                        counts[2].fetch_add(1, Ordering::Relaxed);
                    }
                }
                let pause = rand::rng().random_range(0..50);
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
            Ok::<(), std::io::Error>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    println!(
        "stats attempts={} sections={} errors={}",
        counts[0].load(Ordering::Relaxed),
        counts[1].load(Ordering::Relaxed),
        counts[2].load(Ordering::Relaxed)
    );
    Ok(())
}

/// Works under `guard` in steps, each after `is_held()` said yes, and returns the section as
/// this process believed it (see [`lease_tests::history`]); `None` when it never did.
async fn critical_section(guard: LeaseGuard, worker: &str) -> Option<Section> {
    let work = Duration::from_millis(rand::rng().random_range(100..600));
    let began = tokio::time::Instant::now();
    let mut believed: Option<(u64, u64)> = None;
    let ending = loop {
        let t = history::now();
        if !guard.is_held() {
            // This process believed it held the lease until its local deadline, whenever this
            // check came: a section lost to its deadline ends there, not at the last check
            // that said yes (20 ms or a stall earlier), so that an overlap shorter than the
            // gap between two checks is found too.
            //
            // The deadline is an `Instant`; it is carried over to the history's clock by how
            // long ago it passed, from two readings taken back to back, the `Instant` first.
            // Both are `CLOCK_MONOTONIC`, so the history's reading is the later by the gap
            // between them, and the end comes out that much later than the deadline, never
            // earlier: a believed interval may grow by the gap, never shrink. (`t`, read
            // before the check, would make it shrink by the check's time and more.)
            let instant = std::time::Instant::now();
            let now = history::now();
            let past = instant.saturating_duration_since(guard.deadline());
            let until = now.saturating_sub(u64::try_from(past.as_nanos()).unwrap_or(u64::MAX));
            believed = believed.map(|(start, end)| (start, end.max(until)));
            break Ending::Lost;
        }
        believed = Some(believed.map_or((t, t), |(start, _)| (start, t)));
        if began.elapsed() >= work {
            break Ending::Released;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let (name, fence, holder) = (
        guard.name().as_str().to_owned(),
        guard.fence().get(),
        guard.holder().as_str().to_owned(),
    );
    // A release after a loss answers `Lost`; the section ended at its last check, or at the
    // deadline after it.
    let _ = guard.release().await;
    let (start, end) = believed?;
    Some(Section {
        name: name.escape_default().to_string(),
        fence,
        holder,
        worker: worker.to_owned(),
        start,
        end,
        ending,
    })
}

/// How long one write may take before the worker gives up (and fails): longer than any fault
/// a scenario injects.
const WRITE_LIMIT: Duration = Duration::from_secs(15);

/// How long the read of the counter after an acquisition may take: it waits for no lock, so
/// only a fault holds it up.
const COMMITTED_LIMIT: Duration = Duration::from_secs(2);

/// `mode=fenced`: for `secs=` seconds, takes the lease `name=` on `table=` at `url=` with
/// `ttl_ms=` whenever it can, and while holding it writes to the [`Protected`] tables
/// `protected=` every `step_ms=`, each write in a transaction of its own that begins with the
/// fenced check when `checked=1` (with the commit on PostgreSQL and MariaDB) or `checked=2`
/// (with the `BEGIN`) and goes without it when `checked=0`. Each write comes
/// *before* the worker looks at `is_held()`: a holder resumed after a pause writes first, as
/// work that was already past its check would. A line `stop` on standard input makes it stop
/// itself with `SIGSTOP` (printing `stopping`) just before its next write or acquisition, so
/// that the pause lands between two transactions and never inside one. Prints `acquired <fence>
/// <after>` (`after`: the counter's committed value read right after the acquisition, `-`
/// where that read failed; see `fenced::Taken`), `wrote <seq>
/// <fence>` after each commit, `refused <fence> check` when the database's check refused a
/// write (`refused <fence> guard` when the guard knew the lease lost before it), `failed
/// <error>` when a call failed otherwise, then `stats
/// writes=<n> refused=<n> errors=<n> acquisitions=<n> checks_passed=<n> checks_not_held=<n>
/// checks_failed=<n> checks_unknown=<n>` (the last four as the client counted its fenced
/// checks) and `end`.
///
/// # Errors
/// When the store cannot be reached at the start, or a write took longer than 15 s.
pub async fn fenced<F: StoreFactory + FencedWrites>(
    factory: F,
    args: &Args,
) -> Result<(), BoxError> {
    let store = factory
        .connect(args.get("url")?, args.get("table")?, 3)
        .await?;
    let client = client(store.clone(), args.number("ttl_ms")?)?;
    let name = args.get("name")?;
    let protected = Protected::new(args.get("protected")?);
    let checked = match args.number("checked")? {
        0 => None,
        1 => Some(CheckAt::Commit),
        2 => Some(CheckAt::Begin),
        n => return Err(format!("checked={n}: 0, 1 or 2").into()),
    };
    let worker = args.get("worker")?;
    let step = Duration::from_millis(args.number("step_ms")?);
    let until = tokio::time::Instant::now() + Duration::from_secs(args.number("secs")?);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let asked = Arc::clone(&stop);
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            match line {
                Ok(line) if line.trim() == "stop" => asked.store(true, Ordering::SeqCst),
                Ok(_) => {}
                Err(_) => break,
            }
        }
    });
    let (mut writes, mut refused, mut errors, mut acquisitions) = (0u64, 0u64, 0u64, 0u64);
    // Writes that committed although a check during them found the lease gone: the client's
    // own count says so, one write at a time on this client.
    let mut committed_not_held = 0u64;
    while tokio::time::Instant::now() < until {
        stop_if_asked(&stop)?;
        let guard = match client.try_acquire(name).await {
            Ok(Some(guard)) => guard,
            Ok(None) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            // Faults make calls fail; that is what the scenario is for.
            Err(error) => {
                errors += 1;
                println!("failed {}", one_line(&ErrorChain(&error).to_string()));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        acquisitions += 1;
        // Where commit order stood right after the acquisition (`fenced::Taken`); `-` when the
        // read failed or did not answer in time (a fault), which leaves the rule unasked for
        // this acquisition.
        let committed =
            tokio::time::timeout(COMMITTED_LIMIT, factory.committed(&store, &protected)).await;
        let after = match committed {
            Ok(Ok(after)) => after.to_string(),
            Ok(Err(error)) => {
                errors += 1;
                println!("failed {}", one_line(&ErrorChain(&*error).to_string()));
                "-".to_owned()
            }
            Err(_) => "-".to_owned(),
        };
        println!("acquired {} {after}", guard.fence());
        while tokio::time::Instant::now() < until {
            stop_if_asked(&stop)?;
            let not_held = client.stats().fenced_checks.not_held;
            let write = factory.write(&store, guard.as_ref(), checked, &protected, worker);
            match tokio::time::timeout(WRITE_LIMIT, write).await {
                Err(_) => return Err(format!("a write took longer than {WRITE_LIMIT:?}").into()),
                Ok(Ok(seq)) => {
                    writes += 1;
                    if client.stats().fenced_checks.not_held > not_held {
                        committed_not_held += 1;
                    }
                    println!("wrote {seq} {}", guard.fence());
                }
                Ok(Err(error)) if fenced::is_refusal(&error) => {
                    refused += 1;
                    // The database's check found the lease gone, or the guard knew it already.
                    let by = if client.stats().fenced_checks.not_held > not_held {
                        "check"
                    } else {
                        "guard"
                    };
                    println!("refused {} {by}", guard.fence());
                    break;
                }
                Ok(Err(error)) => {
                    errors += 1;
                    println!("failed {}", one_line(&ErrorChain(&*error).to_string()));
                }
            }
            if !guard.is_held() {
                break;
            }
            tokio::time::sleep(step).await;
        }
        // A release after a loss answers `Lost`; the history is in the table.
        let _ = guard.release().await;
    }
    // What the client counted of the checks, for the scenario to hold against what it saw.
    let checks = client.stats().fenced_checks;
    println!(
        "stats writes={writes} refused={refused} errors={errors} acquisitions={acquisitions} \
         committed_not_held={committed_not_held} checks_passed={} checks_not_held={} \
         checks_failed={} checks_unknown={}",
        checks.passed, checks.not_held, checks.failed, checks.unknown
    );
    println!("end");
    Ok(())
}

/// Stops this process with `SIGSTOP` when the scenario asked for it; returns once continued.
fn stop_if_asked(stop: &std::sync::atomic::AtomicBool) -> std::io::Result<()> {
    if stop.swap(false, Ordering::SeqCst) {
        println!("stopping");
        let me = rustix::process::getpid();
        rustix::process::kill_process(me, rustix::process::Signal::STOP)?;
    }
    Ok(())
}

/// `text` on one line, for the worker's line-per-event output.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
