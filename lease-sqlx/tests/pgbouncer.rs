//! PostgreSQL behind a real PgBouncer in transaction pooling mode, with many more clients than
//! server connections: the simple protocol (`PgProtocol::SimpleInline`) gives every answer
//! right and no error under stress, while sqlx's default prepared statements demonstrably go
//! wrong there (the control, which shows that the stress really shares server connections).
//!
//! Needs the `pgbouncer` binary (Debian: `apt-get install pgbouncer`); the test starts a private
//! instance on a free port in front of the test server and stops it at the end. Without the
//! binary the test is a loud skip, and a failure under `LEASE_TEST_REQUIRE_ALL=1`.
#![cfg(feature = "postgres")]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lease_core::runtime::TokioRuntime;
use lease_core::{HolderId, LeaseClient, LeaseName, LeaseStore, Operation, Ttl};
use lease_sqlx::sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use lease_sqlx::sqlx::{self, AssertSqlSafe, Row};
use lease_sqlx::{CheckAt, PgLeaseStore, PgProtocol};
use lease_tests::env;

/// Clients, each with its own connection to PgBouncer, sharing this many server connections.
const CLIENTS: usize = 24;
const SERVER_CONNECTIONS: usize = 3;
/// Rounds of statements each client makes; every round checks eight answers.
const ROUNDS: usize = 60;
/// The whole stress ends by this bound even if something hangs.
const STRESS_LIMIT: Duration = Duration::from_secs(180);

