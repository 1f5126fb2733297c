//! `leasectl` run as a user runs it, against SQLite (always), the local PostgreSQL and MariaDB
//! (`LEASE_TEST_POSTGRES_URL`, `LEASE_TEST_MYSQL_URL`; skipped loudly when not there, failed under
//! `LEASE_TEST_REQUIRE_ALL=1`): its output and its exit codes. Listing, showing, releasing,
//! `check` (on a fitting table and on the story's) and `prune` run on every database.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use lease_core::{DynLeaseStore, HolderId, LeaseName, LeaseStore, Ttl};
use lease_sqlx::sqlx::mysql::MySqlPoolOptions;
use lease_sqlx::sqlx::postgres::PgPoolOptions;
use lease_sqlx::sqlx::{self, Executor};
use lease_sqlx::{Execute, MySqlLeaseStore, PgLeaseStore, SqlStore, SqliteLeaseStore};
use lease_tests::env;

/// What one run of the tool did.
#[derive(Debug)]
struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
}

fn leasectl(args: &[&str]) -> Outcome {
    leasectl_with_env(args, &[])
}

/// Runs the tool with `args` and only the variables `vars` of its own (the caller's
/// `DATABASE_URL` and `LEASE_TABLE` are not passed on).
fn leasectl_with_env(args: &[&str], vars: &[(&str, &str)]) -> Outcome {
    let output = Command::new(env!("CARGO_BIN_EXE_leasectl"))
        .args(args)
        .env_remove("DATABASE_URL")
        .env_remove("LEASE_TABLE")
        .envs(vars.iter().copied())
        .output()
        .expect("leasectl runs");
    Outcome {
        code: output.status.code().expect("leasectl exits"),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// `--database-url url`, then `--table table` when given, then the command.
fn run(url: &str, table: Option<&str>, command: &[&str]) -> Outcome {
    let mut args = vec!["--database-url", url];
    if let Some(table) = table {
        args.extend(["--table", table]);
    }
    args.extend(command);
    leasectl(&args)
}

/// A time as leasectl prints it, `2026-11-30T12:19:23.123Z`.
fn parse_rfc3339(text: &str) -> std::time::SystemTime {
    let number = |range: std::ops::Range<usize>| -> i64 { text[range].parse().expect(text) };
    let (year, month, day) = (number(0..4), number(5..7), number(8..10));
    let (hour, minute, second, milli) = (
        number(11..13),
        number(14..16),
        number(17..19),
        number(20..23),
    );
    assert!(text.ends_with('Z') && text.len() == 24, "{text}");
    // Howard Hinnant's days_from_civil.
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    let millis = ((days * 86_400 + hour * 3600 + minute * 60 + second) * 1000) + milli;
    std::time::UNIX_EPOCH + Duration::from_millis(u64::try_from(millis).expect("after 1970"))
}

fn name(name: &str) -> LeaseName {
    LeaseName::new(name).unwrap()
}

/// Takes three leases (two held, one expired), then lists, shows and releases them through the
/// tool, checking each answer against the store.
async fn exercise(store: Arc<DynLeaseStore>, url: &str, table: Option<&str>) {
    let table_name = table.unwrap_or("leases");
    let (sweeper, alerter, crashed) = (
        HolderId::generate(),
        HolderId::generate(),
        HolderId::generate(),
    );
    let minute = Ttl::from_secs(60).unwrap();
    let sweep = store
        .try_acquire(&name("sweep"), &sweeper, minute)
        .await
        .unwrap()
        .expect("sweep is free");
    store
        .try_acquire(&name("alerts"), &alerter, minute)
        .await
        .unwrap()
        .expect("alerts is free");
    store
        .try_acquire(
            &name("uptime:node-a"),
            &crashed,
            Ttl::from_millis(1).unwrap(),
        )
        .await
        .unwrap()
        .expect("uptime:node-a is free");
    tokio::time::sleep(Duration::from_millis(50)).await;

    let list = run(url, table, &["list"]);
    assert_eq!(list.code, 0, "{list:?}");
    let lines: Vec<&str> = list.stdout.lines().collect();
    assert!(lines[0].starts_with("NAME"), "{list:?}");
    assert!(lines[0].ends_with("EXPIRES IN"), "{list:?}");
    // Ordered by name, holder and fence on each line, times in RFC 3339 UTC.
    assert!(lines[1].starts_with("alerts "), "{list:?}");
    assert!(lines[1].contains(alerter.as_str()), "{list:?}");
    assert!(lines[2].starts_with("sweep "), "{list:?}");
    assert!(lines[2].contains(sweeper.as_str()), "{list:?}");
    assert!(
        lines[2].contains(&format!("  {}  ", sweep.get())),
        "{list:?}"
    );
    assert!(lines[2].contains("Z  "), "{list:?}");
    // "expires in" is the row's expiry less the time of reading, both as printed: exact up to
    // the printed milliseconds, which can move it only when within a millisecond of a tenth.
    let read_at = lines[4]
        .split(", read at ")
        .nth(1)
        .and_then(|rest| rest.strip_suffix(" (database time)"))
        .expect("the read time");
    let columns: Vec<&str> = lines[2]
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    let [.., expires_at, expires_in] = columns[..] else {
        panic!("{list:?}")
    };
    let left = parse_rfc3339(expires_at)
        .duration_since(parse_rfc3339(read_at))
        .expect("a minute's lease read at once has not expired");
    let millisecond = Duration::from_millis(1);
    let expected: Vec<String> = [left - millisecond, left, left + millisecond]
        .into_iter()
        .map(|left| format!("{:.1}s", left.as_secs_f64()))
        .collect();
    assert!(
        expected.iter().any(|text| text == expires_in),
        "expires in {expires_in:?}, expected {:?} from {expires_at} less {read_at}: {list:?}",
        expected[1]
    );
    assert!(lines[3].starts_with("uptime:node-a "), "{list:?}");
    assert!(
        lines[3].contains("expired ") && lines[3].ends_with(" ago"),
        "{list:?}"
    );
    assert_eq!(
        lines[4].split(", read at").next(),
        Some(format!("3 leases in table {table_name}").as_str()),
        "{list:?}"
    );

    // The same list as JSON, of the documented shape, and as the store reads it.
    let json = run(url, table, &["list", "--output", "json"]);
    assert_eq!(json.code, 0, "{json:?}");
    let document: serde_json::Value =
        serde_json::from_str(&json.stdout).expect("one JSON document");
    assert_eq!(document["table"], table_name, "{json:?}");
    assert!(
        document["read_at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z')),
        "{json:?}"
    );
    let leases = document["leases"].as_array().expect("a list");
    let listed = store.list().await.unwrap();
    assert_eq!(leases.len(), listed.len(), "{json:?}");
    for (lease, info) in leases.iter().zip(&listed) {
        assert_eq!(lease["name"], info.name.as_str(), "{json:?}");
        assert_eq!(lease["holder"], info.holder.as_str(), "{json:?}");
        assert_eq!(lease["fence"], info.fence.get(), "{json:?}");
        assert_eq!(lease["expired"], info.is_expired(), "{json:?}");
        let expires_in = lease["expires_in_ms"].as_i64().expect("a number");
        assert_eq!(expires_in < 0, info.is_expired(), "{json:?}");
        for field in ["taken_at", "expires_at"] {
            parse_rfc3339(lease[field].as_str().expect("a time"));
        }
    }
    let shown = run(url, table, &["show", "sweep", "-o", "json"]);
    assert_eq!(shown.code, 0, "{shown:?}");
    let shown: serde_json::Value = serde_json::from_str(&shown.stdout).expect("one JSON document");
    assert_eq!(shown["lease"]["holder"], sweeper.as_str());
    assert_eq!(shown["lease"]["fence"], sweep.get());

    let show = run(url, table, &["show", "sweep"]);
    assert_eq!(show.code, 0, "{show:?}");
    assert!(
        show.stdout.contains(&format!("holder:     {sweeper}\n")),
        "{show:?}"
    );
    assert!(
        show.stdout
            .contains(&format!("fence:      {}\n", sweep.get())),
        "{show:?}"
    );

    let unknown = run(url, table, &["show", "nope"]);
    assert_eq!(unknown.code, 1, "{unknown:?}");
    assert!(
        unknown.stderr.contains("no lease named \"nope\""),
        "{unknown:?}"
    );
    assert!(unknown.stdout.is_empty(), "{unknown:?}");

    // Without --yes nothing happens.
    let refused = run(url, table, &["release", "sweep"]);
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(refused.stderr.contains("add --yes"), "{refused:?}");
    assert!(
        refused
            .stderr
            .contains(&format!("and --fence {}", sweep.get())),
        "{refused:?}"
    );
    let still = store.inspect(&name("sweep")).await.unwrap().unwrap();
    assert_eq!(still.holder, sweeper);

    let released = run(url, table, &["release", "sweep", "--yes"]);
    assert_eq!(released.code, 0, "{released:?}");
    assert!(
        released.stdout.starts_with(&format!(
            "released sweep (holder {sweeper}, fence {}",
            sweep.get()
        )),
        "{released:?}"
    );
    assert_eq!(store.inspect(&name("sweep")).await.unwrap(), None);
    // The holder finds out at its next renewal; the next instance may take it at once.
    assert!(!store.renew(&name("sweep"), &sweeper, minute).await.unwrap());
    let taker = HolderId::generate();
    let next = store
        .try_acquire(&name("sweep"), &taker, minute)
        .await
        .unwrap()
        .expect("a force-released lease is free");
    assert!(next > sweep);
    // A confirmation for the holding shown earlier releases nothing of the next one.
    let release_fenced = |fence: lease_core::Fence| {
        run(
            url,
            table,
            &[
                "release",
                "sweep",
                "--fence",
                &fence.get().to_string(),
                "--yes",
            ],
        )
    };
    let stale = release_fenced(sweep);
    assert_eq!(stale.code, 1, "{stale:?}");
    assert!(
        stale.stderr.contains(&format!(
            "sweep is no longer held with fence {} (now {taker} with fence {})",
            sweep.get(),
            next.get()
        )),
        "{stale:?}"
    );
    let kept = store.inspect(&name("sweep")).await.unwrap().unwrap();
    assert_eq!(kept.holder, taker);
    let current = release_fenced(next);
    assert_eq!(current.code, 0, "{current:?}");
    assert_eq!(store.inspect(&name("sweep")).await.unwrap(), None);

    let gone = run(url, table, &["release", "nope", "--yes"]);
    assert_eq!(gone.code, 1, "{gone:?}");
    assert!(gone.stderr.contains("no lease named \"nope\""), "{gone:?}");

    let expired = run(url, table, &["release", "uptime:node-a", "--yes"]);
    assert_eq!(expired.code, 0, "{expired:?}");
    assert!(expired.stdout.contains("nothing to release"), "{expired:?}");
    // Still held by the one who holds it.
    let alerts = store.inspect(&name("alerts")).await.unwrap().unwrap();
    assert_eq!(alerts.holder, alerter);
}

/// `check`, the environment and `prune` on `store`'s database, each on a table of its own
/// beside `store`'s (which is set up, and `check` finds fitting): the story's table is refused
/// with the upgrade SQL the store gives, and listing it fails with the database's answer said
/// once, without the driver's decorations; `prune` deletes the free rows, keeps the held one
/// and a free one whose fence is ahead of the clock, and a lease acquired again after its row
/// was pruned gets a greater fence than before.
/// Drops the tables it made.
async fn exercise_check_and_prune<X: Execute + Clone>(store: &SqlStore<X>, url: &str) {
    let dialect = store.statements().dialect();
    let fitting = store.table().to_string();
    let story = env::unique_table("leasectl_story");
    let pruned = env::unique_table("leasectl_prune");

    // The database and the table from the environment; the command line wins.
    let fits = leasectl_with_env(
        &["check"],
        &[("DATABASE_URL", url), ("LEASE_TABLE", fitting.as_str())],
    );
    assert_eq!(fits.code, 0, "{fits:?}");
    assert_eq!(fits.stdout, format!("table {fitting} fits the store\n"));

    store
        .executor()
        .batch(&lease_tests::adoption::story_table(dialect, &story))
        .await
        .unwrap();
    let on_story = store.clone().on(&story).unwrap();
    let (mismatch, sql) = match on_story.verify().await {
        Err(lease_core::Error::SchemaMismatch {
            mismatch,
            upgrade: Some(sql),
            ..
        }) => (mismatch, sql),
        other => panic!("verify on the story's table answered {other:?}"),
    };
    let refused = leasectl_with_env(
        &["check", "--table", &story],
        &[("DATABASE_URL", url), ("LEASE_TABLE", fitting.as_str())],
    );
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused.stderr.contains(&format!(
            "lease table {story} does not fit the store: column fence is missing"
        )),
        "{refused:?}"
    );
    // The SQL on standard output, as the store gives it, and only there; what differs on
    // standard error.
    assert_eq!(refused.stdout, format!("{sql}\n"), "{refused:?}");
    assert!(
        refused.stderr.contains(&format!(
            "{mismatch}; the SQL that fixes it is on standard output"
        )),
        "{refused:?}"
    );
    assert!(
        !refused.stderr.contains(sql.lines().next().unwrap()),
        "{refused:?}"
    );
    assert_eq!(
        refused.stderr.contains("psql --single-transaction"),
        dialect == lease_sqlx::Dialect::Postgres,
        "{refused:?}"
    );
    let listed = run(url, Some(&story), &["list"]);
    assert_eq!(listed.code, 1, "{listed:?}");
    assert!(
        listed.stderr.starts_with(&format!(
            "leasectl: cannot list the leases in table {story}: lease store failed to list: "
        )),
        "{listed:?}"
    );
    assert_eq!(listed.stderr.matches("fence").count(), 1, "{listed:?}");
    assert!(!listed.stderr.contains(" at line "), "{listed:?}");
    assert!(
        !listed.stderr.contains("error returned from database"),
        "{listed:?}"
    );

    let leases = store.clone().on(&pruned).unwrap();
    leases.setup().await.unwrap();
    let minute = Ttl::from_secs(60).unwrap();
    let held = HolderId::generate();
    leases
        .try_acquire(&name("held"), &held, minute)
        .await
        .unwrap()
        .expect("free");
    let gone = HolderId::generate();
    leases
        .try_acquire(&name("released"), &gone, minute)
        .await
        .unwrap()
        .expect("free");
    let fence_of = |lease: &str| {
        let shown = run(url, Some(&pruned), &["show", lease, "--output", "json"]);
        assert_eq!(shown.code, 0, "{shown:?}");
        let shown: serde_json::Value =
            serde_json::from_str(&shown.stdout).expect("one JSON document");
        shown["lease"]["fence"].as_u64().expect("a fence")
    };
    let before = fence_of("released");
    assert!(
        leases
            .release(&name("released"), &gone, Duration::ZERO)
            .await
            .unwrap()
    );
    // A free row whose fence is ahead of the clock (an adopted table's fences in nanoseconds):
    // pruned, its name would next get the clock's fence, far below it.
    let ahead = HolderId::generate();
    leases
        .try_acquire(&name("ahead"), &ahead, minute)
        .await
        .unwrap()
        .expect("free");
    assert!(
        leases
            .release(&name("ahead"), &ahead, Duration::ZERO)
            .await
            .unwrap()
    );
    const AHEAD: u64 = 4_000_000_000_000_000_000;
    store
        .executor()
        .batch(&format!(
            "UPDATE {pruned} SET fence = {AHEAD} WHERE name = 'ahead'"
        ))
        .await
        .unwrap();
    leases
        .try_acquire(
            &name("expired"),
            &HolderId::generate(),
            Ttl::from_millis(1).unwrap(),
        )
        .await
        .unwrap()
        .expect("free");
    tokio::time::sleep(Duration::from_millis(50)).await;
    let kept = run(url, Some(&pruned), &["prune", "--released-for", "1h"]);
    assert_eq!(kept.code, 0, "{kept:?}");
    assert_eq!(
        kept.stdout,
        "deleted 0 lease rows free for longer than 1h 00m 00s\n"
    );
    // The released and the expired rows; not the one ahead of the clock.
    let deleted = run(url, Some(&pruned), &["prune", "--released-for", "10ms"]);
    assert_eq!(deleted.code, 0, "{deleted:?}");
    assert_eq!(
        deleted.stdout,
        "deleted 2 lease rows free for longer than 10ms\n"
    );
    let left = leases.list().await.unwrap();
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].holder, held);
    let bad = run(url, Some(&pruned), &["prune", "--released-for", "soon"]);
    assert_eq!(bad.code, 2, "{bad:?}");
    assert_eq!(bad.stderr.matches("soon").count(), 1, "{bad:?}");
    let zero = run(url, Some(&pruned), &["prune", "--released-for", "0s"]);
    assert_eq!(zero.code, 2, "{zero:?}");
    assert!(zero.stderr.contains("must be more than 0"), "{zero:?}");
    // A number alone would be seconds: `7` meant as days would delete what was freed just now.
    let bare = run(url, Some(&pruned), &["prune", "--released-for", "7"]);
    assert_eq!(bare.code, 2, "{bare:?}");
    assert!(bare.stderr.contains("needs a unit"), "{bare:?}");
    // The pruned row's fence is gone with it; the next one is still greater.
    leases
        .try_acquire(&name("released"), &HolderId::generate(), minute)
        .await
        .unwrap()
        .expect("free");
    let after = fence_of("released");
    assert!(
        after > before,
        "fence {after} after the prune, {before} before"
    );
    leases
        .try_acquire(&name("ahead"), &HolderId::generate(), minute)
        .await
        .unwrap()
        .expect("free");
    let after = fence_of("ahead");
    assert!(
        after > AHEAD,
        "fence {after} after the prune, {AHEAD} before: the row ahead of the clock was pruned"
    );

    for table in [&story, &pruned] {
        store
            .executor()
            .batch(&format!("DROP TABLE {table}"))
            .await
            .unwrap();
    }
}

