//! The example service as a process, against SQLite, PostgreSQL and MariaDB: it serves
//! `/health/ready` and `/metrics` while its jobs hold their leases, and on SIGTERM it exits
//! within its grace period having handed every lease back (the mail checks' kept for their
//! minimum hold); in a rolling deploy the next instance then leads. A service that cannot open
//! its store says why.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use lease_core::{LeaseName, LeaseStore};
use lease_sqlx::sqlx::{MySql, Postgres};
use lease_sqlx::{Connect, Execute, SqliteLeaseStore, SqlxExecutor, SqlxStore};
use lease_tests::env;
use lease_tests::proxy::FaultProxy;

/// The service's grace period in these tests.
const GRACE: Duration = Duration::from_secs(3);
/// How long the service may take to lead its leader jobs and report ready.
const READY_WITHIN: Duration = Duration::from_secs(20);
const NODE: &str = "node-t";

/// The service process, killed if a test fails before it exits.
struct Service {
    child: Child,
    address: String,
    /// Lines of its standard output after `listening on`.
    lines: mpsc::Receiver<String>,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Service {
    fn start(url: &str, table: &str) -> Self {
        Self::start_as(url, table, NODE)
    }

    /// The service as the instance of `node`.
    fn start_as(url: &str, table: &str, node: &str) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lease-service"))
            .env("DATABASE_URL", url)
            .env("LEASE_TABLE", table)
            .env("LISTEN", "127.0.0.1:0")
            .env("NODE", node)
            .env("GRACE_SECS", GRACE.as_secs().to_string())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the service starts");
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let first = lines.recv_timeout(Duration::from_secs(30));
        let Some(address) = first
            .as_deref()
            .ok()
            .and_then(|first| first.strip_prefix("listening on "))
            .map(str::to_owned)
        else {
            // Never leave the process behind: it would outlive the test and hold its output.
            let _ = child.kill();
            let _ = child.wait();
            panic!("the service did not say where it listens; its first line: {first:?}");
        };
        Self {
            child,
            address,
            lines,
        }
    }

