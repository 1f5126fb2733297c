//! Where the backends' servers are, and what to do when one is missing.
//!
//! One environment variable per backend names an existing server to test against:
//!
//! | variable | default |
//! |---|---|
//! | `LEASE_TEST_POSTGRES_URL` | `postgres://postgres@127.0.0.1:5432/test` |
//! | `LEASE_TEST_MYSQL_URL` | `mysql://root@127.0.0.1:3306/test` |
//!
//! SQLite needs nothing. A backend that cannot run says so loudly on standard error and its
//! tests pass as skipped, unless `LEASE_TEST_REQUIRE_ALL=1` (as CI sets it): then they fail.

use std::sync::atomic::{AtomicU32, Ordering};

/// The variable that names a PostgreSQL server to test against.
pub const POSTGRES_URL_VAR: &str = "LEASE_TEST_POSTGRES_URL";
/// The variable that names a MySQL or MariaDB server to test against.
pub const MYSQL_URL_VAR: &str = "LEASE_TEST_MYSQL_URL";
/// The variable that turns a skipped backend into a failed test.
pub const REQUIRE_ALL_VAR: &str = "LEASE_TEST_REQUIRE_ALL";

/// The local PostgreSQL server tests use when [`POSTGRES_URL_VAR`] is not set.
pub const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
/// The local MySQL or MariaDB server tests use when [`MYSQL_URL_VAR`] is not set.
pub const DEFAULT_MYSQL_URL: &str = "mysql://root@127.0.0.1:3306/test";

fn var_or(name: &str, default: &str) -> String {
    match std::env::var(name) {
        Ok(value) if !value.trim().is_empty() => value,
        _ => default.to_owned(),
    }
}

/// The PostgreSQL server to test against: [`POSTGRES_URL_VAR`], or [`DEFAULT_POSTGRES_URL`].
pub fn postgres_url() -> String {
    var_or(POSTGRES_URL_VAR, DEFAULT_POSTGRES_URL)
}

/// `url`, a PostgreSQL URL, with its connections' transactions `SERIALIZABLE` by default (the
/// server's `default_transaction_isolation`, set through the URL's `options`, which sqlx and
/// tokio-postgres both read): for the cases that must hold under a snapshot.
///
/// ```
/// let url = lease_tests::env::serializable("postgres://postgres@127.0.0.1:5432/test");
/// assert_eq!(
///     url,
///     "postgres://postgres@127.0.0.1:5432/test?options=-c%20default_transaction_isolation%3Dserializable"
/// );
/// assert!(lease_tests::env::serializable("postgres://h/db?sslmode=disable").contains("disable&options="));
/// ```
pub fn serializable(url: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}options=-c%20default_transaction_isolation%3Dserializable")
}

/// The MySQL or MariaDB server to test against: [`MYSQL_URL_VAR`], or [`DEFAULT_MYSQL_URL`].
pub fn mysql_url() -> String {
    var_or(MYSQL_URL_VAR, DEFAULT_MYSQL_URL)
}

/// Whether every backend must run: [`REQUIRE_ALL_VAR`] set to `1`, `true` or `yes`.
pub fn require_all() -> bool {
    std::env::var(REQUIRE_ALL_VAR).is_ok_and(|value| {
        matches!(
            value.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes"
        )
    })
}

/// Reports that `backend` cannot run here because of `why`: a `SKIPPED` line on standard
/// error, or, under [`REQUIRE_ALL_VAR`], a panic that fails the test.
///
/// ```
/// // In a backend's test, when its server is not there:
/// # let reachable = true;
/// if !reachable {
///     lease_tests::env::skip_or_fail("postgres", "nothing listens on 127.0.0.1:5432");
///     return;
/// }
/// ```
///
/// # Panics
/// When [`require_all`] is true.
pub fn skip_or_fail(backend: &str, why: &str) {
    if require_all() {
        panic!("{backend} cannot run and {REQUIRE_ALL_VAR} is set: {why}");
    }
    report(&format!(
        "SKIPPED {backend}: {why} (set {REQUIRE_ALL_VAR}=1 to make this a failure)"
    ));
}

/// Writes `line` to the process's standard error past the test harness's capture, so it shows
/// in plain `cargo test` output, not only with `--nocapture`: the harness captures what the
/// `print!` and `eprint!` macros write (also from threads a test spawns), but not writes to
/// [`std::io::stderr`] itself.
pub fn report(line: &str) {
    use std::io::Write;
    let mut stderr = std::io::stderr().lock();
    // Nothing to do if standard error is gone; the verdict stands either way.
    let _ = writeln!(stderr, "{line}");
}

/// A table name no other test uses, in this process or another: `prefix`, the process id, a
/// counter and random bits, as a plain lower-case SQL identifier of at most 63 bytes (the
/// PostgreSQL limit) when `prefix` is a plain identifier of at most 24 bytes.
///
/// ```
/// let a = lease_tests::env::unique_table("lease_test");
/// let b = lease_tests::env::unique_table("lease_test");
/// assert_ne!(a, b);
/// assert!(a.starts_with("lease_test_"));
/// assert!(a.len() <= 63);
/// ```
pub fn unique_table(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let random: u32 = rand::random();
    format!(
        "{prefix}_{pid}_{count}_{random:08x}",
        pid = std::process::id()
    )
}