/// A private PgBouncer, stopped and cleaned up on drop.
struct PgBouncer {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl PgBouncer {
    /// Starts PgBouncer in front of the test server, or says why it cannot.
    fn start() -> Result<Self, String> {
        let binary = which("pgbouncer")
            .ok_or("the pgbouncer binary is not installed (Debian: apt-get install pgbouncer)")?;
        let server: PgConnectOptions = env::postgres_url()
            .parse()
            .map_err(|e| format!("LEASE_TEST_POSTGRES_URL: {e}"))?;
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        let dir =
            std::env::temp_dir().join(format!("{}_pgbouncer", env::unique_table("lease_sqlx")));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let ini = dir.join("pgbouncer.ini");
        let password = ""; // trust authentication towards clients; the server's own auth applies
        std::fs::write(
            &ini,
            format!(
                "[databases]\n\
                 * = host={host} port={server_port} pool_size={SERVER_CONNECTIONS}\n\
                 [pgbouncer]\n\
                 listen_addr = 127.0.0.1\n\
                 listen_port = {port}\n\
                 unix_socket_dir =\n\
                 auth_type = trust\n\
                 auth_file = {auth}\n\
                 pool_mode = transaction\n\
                 max_client_conn = 200\n\
                 default_pool_size = {SERVER_CONNECTIONS}\n\
                 ignore_startup_parameters = extra_float_digits,options\n\
                 logfile = {log}\n",
                host = server.get_host(),
                server_port = server.get_port(),
                auth = dir.join("userlist.txt").display(),
                log = dir.join("pgbouncer.log").display(),
            ),
        )
        .map_err(|e| e.to_string())?;
        std::fs::write(
            dir.join("userlist.txt"),
            format!("\"{}\" \"{password}\"\n", server.get_username()),
        )
        .map_err(|e| e.to_string())?;
        let mut command = Command::new(&binary);
        // PgBouncer refuses to run as root; it can drop to another user itself.
        if owned_by_root(&ini) {
            make_readable(&dir).map_err(|e| format!("opening {} to nobody: {e}", dir.display()))?;
            command.arg("-u").arg("nobody");
        }
        let child = command
            .arg(&ini)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", binary.display()))?;
        let bouncer = Self { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err(format!(
                    "pgbouncer did not listen on {port}: {}",
                    bouncer.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(bouncer)
    }

    fn url(&self) -> String {
        let server: PgConnectOptions = env::postgres_url().parse().expect("checked at start");
        format!(
            "postgres://{}@127.0.0.1:{}/{}",
            server.get_username(),
            self.port,
            server.get_database().unwrap_or("postgres")
        )
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("pgbouncer.log")).unwrap_or_default()
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `binary` on the `PATH`, or in the `sbin` beside a `bin` on it (Debian installs PgBouncer
/// in `sbin`, which an ordinary user's `PATH` often lacks).
fn which(binary: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .flat_map(|dir| {
            let sbin = dir.parent().map(|parent| parent.join("sbin"));
            std::iter::once(dir).chain(sbin)
        })
        .map(|dir| dir.join(binary))
        .find(|path| path.is_file())
}

/// Whether `file`, which this process just created, belongs to root: then so does the process.
fn owned_by_root(file: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(file).is_ok_and(|meta| meta.uid() == 0)
}

/// Lets the unprivileged user PgBouncer drops to read its files and write its log.
fn make_readable(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777))?;
    for entry in std::fs::read_dir(dir)? {
        std::fs::set_permissions(entry?.path(), std::fs::Permissions::from_mode(0o644))?;
    }
    Ok(())
}

/// What a stress run saw.
#[derive(Debug, Default)]
struct Tally {
    answers: AtomicU64,
    wrong: AtomicU64,
    errors: AtomicU64,
}

impl Tally {
    fn check(&self, right: bool) {
        self.answers.fetch_add(1, Ordering::Relaxed);
        if !right {
            self.wrong.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Each client works on leases of its own, so every answer is known in advance, with
/// statements that share their parameter types (text, text, int8), the case where a misrouted
/// Bind runs another statement silently; and all clients race for one shared lease, which
/// exactly one may ever win.
async fn stress(url: String, protocol: PgProtocol, table: String) -> (Tally, u64) {
    let tally = Arc::new(Tally::default());
    let shared_wins = Arc::new(AtomicU64::new(0));
    let mut clients = Vec::new();
    for client in 0..CLIENTS {
        let (url, table, tally, shared_wins) = (
            url.clone(),
            table.clone(),
            Arc::clone(&tally),
            Arc::clone(&shared_wins),
        );
        clients.push(tokio::spawn(async move {
            let pool = match PgPoolOptions::new().max_connections(1).connect(&url).await {
                Ok(pool) => pool,
                Err(_) => {
                    tally.errors.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            };
            let store = PgLeaseStore::with_table(pool.clone(), &table)
                .expect("a valid table")
                .map_executor(|x| x.with_protocol(protocol));
            let ttl = Ttl::from_secs(60).expect("a valid TTL");
            let shared = LeaseName::new("shared").expect("a valid name");
            // The last fence of each of this client's own names.
            let mut last = [0_u64; 3];
            for round in 0..ROUNDS {
                let own =
                    LeaseName::new(format!("client:{client}:{}", round % 3)).expect("a valid name");
                let last = &mut last[round % 3];
                let me = HolderId::generate();
                let stranger = HolderId::generate();
                let run = async {
                    let fence = store.try_acquire(&own, &me, ttl).await?;
                    // Each acquisition of this name has a fence above the one before.
                    let fence = fence.map(|f| f.get());
                    tally.check(fence.is_some_and(|fence| fence > *last));
                    *last = fence.unwrap_or(u64::MAX);
                    tally.check(store.renew(&own, &me, ttl).await?);
                    tally.check(!store.renew(&own, &stranger, ttl).await?);
                    let info = store.inspect(&own).await?;
                    tally.check(info.is_some_and(|i| i.holder == me && i.name == own));
                    let many = store
                        .renew_many(
                            &[(own.clone(), stranger.clone()), (own.clone(), me.clone())],
                            ttl,
                        )
                        .await?;
                    tally.check(many == [false, true]);
                    if store.try_acquire(&shared, &me, ttl).await?.is_some() {
                        shared_wins.fetch_add(1, Ordering::Relaxed);
                    }
                    tally.check(store.release(&own, &me, Duration::ZERO).await?);
                    tally.check(!store.release(&own, &me, Duration::ZERO).await?);
                    Ok::<(), lease_core::Error>(())
                };
                if run.await.is_err() {
                    tally.errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            pool.close().await;
        }));
    }
    let all = futures::future::join_all(clients);
    tokio::time::timeout(STRESS_LIMIT, all)
        .await
        .expect("the stress ended within its bound");
    let tally = Arc::try_unwrap(tally).expect("every client finished");
    (tally, shared_wins.load(Ordering::Relaxed))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simple_protocol_is_correct_behind_pgbouncer_transaction_pooling() {
    let bouncer = match PgBouncer::start() {
        Ok(bouncer) => bouncer,
        Err(why) => {
            env::skip_or_fail("pgbouncer", &why);
            return;
        }
    };
    let url = bouncer.url();
    let setup_pool = PgPoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await
        .unwrap_or_else(|e| panic!("connecting through pgbouncer: {e}\n{}", bouncer.log()));

    let table = env::unique_table("lease_sqlx_bouncer");
    let store = PgLeaseStore::with_table(setup_pool.clone(), &table)
        .unwrap()
        .map_executor(|x| x.with_protocol(PgProtocol::SimpleInline));
    store.setup().await.expect("setup through pgbouncer");

    let (tally, shared_wins) = stress(url.clone(), PgProtocol::SimpleInline, table.clone()).await;
    eprintln!(
        "simple protocol through pgbouncer: {tally:?}, shared lease won {shared_wins} time(s)"
    );
    assert_eq!(
        tally.errors.load(Ordering::Relaxed),
        0,
        "errors: {}",
        bouncer.log()
    );
    assert_eq!(tally.wrong.load(Ordering::Relaxed), 0, "wrong answers");
    assert_eq!(
        tally.answers.load(Ordering::Relaxed),
        (CLIENTS * ROUNDS * 7) as u64,
        "every answer was checked"
    );
    assert_eq!(shared_wins, 1, "the shared lease had {shared_wins} winners");

    // The control: the same stress with sqlx's prepared statements goes wrong behind the same
    // PgBouncer, so the stress above really shared server connections between clients.
    let control_table = env::unique_table("lease_sqlx_bouncer");
    PgLeaseStore::with_table(setup_pool.clone(), &control_table)
        .unwrap()
        .map_executor(|x| x.with_protocol(PgProtocol::SimpleInline))
        .setup()
        .await
        .unwrap();
    let (control, _) = stress(url.clone(), PgProtocol::Prepared, control_table.clone()).await;
    eprintln!("prepared statements through pgbouncer: {control:?}");
    assert!(
        control.errors.load(Ordering::Relaxed) + control.wrong.load(Ordering::Relaxed) > 0,
        "prepared statements showed no trouble: the stress did not exercise transaction pooling"
    );

    let fenced_table = env::unique_table("lease_sqlx_bouncer");
    fenced_through(&url, &fenced_table).await;

    for t in [
        table,
        control_table,
        format!("{fenced_table}_notices"),
        fenced_table,
    ] {
        sqlx::raw_sql(AssertSqlSafe(format!("DROP TABLE {t}")))
            .execute(&setup_pool)
            .await
            .unwrap();
    }
    setup_pool.close().await;
}

/// Fenced transactions through PgBouncer's transaction pooling, with the store in
/// `PgProtocol::SimpleInline` (which prepares nothing, so the fenced functions check with the
/// check's text): with the check at the commit and at the begin, every write commits while the
/// lease is held; once it has expired, both refuse and commit nothing.
async fn fenced_through(url: &str, table: &str) {
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(url)
        .await
        .unwrap();
    let store = PgLeaseStore::with_table(pool.clone(), table)
        .unwrap()
        .map_executor(|x| x.with_protocol(PgProtocol::SimpleInline));
    store.setup().await.unwrap();
    assert!(
        store.prepared_fence().is_none(),
        "nothing prepared in SimpleInline"
    );
    let notices = format!("{table}_notices");
    sqlx::raw_sql(AssertSqlSafe(format!("CREATE TABLE {notices} (n BIGINT)")))
        .execute(&pool)
        .await
        .unwrap();
    let client = LeaseClient::builder(store.clone(), TokioRuntime)
        .ttl(Ttl::from_secs(60).unwrap())
        .build()
        .unwrap();
    let guard = client.try_acquire("fenced").await.unwrap().unwrap();
    let write = async |at: CheckAt, n: u64| {
        lease_sqlx::fenced_with(&store, &guard, at, async |tx| {
            let insert = format!("INSERT INTO {notices} (n) VALUES ({n})");
            sqlx::raw_sql(AssertSqlSafe(insert))
                .execute(&mut *tx)
                .await
                .map_err(|e| lease_core::Error::store(Operation::Fence, None, e))?;
            Ok::<_, lease_core::Error>(())
        })
        .await
    };
    // The simple protocol here too: a prepared statement of sqlx's own does not survive
    // transaction pooling.
    let count = async || -> i64 {
        sqlx::raw_sql(AssertSqlSafe(format!("SELECT count(*) FROM {notices}")))
            .fetch_one(&pool)
            .await
            .unwrap()
            .get(0)
    };
    for n in 0..10 {
        write(CheckAt::Commit, n).await.unwrap();
        write(CheckAt::Begin, n).await.unwrap();
    }
    assert_eq!(count().await, 20, "every fenced write committed");

    let expire = format!("UPDATE {table} SET expires_at = taken_at");
    sqlx::raw_sql(AssertSqlSafe(expire))
        .execute(&pool)
        .await
        .unwrap();
    for at in [CheckAt::Begin, CheckAt::Commit] {
        let refused = write(at, 99).await.unwrap_err();
        assert!(
            matches!(refused, lease_core::Error::NotHeld { .. }),
            "{at:?}: {refused}"
        );
    }
    assert_eq!(
        count().await,
        20,
        "nothing committed once the lease expired"
    );
    assert!(!guard.is_held());
    pool.close().await;
}