    /// `GET path`: the status code and the body.
    fn get(&self, path: &str) -> (u16, String) {
        let mut stream = TcpStream::connect(&self.address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.address
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let status = response
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("no status in {response:?}"));
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, body)| body.to_owned())
            .unwrap_or_default();
        (status, body)
    }

    /// Waits until `/health/ready` answers 200 with both leader jobs held.
    fn wait_ready(&self) -> String {
        self.wait_ready_holding(2)
    }

    /// Waits until `/health/ready` answers 200 with `held` leases held.
    fn wait_ready_holding(&self, held: usize) -> String {
        let held = format!("held={held} ");
        let started = Instant::now();
        loop {
            let (status, body) = self.get("/health/ready");
            if status == 200 && body.contains(&held) {
                return body;
            }
            assert!(
                started.elapsed() < READY_WITHIN,
                "not ready within {READY_WITHIN:?}: {status} {body}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Reads `/metrics` until it shows every one of `lines` (the mail checks' first round may
    /// still be running when the service turns ready), or `READY_WITHIN` has passed; answers
    /// the last page read.
    fn wait_metrics(&self, lines: &[String]) -> String {
        let started = Instant::now();
        loop {
            let (status, metrics) = self.get("/metrics");
            assert_eq!(status, 200, "{metrics}");
            if lines.iter().all(|line| metrics.contains(line.as_str()))
                || started.elapsed() >= READY_WITHIN
            {
                return metrics;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Sends SIGTERM and waits for the exit: how long it took, and the last line printed.
    fn terminate(&mut self) -> (Duration, String) {
        let sent = Instant::now();
        send(self.child.id(), "TERM");
        let limit = GRACE + Duration::from_secs(5);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                sent.elapsed() < limit,
                "still running {limit:?} after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let took = sent.elapsed();
        assert!(status.success(), "exit status {status}");
        let last = self
            .lines
            .try_iter()
            .filter(|line| line.starts_with("shut down"))
            .last()
            .expect("the service reports its shutdown");
        (took, last)
    }
}

fn name(text: &str) -> LeaseName {
    LeaseName::new(text).unwrap()
}

/// Runs the service on `store`'s table at `url`, checks both endpoints and what the store
/// holds, sends SIGTERM, and checks the exit and that every lease was handed back.
async fn serves_and_hands_every_lease_back_on_sigterm(
    url: &str,
    table: &str,
    store: &impl LeaseStore,
) {
    let mut service = Service::start(url, table);
    let ready = service.wait_ready();
    assert!(ready.starts_with("ready"), "{ready}");

    let lines = [
        format!("lease_held{{lease=\"alerts\",store=\"{table}\"}} 1"),
        format!("lease_held{{lease=\"uptime:{NODE}\",store=\"{table}\"}} 1"),
        format!(
            "lease_acquisitions_total{{lease=\"mail-checks\",store=\"{table}\",result=\"won\"}} 1"
        ),
    ];
    let metrics = service.wait_metrics(&lines);
    for line in &lines {
        assert!(metrics.contains(line.as_str()), "no {line} in:\n{metrics}");
    }
    assert!(
        metrics.contains("lease_store_call_duration_seconds"),
        "{metrics}"
    );

    let uptime = format!("uptime:{NODE}");
    for lease in ["alerts", uptime.as_str(), "mail-checks"] {
        let info = store.inspect(&name(lease)).await.unwrap();
        assert!(
            info.as_ref().is_some_and(|info| !info.is_expired()),
            "{lease} not held while the service runs: {info:?}"
        );
    }

    let (took, report) = service.terminate();
    assert!(
        took < GRACE + Duration::from_secs(2),
        "exited {took:?} after SIGTERM"
    );
    assert!(report.contains("0 failed"), "{report}");
    for lease in ["alerts", uptime.as_str()] {
        assert_eq!(
            store.inspect(&name(lease)).await.unwrap(),
            None,
            "{lease} still taken after the shutdown ({report})"
        );
    }
    // The mail checks ran once at start with a minimum hold of 14 minutes: released with it,
    // the lease is kept until then, not for the 2 minutes of a TTL a crash would leave.
    let mail = store
        .inspect(&name("mail-checks"))
        .await
        .unwrap()
        .expect("kept for its hold");
    let kept = mail.expires_at.duration_since(mail.taken_at).unwrap();
    assert!(
        kept >= Duration::from_secs(13 * 60),
        "kept {kept:?}: {mail:?}"
    );
}

/// How long the next instance may take to lead once the first has exited: on PostgreSQL the
/// release's notification wakes its campaign at once; on MariaDB and SQLite the campaign tries
/// again every `LeaseConfig::campaign_retry`, 5 s with the service's settings; the rest is room
/// for a loaded machine.
const HANDOVER_WITHIN: Duration = Duration::from_secs(20);

/// A rolling deploy on `store`'s table at `url`: a second instance starts beside the leading
/// one and holds only its own node's lease while the first leads; on the first's SIGTERM the
/// second takes the leadership of `alerts` with a greater fence, and then hands it back on its
/// own SIGTERM.
async fn the_next_instance_leads_after_a_sigterm(
    label: &str,
    url: &str,
    table: &str,
    store: &impl LeaseStore,
) {
    let alerts = name("alerts");
    let mut first = Service::start_as(url, table, "node-a");
    first.wait_ready();
    let led = store
        .inspect(&alerts)
        .await
        .unwrap()
        .expect("the first instance leads alerts");
    let mut second = Service::start_as(url, table, "node-b");
    let ready = second.wait_ready_holding(1);
    let still = store.inspect(&alerts).await.unwrap();
    assert_eq!(
        still.as_ref().map(|info| (&info.holder, info.fence)),
        Some((&led.holder, led.fence)),
        "alerts changed hands while its leader ran ({ready})"
    );

    let (_, report) = first.terminate();
    assert!(report.contains("0 failed"), "{report}");
    let exited = Instant::now();
    let taken = loop {
        let info = store.inspect(&alerts).await.unwrap();
        if let Some(info) = info.filter(|info| info.fence > led.fence && !info.is_expired()) {
            break info;
        }
        assert!(
            exited.elapsed() < HANDOVER_WITHIN,
            "alerts not led again within {HANDOVER_WITHIN:?} of the first instance's exit"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    eprintln!(
        "{label}: alerts led again {:?} after the first instance exited",
        exited.elapsed()
    );
    assert_ne!(taken.holder, led.holder, "{taken:?}");
    second.wait_ready();
    assert_eq!(store.inspect(&name("uptime:node-a")).await.unwrap(), None);

    let (_, report) = second.terminate();
    assert!(report.contains("0 failed"), "{report}");
    for lease in ["alerts", "uptime:node-b"] {
        assert_eq!(
            store.inspect(&name(lease)).await.unwrap(),
            None,
            "{lease} still taken after the second shutdown ({report})"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite() {
    let dir = std::env::temp_dir().join(format!("lease-service-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite:{}?mode=rwc", dir.join("leases.db").display());
    let table = "leases";
    let store = SqliteLeaseStore::connect(&url).await.unwrap();
    store.setup().await.unwrap();
    serves_and_hands_every_lease_back_on_sigterm(&url, table, &store).await;
    store
        .executor()
        .batch(&format!("DELETE FROM {table}"))
        .await
        .unwrap();
    the_next_instance_leads_after_a_sigterm("sqlite", &url, table, &store).await;
    store.pool().close().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A client gone mid-request (a request head that never ends) does not keep the service from
/// exiting after SIGTERM: its leases go back, then the HTTP connections get a moment and are
/// closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_http_client_does_not_hold_up_the_exit() {
    let dir = std::env::temp_dir().join(format!("lease-service-stalled-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite:{}?mode=rwc", dir.join("leases.db").display());
    let mut service = Service::start(&url, "leases");
    service.wait_ready();
    let mut stalled = TcpStream::connect(&service.address).unwrap();
    stalled
        .write_all(b"GET /health/ready HTTP/1.1\r\nHost: test\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let (took, report) = service.terminate();
    assert!(report.contains("0 failed"), "{report}");
    assert!(
        took < GRACE + Duration::from_secs(2),
        "exited {took:?} after SIGTERM"
    );
    drop(stalled);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The service on the shared server of `DB` at `url` (`label` names it when it cannot be
/// reached), on a table of its own, dropped afterwards.
async fn on_server<DB>(label: &str, url: &str)
where
    DB: lease_sqlx::SqlxDatabase,
    SqlxExecutor<DB>: Connect,
{
    let table = env::unique_table("service");
    let store = match SqlxStore::<DB>::connect_with_table(url, &table).await {
        Ok(store) => store,
        Err(error) => {
            env::skip_or_fail(label, &error.to_string());
            return;
        }
    };
    store.setup().await.unwrap();
    serves_and_hands_every_lease_back_on_sigterm(url, &table, &store).await;
    store
        .executor()
        .batch(&format!("DELETE FROM {table}"))
        .await
        .unwrap();
    the_next_instance_leads_after_a_sigterm(label, url, &table, &store).await;
    store
        .executor()
        .batch(&format!("DROP TABLE IF EXISTS {table}"))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres() {
    on_server::<Postgres>("postgres", &env::postgres_url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mariadb() {
    on_server::<MySql>("mariadb", &env::mysql_url()).await;
}

/// The service with `vars`, its standard error piped.
fn spawn_with(vars: &[(&str, &str)]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_lease-service"))
        .envs(vars.iter().copied())
        .env("LISTEN", "127.0.0.1:0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the service starts")
}

/// Starts the service with `vars` and waits (at most 30 s, then kills it and fails) for it to
/// exit on its own: its exit status and what it printed to standard error.
fn exit_of(vars: &[(&str, &str)]) -> (std::process::ExitStatus, String) {
    let child = spawn_with(vars);
    exited_within(
        child,
        Duration::from_secs(30),
        &format!("started with {vars:?}"),
    )
}

/// Waits at most `limit` for `child` to exit (then kills it and fails, saying `after` what):
/// its exit status and what it printed to standard error.
fn exited_within(
    mut child: Child,
    limit: Duration,
    after: &str,
) -> (std::process::ExitStatus, String) {
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running {limit:?} after it was {after}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (status, stderr)
}

/// A SIGTERM while the service connects to a database that accepts and never answers (here a
/// listening socket nobody reads: the kernel completes the connection) stops it at once, with
/// nothing to hand back, and it exits 0; it does not wait out the pool's 30 s timeout first.
#[test]
fn a_sigterm_while_connecting_stops_it_at_once() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("postgres://app@{}/app", silent.local_addr().unwrap());
    let child = spawn_with(&[("DATABASE_URL", &url)]);
    // Its first connection is on its way by now (the signal is caught from the start anyway).
    std::thread::sleep(Duration::from_millis(1_500));
    send(child.id(), "TERM");
    let sent = Instant::now();
    let (status, stderr) = exited_within(
        child,
        Duration::from_secs(10),
        "sent SIGTERM while connecting",
    );
    let took = sent.elapsed();
    drop(silent);
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        took < Duration::from_secs(3),
        "exited {took:?} after SIGTERM"
    );
}

/// A second signal while the graceful shutdown runs ends the service at once: here the database
/// stops answering (a proxy in front of the shared PostgreSQL holds every byte), so the
/// handover after SIGTERM would wait out the 30 s grace period; a Ctrl-C after it exits 130
/// within seconds, saying a lease not handed back lapses after its TTL. The check that it still runs a
/// second after the SIGTERM is the control: without the second signal it would wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_during_the_shutdown_exits_at_once() {
    let url = env::postgres_url();
    let table = env::unique_table("service_twice");
    let store = match SqlxStore::<Postgres>::connect_with_table(&url, &table).await {
        Ok(store) => store,
        Err(error) => {
            env::skip_or_fail("postgres", &error.to_string());
            return;
        }
    };
    store.setup().await.unwrap();
    let proxy = FaultProxy::in_front_of(&url).unwrap();
    let child = spawn_with(&[
        ("DATABASE_URL", &proxy.rewrite_url(&url)),
        ("LEASE_TABLE", &table),
        ("NODE", NODE),
        ("GRACE_SECS", "30"),
    ]);
    let mut child = KillOnDrop(Some(child));
    let started = Instant::now();
    while store.inspect(&name("alerts")).await.unwrap().is_none() {
        assert!(
            started.elapsed() < READY_WITHIN,
            "alerts not led within {READY_WITHIN:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    proxy.stall();
    send(child.id(), "TERM");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "exited within a second of SIGTERM with its database stalled: the control failed"
    );
    send(child.id(), "INT");
    let sent = Instant::now();
    let (status, stderr) = exited_within(
        child.take(),
        Duration::from_secs(10),
        "sent SIGTERM, then SIGINT during the shutdown",
    );
    let took = sent.elapsed();
    proxy.pass();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(
        took < Duration::from_secs(3),
        "exited {took:?} after the second signal"
    );
    assert_eq!(
        stderr
            .matches("a second signal during the shutdown")
            .count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("lapses after its TTL"), "{stderr}");
    store
        .executor()
        .batch(&format!("DROP TABLE IF EXISTS {table}"))
        .await
        .unwrap();
}

/// A child process killed if the test fails before it exits.
struct KillOnDrop(Option<Child>);

impl KillOnDrop {
    fn id(&self) -> u32 {
        self.0.as_ref().expect("not taken").id()
    }

    fn try_wait(&mut self) -> std::io::Result<Option<std::process::ExitStatus>> {
        self.0.as_mut().expect("not taken").try_wait()
    }

    fn take(&mut self) -> Child {
        self.0.take().expect("not taken")
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Sends `signal` (`TERM`, `INT`) to the process `id`.
fn send(id: u32, signal: &str) {
    let killed = Command::new("kill")
        .args([&format!("-{signal}"), &id.to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
}

/// A setting it cannot read stops it before it opens anything: `NOTIFICATIONS` is `on` or
/// `off`, and anything else exits 2 naming the setting and the value.
#[test]
fn a_notifications_setting_other_than_on_or_off_is_refused() {
    let url = format!(
        "sqlite:{}?mode=rwc",
        std::env::temp_dir()
            .join(format!("lease-service-setting-{}.db", std::process::id()))
            .display()
    );
    let (status, stderr) = exit_of(&[("DATABASE_URL", &url), ("NOTIFICATIONS", "maybe")]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("NOTIFICATIONS: `on` or `off`, not `maybe`"),
        "{stderr:?}"
    );
}

/// A store that cannot be opened (a SQLite file in a directory that does not exist): the
/// service exits 1 and prints the store's error with the database's answer as its cause, once,
/// not "lease store failed to set up" alone.
#[test]
fn a_store_that_cannot_be_opened_is_reported_with_its_cause() {
    let missing =
        std::env::temp_dir().join(format!("lease-service-missing-{}", std::process::id()));
    let url = format!("sqlite:{}", missing.join("leases.db").display());
    let (status, stderr) = exit_of(&[("DATABASE_URL", &url)]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    let cause = "unable to open database file";
    assert!(
        stderr.contains("lease store failed to set up: "),
        "no store error in {stderr:?}"
    );
    assert_eq!(stderr.matches(cause).count(), 1, "{stderr:?}");
}

/// The control: a service killed outright (SIGKILL, a crash) leaves its leases taken, so the
/// checks above would catch a shutdown that did not hand them back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_control_a_killed_service_leaves_its_leases_taken() {
    let dir = std::env::temp_dir().join(format!("lease-service-killed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite:{}?mode=rwc", dir.join("leases.db").display());
    let store = SqliteLeaseStore::connect(&url).await.unwrap();
    store.setup().await.unwrap();
    let mut service = Service::start(&url, "leases");
    service.wait_ready();
    service.child.kill().unwrap();
    service.child.wait().unwrap();
    let alerts = store.inspect(&name("alerts")).await.unwrap();
    assert!(
        alerts.as_ref().is_some_and(|info| !info.is_expired()),
        "a crash released alerts: {alerts:?}"
    );
    store.pool().close().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `DATABASE_URL` that is no URL (libpq's key/value form) is refused, exit 1, naming no part
/// of it: the whole string, password included, was printed as its "scheme".
#[test]
fn a_database_url_that_is_no_url_never_shows_its_password() {
    let (status, stderr) = exit_of(&[("DATABASE_URL", "host=db user=app password=s3cret")]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("not a postgres://, mysql:// or sqlite: URL: no scheme"),
        "{stderr:?}"
    );
    assert!(!stderr.contains("s3cret"), "{stderr:?}");
}

/// A `NODE` that makes an invalid lease name (`uptime:<node>` over 255 bytes) stops the
/// service before it starts anything: it exits 1 naming the name, without having opened its
/// database (a SQLite file it would create). Checked after the jobs had started, a leader
/// campaign could already have taken its lease, left to lapse after its TTL.
#[test]
fn an_invalid_node_stops_the_service_before_it_starts_a_job() {
    let file = std::env::temp_dir().join(format!("lease-service-node-{}.db", std::process::id()));
    let url = format!("sqlite:{}?mode=rwc", file.display());
    let node = "n".repeat(300);
    let (status, stderr) = exit_of(&[("DATABASE_URL", &url), ("NODE", &node)]);
    let opened = file.exists();
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
    }
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("lease name"), "{stderr:?}");
    assert!(
        !opened,
        "the database was opened before the node's name was checked"
    );
}

/// An empty `NODE` (a variable passed on unset) stops the service before it starts anything,
/// as an invalid one does: every node started so would share the lease `uptime:`, and the
/// per-node job would run on one of them only.
#[test]
fn an_empty_node_stops_the_service_before_it_starts_a_job() {
    let file = std::env::temp_dir().join(format!(
        "lease-service-empty-node-{}.db",
        std::process::id()
    ));
    let url = format!("sqlite:{}?mode=rwc", file.display());
    let (status, stderr) = exit_of(&[("DATABASE_URL", &url), ("NODE", "")]);
    let opened = file.exists();
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
    }
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("node's name is empty"), "{stderr:?}");
    assert!(!opened, "the database was opened with an empty node name");
}