/// A directory of the test's own, removed at the end.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new() -> Self {
        let path = std::env::temp_dir().join(env::unique_table("leasectl"));
        std::fs::create_dir(&path).unwrap();
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test]
async fn sqlite() {
    let dir = TempDir::new();
    let path = dir.0.join("leases.db");
    let store = SqliteLeaseStore::connect(&format!("sqlite://{}?mode=rwc", path.display()))
        .await
        .unwrap();
    store.setup().await.unwrap();
    let url = format!("sqlite:{}", path.display());
    exercise_check_and_prune(&store, &url).await;
    exercise(Arc::new(store), &url, None).await;
}

/// A pool of two on the local PostgreSQL; `None` when it is missing (and skipping is allowed).
async fn postgres_pool(url: &str) -> Option<sqlx::PgPool> {
    match PgPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(Duration::from_secs(5))
        .connect(url)
        .await
    {
        Ok(pool) => Some(pool),
        Err(error) => {
            env::skip_or_fail("postgres", &error.to_string());
            None
        }
    }
}

#[tokio::test]
async fn postgres() {
    let url = env::postgres_url();
    let Some(pool) = postgres_pool(&url).await else {
        return;
    };
    let table = env::unique_table("leasectl");
    let store = PgLeaseStore::with_table(pool.clone(), &table).unwrap();
    store.setup().await.unwrap();
    exercise_check_and_prune(&store, &url).await;
    exercise(Arc::new(store), &url, Some(&table)).await;
    pool.execute(sqlx::AssertSqlSafe(format!("DROP TABLE {table}")))
        .await
        .unwrap();
}

