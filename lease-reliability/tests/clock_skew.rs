//! Client clocks skewed: the whole conformance suite, for each SQL backend through both
//! drivers, passes with this process's wall clock hours ahead and hours behind.
//!
//! The suites below are ignored in a plain run; the two drivers at the bottom run this same
//! test binary again with `--ignored` under libfaketime (`LD_PRELOAD`), with `FAKETIME` set to
//! `+5h` and `-5h` and `DONT_FAKE_MONOTONIC=1`, so only the wall clock moves: that is the
//! scenario, an application host whose clock is wrong. The monotonic clock, which deadlines and
//! timers run on, is not a wall clock and is left alone. The databases run in their own
//! processes and keep their own clocks, so the store's clock and the client's disagree by five
//! hours. SQLite is the exception: its clock is the process's, skewed with it, so there the run
//! shows that nothing in the client reads the wall clock at all.
//!
//! libfaketime is found through `LEASE_TEST_LIBFAKETIME`, or in the usual library directories;
//! scripts/test installs it (Debian's `libfaketime`). Without it the drivers are skipped, or
//! fail under `LEASE_TEST_REQUIRE_ALL=1`.
//!
//! A database the skewed run cannot reach skips its suites' cases, which pass in the child run:
//! the drivers count them from its `SKIPPED` lines, say so in a `SKIPPED` line of their own and
//! in the RELIABILITY line, and fail under `LEASE_TEST_REQUIRE_ALL=1`. Only the cases that
//! really ran (passed, neither skipped nor not applicable) are counted as operations and
//! towards the floor of each suite.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lease_diesel::AsyncSqliteConnection;
use lease_diesel::diesel_async::{AsyncMysqlConnection, AsyncPgConnection};
use lease_reliability::backend::FactoryBackend;
use lease_reliability::diesel::Diesel;
use lease_reliability::factory::{Sqlx, StoreFactory};
use lease_reliability::report::Counts;
use lease_sqlx::sqlx::{MySql, Postgres, Sqlite};
use lease_tests::env;

lease_tests::conformance_suite!(
    #[ignore = "run under libfaketime by the clock-skew drivers"]
    mod skewed_postgres,
    runtime = tokio,
    backend = FactoryBackend::new(Sqlx::<Postgres>::new()),
);
lease_tests::conformance_suite!(
    #[ignore = "run under libfaketime by the clock-skew drivers"]
    mod skewed_mariadb,
    runtime = tokio,
    backend = FactoryBackend::new(Sqlx::<MySql>::new()),
);
lease_tests::conformance_suite!(
    #[ignore = "run under libfaketime by the clock-skew drivers"]
    mod skewed_sqlite,
    runtime = tokio,
    backend = FactoryBackend::new(Sqlx::<Sqlite>::new()),
);
lease_tests::conformance_suite!(
    #[ignore = "run under libfaketime by the clock-skew drivers"]
    mod skewed_diesel_postgres,
    runtime = tokio,
    backend = FactoryBackend::new(Diesel::<AsyncPgConnection>::new()),
);
lease_tests::conformance_suite!(
    #[ignore = "run under libfaketime by the clock-skew drivers"]
    mod skewed_diesel_mariadb,
    runtime = tokio,
    backend = FactoryBackend::new(Diesel::<AsyncMysqlConnection>::new()),
);
lease_tests::conformance_suite!(
    #[ignore = "run under libfaketime by the clock-skew drivers"]
    mod skewed_diesel_sqlite,
    runtime = tokio,
    backend = FactoryBackend::new(Diesel::<AsyncSqliteConnection>::new()),
);

const EXPECT_VAR: &str = "LEASE_SKEW_EXPECT_SECS";
const REFERENCE_VAR: &str = "LEASE_SKEW_REFERENCE_UNIX";

fn unix_now() -> i64 {
    let now = SystemTime::now();
    match now.duration_since(UNIX_EPOCH) {
        Ok(since) => i64::try_from(since.as_secs()).unwrap(),
        Err(before) => -i64::try_from(before.duration().as_secs()).unwrap(),
    }
}

/// Proves the skew took hold in the run it is part of: the wall clock is off the driver's by
/// the offset asked for.
#[test]
#[ignore = "run under libfaketime by the clock-skew drivers"]
fn skewed_wall_clock_is_off() {
    let expect: i64 = std::env::var(EXPECT_VAR).unwrap().parse().unwrap();
    let reference: i64 = std::env::var(REFERENCE_VAR).unwrap().parse().unwrap();
    let off = unix_now() - reference;
    assert!(
        (off - expect).abs() < 600,
        "the wall clock is {off} s off the driver's, not {expect} s"
    );
}

