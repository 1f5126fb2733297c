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

use std::path::PathBuf;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use lease_diesel::AsyncSqliteConnection;
use lease_diesel::diesel_async::{AsyncMysqlConnection, AsyncPgConnection};
use lease_reliability::backend::FactoryBackend;
use lease_reliability::diesel::Diesel;
use lease_reliability::factory::Sqlx;
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

fn skewed(offset: &str, expect_secs: i64) {
    let Some(lib) = libfaketime() else {
        return env::skip_or_fail(
            "libfaketime",
            "libfaketime.so.1 not found: install libfaketime or set LEASE_TEST_LIBFAKETIME",
        );
    };
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--test-threads=6", "skewed_"])
        .env("LD_PRELOAD", &lib)
        .env("FAKETIME", offset)
        .env("DONT_FAKE_MONOTONIC", "1")
        .env(EXPECT_VAR, expect_secs.to_string())
        .env(REFERENCE_VAR, unix_now().to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
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
    let (passed, failed) = (number("passed"), number("failed"));
    let mut counts = Counts::new(
        format!("clock-skew{offset}"),
        "postgres,mariadb,sqlite/sqlx+diesel",
    );
    counts.operations = passed + failed;
    counts.faults = 1;
    counts.expect(output.status.success() && failed == 0, || {
        format!(
            "the suites failed with the wall clock {offset}:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    // Six suites (three databases, two drivers) of at least the sixteen cases, and the probe:
    // nothing was filtered away.
    const AT_LEAST: u64 = 6 * 16 + 1;
    counts.expect(passed >= AT_LEAST, || {
        format!("only {passed} tests ran with the wall clock {offset}: {summary}")
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