/// On PostgreSQL `release` notifies the table's channel, as a store with notifications does:
/// instances listening for releases take the lease at once, not at their next poll.
#[tokio::test]
async fn postgres_release_notifies_the_listeners() {
    let url = env::postgres_url();
    let Some(pool) = postgres_pool(&url).await else {
        return;
    };
    let table = env::unique_table("leasectl_notify");
    let store = PgLeaseStore::with_table(pool.clone(), &table)
        .unwrap()
        .with_notifications(true);
    store.setup().await.unwrap();
    let minute = Ttl::from_secs(60).unwrap();
    store
        .try_acquire(&name("sweep"), &HolderId::generate(), minute)
        .await
        .unwrap()
        .expect("free");
    let mut released = store
        .release_events()
        .await
        .unwrap()
        .expect("PostgreSQL with notifications pushes releases");
    let outcome = run(&url, Some(&table), &["release", "sweep", "--yes"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    let pushed = tokio::time::timeout(
        Duration::from_secs(5),
        futures::StreamExt::next(&mut released),
    )
    .await
    .expect("leasectl's release notified nobody");
    assert_eq!(pushed, Some(name("sweep")));
    drop(released);
    pool.execute(sqlx::AssertSqlSafe(format!("DROP TABLE {table}")))
        .await
        .unwrap();
}

#[tokio::test]
async fn mariadb_by_either_scheme() {
    let url = env::mysql_url();
    let pool = match MySqlPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(Duration::from_secs(5))
        .connect(&url)
        .await
    {
        Ok(pool) => pool,
        Err(error) => return env::skip_or_fail("mariadb", &error.to_string()),
    };
    let table = env::unique_table("leasectl");
    let store = MySqlLeaseStore::with_table(pool.clone(), &table).unwrap();
    store.setup().await.unwrap();
    exercise_check_and_prune(&store, &url).await;
    exercise(Arc::new(store), &url, Some(&table)).await;
    // The same table through the mariadb:// scheme.
    let mariadb = url.replacen("mysql://", "mariadb://", 1);
    let list = run(&mariadb, Some(&table), &["list"]);
    assert_eq!(list.code, 0, "{list:?}");
    assert!(list.stdout.contains("alerts "), "{list:?}");
    pool.execute(sqlx::AssertSqlSafe(format!("DROP TABLE {table}")))
        .await
        .unwrap();
}

/// A table another session holds locked (an `ALTER TABLE` waiting, a transaction left open in
/// a console) makes a command fail after the tool's own time limit, saying why, rather than
/// wait for good.
#[tokio::test]
async fn a_locked_table_is_reported_not_waited_for() {
    let url = env::postgres_url();
    let Some(pool) = postgres_pool(&url).await else {
        return;
    };
    let table = env::unique_table("leasectl_locked");
    let store = PgLeaseStore::with_table(pool.clone(), &table).unwrap();
    store.setup().await.unwrap();
    let mut console = pool.begin().await.unwrap();
    // The server ends the console's session after 45 s, so a tool that waits for the lock
    // ends too, and fails the assertions below, rather than hang the test.
    for statement in [
        "SET idle_in_transaction_session_timeout = '45s'".to_owned(),
        format!("LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(statement))
            .execute(&mut *console)
            .await
            .unwrap();
    }
    // A watch interrupted while its first list waits showed nothing: it fails, saying so.
    let watch = Command::new(env!("CARGO_BIN_EXE_leasectl"))
        .args(["--database-url", &url, "--table", &table, "watch"])
        .env_remove("DATABASE_URL")
        .env_remove("LEASE_TABLE")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Connected and waiting on the lock by then, well short of its 10 s.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let killed = Command::new("kill")
        .args(["-INT", &watch.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let watched = tokio::task::spawn_blocking(move || watch.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let started = std::time::Instant::now();
    let outcome = run(&url, Some(&table), &["list"]);
    let waited = started.elapsed();
    // A write the tool gave up on may still run when the lock is freed: the message says so.
    let prune = run(&url, Some(&table), &["prune", "--released-for", "1h"]);
    // A read of one lease names it, as a store's error would.
    let show = run(&url, Some(&table), &["show", "sweep"]);
    // Ended by the server already, when the tool waited that long.
    let _ = console.rollback().await;
    pool.execute(sqlx::AssertSqlSafe(format!("DROP TABLE {table}")))
        .await
        .unwrap();
    let watch_said = String::from_utf8_lossy(&watched.stderr);
    assert_eq!(watched.status.code(), Some(1), "{watched:?}");
    assert_eq!(
        watch_said,
        format!("leasectl: interrupted before the leases in table {table} were listed\n"),
        "{watched:?}"
    );
    assert!(watched.stdout.is_empty(), "{watched:?}");
    assert_eq!(outcome.code, 1, "{outcome:?}");
    assert!(
        outcome.stderr.contains("did not answer within 10 s"),
        "{outcome:?}"
    );
    assert_eq!(outcome.stderr.lines().count(), 1, "{outcome:?}");
    assert!(waited < Duration::from_secs(30), "waited {waited:?}");
    assert_eq!(prune.code, 1, "{prune:?}");
    assert!(
        prune.stderr.contains("did not answer within 10 s")
            && prune.stderr.contains("may still be deleted"),
        "{prune:?}"
    );
    assert_eq!(show.code, 1, "{show:?}");
    assert!(
        show.stderr.starts_with(&format!(
            "leasectl: cannot read lease \"sweep\" in table {table}: the database did not answer \
             within 10 s"
        )),
        "{show:?}"
    );
}

#[test]
fn bad_urls_fail_with_a_clear_message_and_never_show_a_password() {
    let unsupported = leasectl(&["--database-url", "redis://localhost/0", "list"]);
    assert_eq!(unsupported.code, 2, "{unsupported:?}");
    assert!(
        unsupported
            .stderr
            .contains("unsupported database URL scheme redis:"),
        "{unsupported:?}"
    );

    let unreachable = leasectl_with_env(
        &["list"],
        &[("DATABASE_URL", "postgres://app:s3cret@127.0.0.1:1/app")],
    );
    assert_eq!(unreachable.code, 1, "{unreachable:?}");
    assert!(
        unreachable
            .stderr
            .contains("cannot connect to postgres://app:***@127.0.0.1:1/app"),
        "{unreachable:?}"
    );
    assert!(!unreachable.stderr.contains("s3cret"), "{unreachable:?}");
    // A password in the query, which sqlx reads as well, is hidden too.
    let in_query = leasectl_with_env(
        &["list"],
        &[(
            "DATABASE_URL",
            "postgres://127.0.0.1:1/app?user=app&password=s3cret&sslmode=disable",
        )],
    );
    assert_eq!(in_query.code, 1, "{in_query:?}");
    assert!(
        in_query
            .stderr
            .contains("postgres://127.0.0.1:1/app?user=app&password=***&sslmode=disable"),
        "{in_query:?}"
    );
    assert!(!in_query.stderr.contains("s3cret"), "{in_query:?}");
    // Why, not only that a pool gave up waiting: the server's refusal, on each network database.
    for url in [
        "postgres://app:s3cret@127.0.0.1:1/app",
        "mysql://app:s3cret@127.0.0.1:1/app",
        "mariadb://app:s3cret@127.0.0.1:1/app",
    ] {
        let refused = run(url, None, &["list"]);
        assert_eq!(refused.code, 1, "{refused:?}");
        assert!(
            refused.stderr.to_lowercase().contains("connection refused"),
            "{refused:?}"
        );
        assert!(!refused.stderr.contains("timed out"), "{refused:?}");
        assert_eq!(refused.stderr.lines().count(), 1, "{refused:?}");
    }
    // Without `//`, which sqlx would read as a URL with no host (the local server), and whose
    // refusal would name the rest, password and all, as the database.
    for url in [
        "postgres:app:s3cret@127.0.0.1/app",
        "mysql:app:s3cret@127.0.0.1/app",
        // A `//` later in the URL is no `//` after its scheme.
        "postgres:app:s3cret@127.0.0.1/app?sslrootcert=file:///root.crt",
    ] {
        let no_slashes = run(url, None, &["list"]);
        assert_eq!(no_slashes.code, 2, "{no_slashes:?}");
        assert!(
            no_slashes.stderr.contains("has `//` after its scheme"),
            "{no_slashes:?}"
        );
        assert!(!no_slashes.stderr.contains("s3cret"), "{no_slashes:?}");
    }
    let invalid = run(
        "postgres://app@127.0.0.1:1/app?sslmode=sometimes",
        None,
        &["list"],
    );
    assert_eq!(invalid.code, 2, "{invalid:?}");
    assert!(
        invalid.stderr.contains("invalid database URL"),
        "{invalid:?}"
    );

    let dir = TempDir::new();
    let missing = dir.0.join("missing.db");
    let no_file = run(&format!("sqlite:{}", missing.display()), None, &["list"]);
    assert_eq!(no_file.code, 1, "{no_file:?}");
    assert!(no_file.stderr.contains("cannot connect"), "{no_file:?}");
    assert!(!missing.exists(), "the tool created {}", missing.display());

    let table = run("sqlite::memory:", Some("leases; DROP TABLE x"), &["list"]);
    assert_eq!(table.code, 2, "{table:?}");
    assert!(table.stderr.contains("invalid SQL identifier"), "{table:?}");
}

/// A URL the tool does not read is not shown, for nothing tells where its password is: libpq's
/// key/value form, which PostgreSQL users put in `DATABASE_URL`, nor one of another scheme.
#[test]
fn an_unsupported_database_url_never_shows_its_password() {
    for url in [
        "host=db user=app password=s3cret dbname=app",
        "host=db user=app password='s3 cret' dbname=app",
        "redis://:s3cret@localhost/0",
    ] {
        let unsupported = leasectl_with_env(&["list"], &[("DATABASE_URL", url)]);
        assert_eq!(unsupported.code, 2, "{url}: {unsupported:?}");
        assert!(
            unsupported.stderr.contains("expected postgres://"),
            "{url}: {unsupported:?}"
        );
        assert!(!unsupported.stderr.contains("s3"), "{url}: {unsupported:?}");
    }
}

/// An invalid lease name is a usage error (exit 2) at once, before the tool connects: here to a
/// port where nothing listens, which would otherwise fail the command as unreachable (exit 1).
#[test]
fn an_invalid_lease_name_is_refused_before_connecting() {
    for command in [&["show", ""][..], &["release", "", "--yes"]] {
        let refused = run("postgres://postgres@127.0.0.1:1/test", None, command);
        assert_eq!(refused.code, 2, "{command:?}: {refused:?}");
        assert!(
            refused.stderr.contains("invalid lease name"),
            "{command:?}: {refused:?}"
        );
        assert!(
            !refused.stderr.contains("cannot connect"),
            "{command:?}: {refused:?}"
        );
    }
}

/// A release that matched no row while a fresh read shows the same holder still holding the
/// lease, unexpired, is no "expired in the meantime": the tool says the release matched nothing
/// and exits 1. A trigger that skips every update of the table makes the release match
/// nothing.
#[tokio::test]
async fn a_release_that_matched_nothing_while_still_held_fails() {
    use lease_sqlx::sqlx::Connection;

    let dir = TempDir::new();
    let (store, url) = sqlite_table(&dir).await;
    let holder = HolderId::generate();
    store
        .try_acquire(&name("sweep"), &holder, Ttl::from_secs(60).unwrap())
        .await
        .unwrap()
        .expect("sweep is free");
    let mut console = sqlx::sqlite::SqliteConnection::connect(&url).await.unwrap();
    console
        .execute("CREATE TRIGGER keep BEFORE UPDATE ON leases BEGIN SELECT RAISE(IGNORE); END")
        .await
        .unwrap();

    let kept = run(&url, None, &["release", "sweep", "--yes"]);
    assert_eq!(kept.code, 1, "{kept:?}");
    assert!(kept.stderr.contains("matched no row"), "{kept:?}");
    assert!(kept.stderr.contains(holder.as_str()), "{kept:?}");
    assert!(!kept.stdout.contains("expired"), "{kept:?}");
    let still = store.inspect(&name("sweep")).await.unwrap().unwrap();
    assert_eq!(still.holder, holder);
    assert!(!still.is_expired());
    console.close().await.unwrap();
}

#[tokio::test]
async fn a_missing_table_is_an_error_and_an_empty_one_says_so() {
    let dir = TempDir::new();
    let path = dir.0.join("leases.db");
    let url = format!("sqlite:{}", path.display());
    let store = SqliteLeaseStore::connect(&format!("sqlite://{}?mode=rwc", path.display()))
        .await
        .unwrap();

    let missing = run(&url, None, &["list"]);
    assert_eq!(missing.code, 1, "{missing:?}");
    assert!(
        missing
            .stderr
            .contains("cannot list the leases in table leases"),
        "{missing:?}"
    );
    assert!(missing.stderr.contains("no such table"), "{missing:?}");
    // `show` and `release` name the lease once: the store's error names it, and `release`
    // checks the table first.
    for (command, said) in [
        (
            &["show", "sweep"][..],
            "leasectl: cannot read table leases: lease store failed to inspect lease \"sweep\": no \
             such table: leases",
        ),
        (
            &["release", "sweep", "--yes"],
            "leasectl: cannot release lease \"sweep\" in table leases: lease table leases does not \
             fit the store: the table does not exist; nothing was changed",
        ),
    ] {
        let missing = run(&url, None, command);
        assert_eq!(missing.code, 1, "{missing:?}");
        assert_eq!(missing.stderr.matches("sweep").count(), 1, "{missing:?}");
        assert!(missing.stderr.starts_with(said), "{missing:?}");
    }

    store.setup().await.unwrap();
    let empty = run(&url, None, &["list"]);
    assert_eq!(empty.code, 0, "{empty:?}");
    assert_eq!(empty.stdout, "no leases in table leases\n");
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    for args in [
        &["--help"][..],
        &["list", "--help"],
        &["watch", "-h"],
        &["help", "release"],
    ] {
        let help = leasectl(args);
        assert_eq!(help.code, 0, "{args:?}: {help:?}");
        assert!(
            help.stdout.starts_with("Usage: leasectl") || help.stdout.contains("\nUsage: leasectl"),
            "{args:?}: {help:?}"
        );
    }
    // Each command's help has its examples, the main help the environment.
    let watch = leasectl(&["watch", "--help"]);
    assert!(watch.stdout.contains("Examples:"), "{watch:?}");
    assert!(watch.stdout.contains("--count"), "{watch:?}");
    let main = leasectl(&["--help"]);
    assert!(main.stdout.contains("[env: DATABASE_URL"), "{main:?}");
    assert!(main.stdout.contains("[env: LEASE_TABLE"), "{main:?}");
    assert!(main.stdout.contains("Exit codes"), "{main:?}");

    for args in [
        &[][..],
        &["drop", "sweep"],
        &["show"],
        &["list", "--output", "yaml"],
        &["watch", "--interval", "1ms"],
        &["migrations", "--dialect", "oracle"],
    ] {
        let out = leasectl(args);
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
        assert!(out.stderr.contains("--help"), "{args:?}: {out:?}");
    }

    let no_url = leasectl(&["list"]);
    assert_eq!(no_url.code, 2, "{no_url:?}");
    assert!(no_url.stderr.contains("set DATABASE_URL"), "{no_url:?}");

    let name = run("sqlite::memory:", None, &["show", ""]);
    assert_eq!(name.code, 2, "{name:?}");
    assert!(name.stderr.contains("invalid lease name"), "{name:?}");

    // The rejected value is quoted once, by clap's line; the reason does not repeat it.
    let long = "x".repeat(300);
    let name = run("sqlite::memory:", None, &["show", &long]);
    assert_eq!(name.code, 2, "{name:?}");
    assert!(name.stderr.contains("invalid lease name"), "{name:?}");
    assert_eq!(name.stderr.matches(&long).count(), 1, "{name:?}");
    let interval = run("sqlite::memory:", None, &["watch", "-i", "10ms"]);
    assert_eq!(interval.code, 2, "{interval:?}");
    assert_eq!(interval.stderr.matches("10ms").count(), 1, "{interval:?}");
}

/// A SQLite file with the store's table, and its URL for the tool.
async fn sqlite_table(dir: &TempDir) -> (SqliteLeaseStore, String) {
    let path = dir.0.join("leases.db");
    let store = SqliteLeaseStore::connect(&format!("sqlite://{}?mode=rwc", path.display()))
        .await
        .unwrap();
    store.setup().await.unwrap();
    (store, format!("sqlite:{}", path.display()))
}

/// Takes `lease` in `store` for a new holder, for ten minutes: a lease for the tool to show.
async fn take(store: &SqliteLeaseStore, lease: &str) {
    store
        .try_acquire(
            &name(lease),
            &HolderId::generate(),
            Ttl::from_secs(600).unwrap(),
        )
        .await
        .unwrap()
        .expect("free");
}

#[tokio::test]
async fn the_database_and_table_come_from_the_environment() {
    let dir = TempDir::new();
    let (store, url) = sqlite_table(&dir).await;
    let jobs = store.clone().on("jobs_leases").unwrap();
    jobs.setup().await.unwrap();
    jobs.try_acquire(
        &name("sweep"),
        &HolderId::generate(),
        Ttl::from_secs(60).unwrap(),
    )
    .await
    .unwrap()
    .expect("free");
    let listed = leasectl_with_env(
        &["list"],
        &[("DATABASE_URL", &url), ("LEASE_TABLE", "jobs_leases")],
    );
    assert_eq!(listed.code, 0, "{listed:?}");
    assert!(
        listed.stdout.contains("1 lease in table jobs_leases"),
        "{listed:?}"
    );
    // The command line wins over the environment.
    let default = leasectl_with_env(
        &["list", "--table", "leases"],
        &[("DATABASE_URL", &url), ("LEASE_TABLE", "jobs_leases")],
    );
    assert_eq!(default.stdout, "no leases in table leases\n", "{default:?}");
    let bad = leasectl_with_env(
        &["list"],
        &[("DATABASE_URL", &url), ("LEASE_TABLE", "no such")],
    );
    assert_eq!(bad.code, 2, "{bad:?}");
    // Empty variables (passed on unset, as docker-compose does) name nothing: no database, and
    // the default table.
    let no_url = leasectl_with_env(&["list"], &[("DATABASE_URL", "")]);
    assert_eq!(no_url.code, 2, "{no_url:?}");
    assert_eq!(
        no_url.stderr,
        "leasectl: no database: pass --database-url URL or set DATABASE_URL (see --help)\n"
    );
    let default = leasectl_with_env(&["list"], &[("DATABASE_URL", &url), ("LEASE_TABLE", "")]);
    assert_eq!(default.stdout, "no leases in table leases\n", "{default:?}");
    // A scheme in any case, as URLs compare them: SQLite's too, which sqlx alone would read
    // as part of a file's name.
    let upper = format!("SQLite{}", url.strip_prefix("sqlite").unwrap());
    let listed = run(&upper, None, &["list"]);
    assert_eq!(listed.code, 0, "{listed:?}");
    assert_eq!(listed.stdout, "no leases in table leases\n", "{listed:?}");
}

#[tokio::test]
async fn watch_lists_again_at_each_interval_and_stops_after_its_count() {
    let dir = TempDir::new();
    let (store, url) = sqlite_table(&dir).await;
    take(&store, "sweep").await;
    let started = std::time::Instant::now();
    let text = run(
        &url,
        None,
        &["watch", "--interval", "200ms", "--count", "3"],
    );
    assert_eq!(text.code, 0, "{text:?}");
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "{:?}",
        started.elapsed()
    );
    // Not a terminal: the lists one after another, a blank line between them.
    assert_eq!(
        text.stdout.matches("1 lease in table leases").count(),
        3,
        "{text:?}"
    );
    assert_eq!(text.stdout.matches("\n\nNAME").count(), 2, "{text:?}");
    let json = run(
        &url,
        None,
        &["watch", "-i", "100ms", "-n", "2", "-o", "json"],
    );
    assert_eq!(json.code, 0, "{json:?}");
    let documents: Vec<serde_json::Value> = json
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON document a line"))
        .collect();
    assert_eq!(documents.len(), 2, "{json:?}");
    assert!(documents.iter().all(|d| d["leases"][0]["name"] == "sweep"));
    // A table that cannot be read: each round says why, once, and the watch fails.
    let missing = run(&url, Some("nope"), &["watch", "-i", "100ms", "-n", "2"]);
    assert_eq!(missing.code, 1, "{missing:?}");
    assert_eq!(
        missing
            .stderr
            .matches("cannot list the leases in table nope")
            .count(),
        2,
        "{missing:?}"
    );
}

/// Which of the tool's outputs has no reader.
#[derive(Debug, Clone, Copy)]
enum Gone {
    Stdout,
    Stderr,
}

/// Runs the tool with `args` (and none of the caller's `DATABASE_URL` and `LEASE_TABLE`), the
/// read end of `gone`'s pipe closed before it writes, as `| head -1` closes it.
async fn leasectl_reader_gone(args: &[&str], gone: Gone) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_leasectl"))
        .args(args)
        .env_remove("DATABASE_URL")
        .env_remove("LEASE_TABLE")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    match gone {
        Gone::Stdout => drop(child.stdout.take()),
        Gone::Stderr => drop(child.stderr.take()),
    }
    tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap()
}

/// `leasectl list | head -1`: the reader goes away before the listing is written. The tool
/// stops writing and exits 0, without a panic (Rust ignores SIGPIPE, so a closed pipe is an
/// error of the write, which `print!` would turn into a panic and exit code 101).
#[tokio::test]
async fn a_reader_that_went_away_is_not_a_failure() {
    let dir = TempDir::new();
    let (store, url) = sqlite_table(&dir).await;
    let holder = HolderId::generate();
    // More than a pipe holds (64 KiB on Linux), so the tool's write fails whenever the read
    // end closes.
    for lease in 0..2_000 {
        store
            .try_acquire(
                &name(&format!("lease-{lease:04}")),
                &holder,
                Ttl::from_secs(600).unwrap(),
            )
            .await
            .unwrap()
            .expect("free");
    }
    let output = leasectl_reader_gone(&["--database-url", &url, "list"], Gone::Stdout).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `leasectl watch 2>&1 | head -1` on a table that cannot be read: the reader of standard error
/// goes away after the first round's message. The next rounds' messages are lost, not turned
/// into a panic (`eprintln!` panics on a closed pipe, exit code 101): the watch ends with the
/// last round's code, 1.
#[tokio::test]
async fn a_reader_of_the_errors_that_went_away_is_no_panic() {
    let dir = TempDir::new();
    let (_store, url) = sqlite_table(&dir).await;
    let watch = [
        "--database-url",
        &url,
        "--table",
        "nope",
        "watch",
        "-i",
        "100ms",
        "-n",
        "3",
    ];
    let output = leasectl_reader_gone(&watch, Gone::Stderr).await;
    assert_eq!(output.status.code(), Some(1), "{output:?}");
}

/// Output that cannot be written for another reason than a reader gone (`/dev/full`: no space
/// left) fails the command, once, saying why: `list` did so already; `watch` ended at its first
/// failed write and exited 0, as for a closed pipe.
#[tokio::test]
async fn output_that_cannot_be_written_fails() {
    let dir = TempDir::new();
    let (store, url) = sqlite_table(&dir).await;
    take(&store, "sweep").await;
    for command in [
        &["list"][..],
        &["watch", "--interval", "100ms", "--count", "3"],
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full opens for writing");
        let output = Command::new(env!("CARGO_BIN_EXE_leasectl"))
            .args(["--database-url", &url])
            .args(command)
            .env_remove("DATABASE_URL")
            .env_remove("LEASE_TABLE")
            .stdout(full)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{command:?}: {stderr}");
        assert_eq!(
            stderr.matches("cannot write to standard output").count(),
            1,
            "{command:?}: {stderr}"
        );
    }
}

#[tokio::test]
async fn watch_stops_cleanly_when_interrupted() {
    let dir = TempDir::new();
    let (_store, url) = sqlite_table(&dir).await;
    let mut child = Command::new(env!("CARGO_BIN_EXE_leasectl"))
        .args(["--database-url", &url, "watch", "--interval", "100ms"])
        .env_remove("DATABASE_URL")
        .env_remove("LEASE_TABLE")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The first listing shows the watch running, its Ctrl-C handler set before it listed: a
    // signal sent before that would end the process by the default action, or before any
    // listing.
    let stdout = child.stdout.take().unwrap();
    let (listed, first_listing) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut printed = String::new();
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
            let Ok(line) = line else { break };
            if line.contains("no leases in table leases") {
                let _ = listed.send(());
            }
            printed.push_str(&line);
            printed.push('\n');
        }
        printed
    });
    let running = first_listing.recv_timeout(Duration::from_secs(30)).is_ok();
    // SIGINT, as Ctrl-C sends it (or, when no listing came, to end the process anyway).
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    let printed = reader.join().unwrap();
    assert!(running, "no listing within 30 s: {printed}");
    assert_eq!(status.code(), Some(0), "{status:?}: {printed}");
}

#[tokio::test]
async fn check_says_whether_the_table_fits_and_prints_the_upgrade() {
    let dir = TempDir::new();
    let (store, url) = sqlite_table(&dir).await;
    let fits = run(&url, None, &["check"]);
    assert_eq!(fits.code, 0, "{fits:?}");
    assert_eq!(fits.stdout, "table leases fits the store\n");
    // The story's table: refused, with the SQL that upgrades it.
    store
        .executor()
        .batch(&lease_tests::adoption::story_table(
            lease_sqlx::Dialect::Sqlite,
            "story",
        ))
        .await
        .unwrap();
    let story = run(&url, Some("story"), &["check"]);
    assert_eq!(story.code, 1, "{story:?}");
    assert!(
        story
            .stderr
            .contains("lease table story does not fit the store: column fence is missing"),
        "{story:?}"
    );
    // The SQL that fixes it is the store's own, as its check gives it.
    let given = store.clone().on("story").unwrap().verify().await;
    let Err(lease_core::Error::SchemaMismatch {
        mismatch,
        upgrade: Some(sql),
        ..
    }) = given
    else {
        panic!("the story's table fits: {given:?}");
    };
    assert_eq!(story.stdout, format!("{sql}\n"), "{story:?}");
    assert_eq!(
        story.stderr,
        format!(
            "leasectl: lease table story does not fit the store: {mismatch}; the SQL that fixes \
             it is on standard output (run it so that it stops at its first error: sqlite3 -bail \
             DATABASE < FILE, or a migration)\n"
        ),
        "{story:?}"
    );
    // Listing it fails as the database says, once, without the driver's decorations.
    let listed = run(&url, Some("story"), &["list"]);
    assert_eq!(listed.code, 1, "{listed:?}");
    assert_eq!(listed.stderr.matches("fence").count(), 1, "{listed:?}");
    assert!(
        listed.stderr.starts_with(
            "leasectl: cannot list the leases in table story: lease store failed to list: no such column: fence"
        ),
        "{listed:?}"
    );
    assert!(
        !listed.stderr.contains("error returned from database"),
        "{listed:?}"
    );
    let missing = run(&url, Some("nope"), &["check"]);
    assert_eq!(missing.code, 1, "{missing:?}");
    assert!(
        missing.stderr.contains("the table does not exist"),
        "{missing:?}"
    );
    assert!(
        missing
            .stdout
            .starts_with("CREATE TABLE IF NOT EXISTS \"nope\""),
        "{missing:?}"
    );
}

#[tokio::test]
async fn a_table_that_does_not_fit_is_neither_pruned_nor_released_from() {
    let dir = TempDir::new();
    let (store, url) = sqlite_table(&dir).await;
    // An earlier service's table, its times in Unix seconds: read as milliseconds, its lease
    // held for another hour expired in 1970.
    store
        .executor()
        .batch(
            "CREATE TABLE seconds (name TEXT NOT NULL PRIMARY KEY, holder TEXT, \
             fence INTEGER NOT NULL, taken_at INTEGER NOT NULL, expires_at INTEGER NOT NULL); \
             INSERT INTO seconds VALUES ('sweep', 'old-service', 7, unixepoch(), \
             unixepoch() + 3600)",
        )
        .await
        .unwrap();
    let row = || async {
        sqlx::query_as::<_, (i64, i64)>(
            "SELECT count(*), coalesce(max(expires_at), 0) FROM seconds \
             WHERE holder = 'old-service'",
        )
        .fetch_one(store.executor().pool())
        .await
        .unwrap()
    };
    let before = row().await;
    let pruned = run(&url, Some("seconds"), &["prune", "--released-for", "1h"]);
    let released = run(&url, Some("seconds"), &["release", "sweep", "--yes"]);
    assert_eq!(row().await, before, "the held row was changed");
    assert_eq!(before.0, 1);
    for (outcome, what) in [
        (&pruned, "cannot prune the leases in table seconds"),
        (&released, "cannot release lease \"sweep\" in table seconds"),
    ] {
        assert_eq!(outcome.code, 1, "{outcome:?}");
        assert!(
            outcome.stderr.starts_with(&format!(
                "leasectl: {what}: lease table seconds does not fit the store: the times look \
                 like Unix seconds"
            )),
            "{outcome:?}"
        );
        assert!(
            outcome.stderr.contains("nothing was changed"),
            "{outcome:?}"
        );
        assert_eq!(outcome.stdout, "", "{outcome:?}");
    }
    // The store's own table is pruned and released from as before.
    take(&store, "sweep").await;
    let fits = run(&url, None, &["release", "sweep", "--yes"]);
    assert_eq!(fits.code, 0, "{fits:?}");
    let fits = run(&url, None, &["prune", "--released-for", "1h"]);
    assert_eq!(fits.code, 0, "{fits:?}");
}

/// The `sqlite3` shell, or `None` when it is missing (and skipping is allowed).
fn sqlite3_shell() -> Option<&'static str> {
    match Command::new("sqlite3").arg("-version").output() {
        Ok(output) if output.status.success() => Some("sqlite3"),
        Ok(output) => {
            env::skip_or_fail("sqlite3 shell", &String::from_utf8_lossy(&output.stderr));
            None
        }
        Err(error) => {
            env::skip_or_fail("sqlite3 shell", &format!("sqlite3 does not run: {error}"));
            None
        }
    }
}

/// Runs `sql` on the SQLite file `path` through the `sqlite3` shell with `options`, as a user
/// runs a saved script (`sqlite3 -bail leases.db < fix.sql`): whether it succeeded, and what it
/// printed.
fn sqlite3(shell: &str, path: &std::path::Path, options: &[&str], sql: &str) -> (bool, String) {
    use std::io::Write;
    let mut child = Command::new(shell)
        .args(options)
        .arg(path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("sqlite3 runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(sql.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), printed)
}

/// SQLite's rebuild of a table, as `check` prints it, run through the `sqlite3` shell as its
/// message and first line say (`-bail`): with a table of the new one's name in the way, it
/// stops at the failed `CREATE TABLE`, and the leases stay. The control: without `-bail` the
/// shell goes on past the error and the same script drops the lease table, putting the table
/// that was in the way in its place. With the way clear, the rebuild succeeds and the table
/// fits, its lease kept.
#[test]
fn a_sqlite_rebuild_run_as_check_says_stops_at_its_first_error() {
    let Some(shell) = sqlite3_shell() else {
        return;
    };
    let dir = TempDir::new();
    let setup = "CREATE TABLE nocase (name TEXT COLLATE NOCASE NOT NULL PRIMARY KEY, holder TEXT, \
                 fence INTEGER NOT NULL, taken_at INTEGER NOT NULL, expires_at INTEGER NOT NULL);\n\
                 INSERT INTO nocase VALUES ('sweep', 'holder', 7, 0, 99999999999999);\n\
                 CREATE TABLE nocase_upgrade (note TEXT);\n\
                 INSERT INTO nocase_upgrade VALUES ('theirs');\n";
    let [bailed, control] = ["bailed.db", "control.db"].map(|file| {
        let path = dir.0.join(file);
        let (created, printed) = sqlite3(shell, &path, &["-bail"], setup);
        assert!(created, "{printed}");
        path
    });
    let url = format!("sqlite:{}", bailed.display());
    let check = run(&url, Some("nocase"), &["check"]);
    assert_eq!(check.code, 1, "{check:?}");
    assert!(
        check
            .stderr
            .contains("(run it so that it stops at its first error: sqlite3 -bail DATABASE < FILE"),
        "{check:?}"
    );
    assert!(
        check.stdout.starts_with(
            "-- Run this as a whole that stops at its first error (sqlite3 -bail, or a migration)"
        ),
        "{check:?}"
    );
    let rows = "SELECT name || '|' || holder || '|' || fence FROM nocase;";
    let (ran, printed) = sqlite3(shell, &bailed, &["-bail"], &check.stdout);
    assert!(!ran, "the rebuild got past the table in the way: {printed}");
    assert!(
        printed.contains("table \"nocase_upgrade\" already exists"),
        "{printed}"
    );
    assert_eq!(
        sqlite3(shell, &bailed, &["-bail"], rows),
        (true, "sweep|holder|7\n".to_owned())
    );
    // The control: the shell's default goes on past the error.
    let (_, printed) = sqlite3(shell, &control, &[], &check.stdout);
    assert!(
        printed.contains("table \"nocase_upgrade\" already exists"),
        "{printed}"
    );
    assert_eq!(
        sqlite3(shell, &control, &["-bail"], "SELECT * FROM nocase;"),
        (true, "theirs\n".to_owned()),
        "the script run without -bail kept the leases: the test no longer shows what it guards \
         against"
    );
    // The way clear, the rebuild runs to its end.
    let (cleared, printed) = sqlite3(shell, &bailed, &["-bail"], "DROP TABLE nocase_upgrade;");
    assert!(cleared, "{printed}");
    let (ran, printed) = sqlite3(shell, &bailed, &["-bail"], &check.stdout);
    assert!(ran, "{printed}");
    let fits = run(&url, Some("nocase"), &["check"]);
    assert_eq!(fits.code, 0, "{fits:?}");
    assert_eq!(
        sqlite3(shell, &bailed, &["-bail"], rows),
        (true, "sweep|holder|7\n".to_owned())
    );
}

#[test]
fn migrations_are_printed_or_written_for_each_tool() {
    let printed = leasectl(&[
        "--table",
        "jobs.leases",
        "migrations",
        "--dialect",
        "postgres",
        "--layout",
        "sqlx",
    ]);
    assert_eq!(printed.code, 0, "{printed:?}");
    let migration = lease_sqlx::Migration::new(
        lease_sqlx::Dialect::Postgres,
        &lease_sqlx::TableName::new("jobs.leases").unwrap(),
    );
    let expected: String = migration
        .files(lease_sqlx::Layout::Sqlx)
        .iter()
        .map(|file| format!("-- {}\n{}\n", file.path, file.contents))
        .collect();
    assert_eq!(printed.stdout, expected);

    let dir = TempDir::new();
    let migrations = dir.0.join("migrations");
    let args = [
        "migrations",
        "--dialect",
        "mariadb",
        "--layout",
        "diesel",
        "--dir",
        migrations.to_str().unwrap(),
    ];
    let written = leasectl(&args);
    assert_eq!(written.code, 0, "{written:?}");
    let up = migrations.join("2026-12-01-142942_create_leases/up.sql");
    assert!(
        written.stdout.contains(&format!("wrote {}", up.display())),
        "{written:?}"
    );
    assert!(
        std::fs::read_to_string(&up)
            .unwrap()
            .contains("CREATE TABLE `leases`")
    );
    // Never over a file that is there.
    let again = leasectl(&args);
    assert_eq!(again.code, 1, "{again:?}");
    assert!(again.stderr.contains("cannot write"), "{again:?}");

    // Another table's migration beside it, of a version of its own.
    let mut other = vec!["--table", "mail_leases"];
    other.extend_from_slice(&args);
    let beside = leasectl(&other);
    assert_eq!(beside.code, 0, "{beside:?}");
    let versions: std::collections::BTreeSet<String> = std::fs::read_dir(&migrations)
        .unwrap()
        .map(|entry| {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            name.split('_').next().unwrap().to_owned()
        })
        .collect();
    assert_eq!(
        versions.len(),
        2,
        "one version for two tables: {versions:?}"
    );

    // A migration of another name that claims its version is refused, nothing written.
    let clash = dir.0.join("clash");
    std::fs::create_dir_all(clash.join("2026-12-01-142942_create_jobs")).unwrap();
    let mut clashing = args.to_vec();
    let clash_arg = clash.to_str().unwrap();
    *clashing.last_mut().unwrap() = clash_arg;
    let refused = leasectl(&clashing);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused
            .stderr
            .contains("another migration of version 2026-12-01-142942"),
        "{refused:?}"
    );
    assert_eq!(std::fs::read_dir(&clash).unwrap().count(), 1, "{refused:?}");
    // The same version spelt without dashes, as diesel reads it, and a name that begins with
    // this one's: refused too.
    for other in [
        "20261201142942_create_jobs",
        "2026-12-01-142942_create_leases_archive",
        "020261201142942_create_jobs",
    ] {
        let clash = dir.0.join(format!("clash-{other}"));
        std::fs::create_dir_all(clash.join(other)).unwrap();
        let mut clashing = args.to_vec();
        let clash_arg = clash.to_str().unwrap();
        *clashing.last_mut().unwrap() = clash_arg;
        let refused = leasectl(&clashing);
        assert_eq!(refused.code, 1, "{other}: {refused:?}");
        assert!(
            refused.stderr.contains("another migration of version"),
            "{other}: {refused:?}"
        );
        assert_eq!(std::fs::read_dir(&clash).unwrap().count(), 1, "{refused:?}");
    }
    // sqlx's simple file of the same migration: another record of its version.
    let simple = dir.0.join("simple");
    std::fs::create_dir_all(&simple).unwrap();
    std::fs::write(simple.join("20261201142942_create_leases.sql"), "-- mine\n").unwrap();
    let refused = leasectl(&[
        "migrations",
        "--dialect",
        "mariadb",
        "--layout",
        "sqlx",
        "--dir",
        simple.to_str().unwrap(),
    ]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused.stderr.contains("another migration of version"),
        "{refused:?}"
    );
    assert_eq!(
        std::fs::read_dir(&simple).unwrap().count(),
        1,
        "{refused:?}"
    );
    // Half of it there (the down file): nothing written, no up without its down.
    let half = dir.0.join("half");
    std::fs::create_dir_all(half.join("2026-12-01-142942_create_leases")).unwrap();
    std::fs::write(
        half.join("2026-12-01-142942_create_leases/down.sql"),
        "-- mine\n",
    )
    .unwrap();
    let mut halved = args.to_vec();
    let half_arg = half.to_str().unwrap();
    *halved.last_mut().unwrap() = half_arg;
    let refused = leasectl(&halved);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused.stderr.contains("nothing was written"),
        "{refused:?}"
    );
    assert!(
        !half.join("2026-12-01-142942_create_leases/up.sql").exists(),
        "an up written without its down"
    );
}

/// A write that fails half-way (here a file size limit of zero, as a full disk would fail it)
/// leaves no file of the migration, not even the one it was writing, nor the directories it
/// made.
#[cfg(unix)]
#[test]
fn a_migration_whose_write_fails_leaves_nothing_behind() {
    let dir = TempDir::new();
    let migrations = dir.0.join("migrations");
    let output = Command::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 0; exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_leasectl"))
        .args([
            "migrations",
            "--dialect",
            "postgres",
            "--layout",
            "diesel",
            "--dir",
            migrations.to_str().unwrap(),
        ])
        .env_remove("DATABASE_URL")
        .env_remove("LEASE_TABLE")
        .output()
        .expect("leasectl runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot write"), "{stderr}");
    assert!(stderr.contains("nothing was written"), "{stderr}");
    assert!(
        !migrations.exists(),
        "left behind: {:?}",
        std::fs::read_dir(&migrations).map(|entries| entries.flatten().count())
    );
}

/// The README quotes `leasectl -h` from its usage line to its options, as the tool prints it:
/// a command renamed or described anew shows here.
#[test]
fn the_readmes_help_is_the_tools() {
    let readme = include_str!("../README.md");
    let block = "```text\nUsage: leasectl";
    let start = readme.find(block).expect("the README quotes the help") + "```text\n".len();
    let end = start + readme[start..].find("```").expect("a closed block");
    let quoted = &readme[start..end];
    let help = leasectl(&["-h"]);
    assert_eq!(help.code, 0, "{help:?}");
    let usage = help.stdout.find("Usage: leasectl").expect("a usage line");
    // Usage, commands and options: the three paragraphs before the database URLs.
    let printed: Vec<&str> = help.stdout[usage..].split("\n\n").take(3).collect();
    let printed = format!("{}\n", printed.join("\n\n"));
    assert_eq!(
        quoted, printed,
        "the README's help differs from `leasectl -h`"
    );
}