/// The preload library, if installed.
fn libfaketime() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("LEASE_TEST_LIBFAKETIME") {
        return Some(PathBuf::from(path));
    }
    let mut dirs = vec![
        PathBuf::from("/usr/lib/faketime"),
        PathBuf::from("/usr/local/lib/faketime"),
        PathBuf::from("/usr/lib64/faketime"),
    ];
    // Debian and Ubuntu: /usr/lib/<multiarch triplet>/faketime.
    if let Ok(entries) = std::fs::read_dir("/usr/lib") {
        dirs.extend(entries.flatten().map(|e| e.path().join("faketime")));
    }
    dirs.into_iter()
        .map(|dir| dir.join("libfaketime.so.1"))
        .find(|lib| lib.is_file())
}

/// The skewed suites: the prefix of their tests' names, and the backend their `SKIPPED` and
/// `NOT APPLICABLE` lines name.
fn suites() -> [(&'static str, String); 6] {
    [
        ("skewed_postgres::", Sqlx::<Postgres>::new().label()),
        ("skewed_mariadb::", Sqlx::<MySql>::new().label()),
        ("skewed_sqlite::", Sqlx::<Sqlite>::new().label()),
        (
            "skewed_diesel_postgres::",
            Diesel::<AsyncPgConnection>::new().label(),
        ),
        (
            "skewed_diesel_mariadb::",
            Diesel::<AsyncMysqlConnection>::new().label(),
        ),
        (
            "skewed_diesel_sqlite::",
            Diesel::<AsyncSqliteConnection>::new().label(),
        ),
    ]
}

/// The probe's test, which must pass in every skewed run.
const PROBE: &str = "skewed_wall_clock_is_off";

/// At least this many cases of a suite must really run (pass, neither skipped nor not
/// applicable) unless its backend was skipped: every suite ran 31 of the suite's 42 cases (11
/// not applicable to the stores the skewed run builds) when this was last set. Fewer means
/// tests were filtered away, or a store lost a capability; raise it as the suite grows.
const CASES_AT_LEAST: u64 = 31;

/// What the skewed run did with one suite.
#[derive(Debug, Default)]
struct Suite {
    /// Tests that passed, including the skipped and not applicable cases (they pass too).
    passed: u64,
    /// Cases skipped because the backend could not run, and the first reason given.
    skipped: u64,
    why: Option<String>,
    /// Cases that do not apply to the backend.
    not_applicable: u64,
}

impl Suite {
    /// The cases that really ran: passed, and neither skipped nor not applicable.
    fn ran(&self) -> u64 {
        self.passed
            .saturating_sub(self.skipped)
            .saturating_sub(self.not_applicable)
    }
}

/// How long one skewed run of the suite may take before it is killed and the test fails.
const SKEWED_WITHIN: Duration = Duration::from_secs(300);

/// `command`'s output, or a failure naming `offset` when it has not exited within `limit`
/// (then it is killed): a case that hangs under a skewed clock fails the test, not CI.
fn output_within(mut command: Command, limit: Duration, offset: &str) -> std::process::Output {
    let child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            panic!("the suite under the clock offset {offset} still ran after {limit:?}: killed");
        }
    }
}

fn skewed(offset: &str, expect_secs: i64) {
    let Some(lib) = libfaketime() else {
        return env::skip_or_fail(
            "libfaketime",
            "libfaketime.so.1 not found: install libfaketime or set LEASE_TEST_LIBFAKETIME",
        );
    };
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "--ignored",
            "--test-threads=6",
            "--format=pretty",
            "skewed_",
        ])
        .env("LD_PRELOAD", &lib)
        .env("FAKETIME", offset)
        .env("DONT_FAKE_MONOTONIC", "1")
        .env(EXPECT_VAR, expect_secs.to_string())
        .env(REFERENCE_VAR, unix_now().to_string())
        // A backend that cannot run is judged here, as `env::skip_or_fail` would (a failure under
        // LEASE_TEST_REQUIRE_ALL, else a loud skip): the child only reports it, with a SKIPPED
        // line per case on its standard error, so that every skip is counted and named.
        .env_remove(env::REQUIRE_ALL_VAR);
    let output = output_within(command, SKEWED_WITHIN, offset);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // `test result: ok. 49 passed; 0 failed; 0 ignored; ...`
    let summary = stdout
        .lines()
        .find(|line| line.starts_with("test result:"))
        .unwrap_or_default()
        .to_owned();
    let number = |word: &str| {
        summary
            .split(';')
            .find_map(|part| part.trim().strip_suffix(word))
            .and_then(|n| n.trim().rsplit(' ').next()?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let failed = number("failed");

    // Per suite: `test skewed_postgres::case ... ok` on standard output; `SKIPPED postgres/sqlx:
    // why (...)` and `NOT APPLICABLE postgres/sqlx::case: why` on standard error.
    let suites = suites();
    let mut runs: Vec<Suite> = suites.iter().map(|_| Suite::default()).collect();
    let passed_tests: Vec<&str> = stdout
        .lines()
        .filter_map(|line| line.strip_prefix("test ")?.strip_suffix(" ... ok"))
        .collect();
    for ((prefix, _), run) in suites.iter().zip(&mut runs) {
        run.passed = passed_tests
            .iter()
            .filter(|t| t.starts_with(prefix))
            .count() as u64;
    }
    let probe_passed = passed_tests.contains(&PROBE);
    let mut other_skips = Vec::new();
    let hint = format!(" (set {}=1 to make this a failure)", env::REQUIRE_ALL_VAR);
    for line in stderr.lines() {
        if let Some((backend, why)) = line
            .strip_prefix("SKIPPED ")
            .and_then(|rest| rest.split_once(": "))
        {
            let why = why.strip_suffix(&hint).unwrap_or(why);
            match suites.iter().position(|(_, label)| label == backend) {
                Some(i) => {
                    runs[i].skipped += 1;
                    runs[i].why.get_or_insert_with(|| why.to_owned());
                }
                // Not a suite's backend: skipped all the same.
                None => other_skips.push(format!("{backend}: {why}")),
            }
        } else if let Some(rest) = line.strip_prefix("NOT APPLICABLE ")
            && let Some(i) = suites
                .iter()
                .position(|(_, label)| rest.starts_with(&format!("{label}::")))
        {
            runs[i].not_applicable += 1;
        }
    }
    let ran: u64 = runs.iter().map(Suite::ran).sum::<u64>() + u64::from(probe_passed);
    let skipped: u64 = runs.iter().map(|run| run.skipped).sum::<u64>() + other_skips.len() as u64;
    let skipped_backends: Vec<&str> = suites
        .iter()
        .zip(&runs)
        .filter(|(_, run)| run.skipped > 0)
        .map(|((_, label), _)| label.as_str())
        .chain(other_skips.iter().filter_map(|s| s.split(": ").next()))
        .collect();

    let all = "postgres,mariadb,sqlite/sqlx+diesel";
    // The summary line shows a skip as loudly as the lines above it: the backend column names
    // what did not run.
    let backend = if skipped == 0 {
        all.to_owned()
    } else {
        format!(
            "{all} (SKIPPED {skipped} cases: {})",
            skipped_backends.join(", ")
        )
    };
    let mut counts = Counts::new(format!("clock-skew{offset}"), backend);
    counts.operations = ran + failed;
    counts.faults = 1;
    for ((prefix, label), run) in suites.iter().zip(&runs) {
        eprintln!(
            "clock-skew{offset} {label}: {} cases ran, {} not applicable, {} skipped",
            run.ran(),
            run.not_applicable,
            run.skipped
        );
        if run.skipped > 0 {
            // As `env::skip_or_fail`: a failure under LEASE_TEST_REQUIRE_ALL, else a SKIPPED
            // line past the test harness's capture, so that plain `cargo test` shows it.
            let why = run.why.as_deref().unwrap_or_default();
            if env::require_all() {
                counts.violation(format!(
                    "{label} cannot run and {} is set: {} cases of {prefix} skipped with the wall \
                     clock {offset}: {why}",
                    env::REQUIRE_ALL_VAR,
                    run.skipped
                ));
            } else {
                env::report(&format!(
                    "SKIPPED clock-skew{offset} {label}: {} of its {} cases did not run: \
                     {why}{hint}",
                    run.skipped, run.passed
                ));
            }
        } else {
            // Only the cases that really ran count: a skipped case passes too.
            counts.expect(run.ran() >= CASES_AT_LEAST, || {
                format!(
                    "only {} cases of {prefix} ran with the wall clock {offset} ({} passed, {} \
                     not applicable), fewer than {CASES_AT_LEAST}: tests were filtered away",
                    run.ran(),
                    run.passed,
                    run.not_applicable
                )
            });
        }
    }
    for skip in &other_skips {
        if env::require_all() {
            counts.violation(format!(
                "{skip}: skipped with the wall clock {offset} while {} is set",
                env::REQUIRE_ALL_VAR
            ));
        } else {
            env::report(&format!("SKIPPED clock-skew{offset} {skip}{hint}"));
        }
    }
    counts.expect(probe_passed, || {
        format!("the probe {PROBE} did not pass with the wall clock {offset}: {summary}")
    });
    counts.expect(output.status.success() && failed == 0, || {
        format!("the suites failed with the wall clock {offset}:\n{stdout}\n{stderr}")
    });
    counts.conclude();
}

#[test]
fn conformance_passes_with_the_wall_clock_five_hours_ahead() {
    skewed("+5h", 5 * 3600);
}

#[test]
fn conformance_passes_with_the_wall_clock_five_hours_behind() {
    skewed("-5h", -5 * 3600);
}
