//! MariaDB Galera, three nodes on private servers (`lease_tests::server::GaleraCluster`),
//! every node written to.
//!
//! - Contenders (four worker processes, three tasks each, on nodes 0, 1, 2 and 0, lease-sqlx
//!   and lease-diesel in turn) contend for the same three names. The history checker finds
//!   no two believers of a name and strictly increasing fences. A certification conflict
//!   between two nodes' acquisitions is answered "not acquired": no round fails with an
//!   error.
//! - Beside them, per driver, holders on two nodes take turns with one name: each holds for
//!   two TTLs (so renewals must go through), writing to a protected table in fenced
//!   transactions, and then releases; a write under the released lease is refused. Every
//!   second turn ends instead with an operator's forced release on the other node and, at
//!   once, a write of the holder, which still believes it holds the lease, on its own node:
//!   nothing of it may commit, and at least one such write in the run must have been kept out
//!   by the cluster (the check on the holder's node found the lease gone, or certification
//!   failed the check's write of the row against the release), not by the holder's guard.
//!   The release follows one of the holder's renewals at once, so that the next is a quarter
//!   TTL away; should a renewal still learn of the release first, every later turn ends with a
//!   forced release too while none has been kept out by the cluster.
//!   Fences increase from holder to holder and the committed writes hold no stale write.
//! - Whether the contenders collide within the few hundred microseconds a write takes to reach
//!   the other nodes is chance: some runs count dozens of conflicts, some none. So after them,
//!   collisions are made on purpose: in each round one client per node and a second on node 0,
//!   lease-sqlx and lease-diesel in turn, try to acquire the same new name at once. Exactly one
//!   takes it, the others answer "not acquired", none fails. The rounds go on (at least
//!   `LEASE_RELIABILITY_GALERA_ROUNDS`, default 20, then at most `EXTRA_COLLISION_ROUNDS` more
//!   within `COLLISION_TIME`) until the cluster's own counters (`wsrep_local_cert_failures` and
//!   `wsrep_local_bf_aborts`, summed over the nodes) show a conflict, or the run would show
//!   nothing about them. Then the same once more with the nodes' own retry of a conflicting
//!   autocommit statement turned off (`wsrep_retry_autocommit = 0`, 1 by default): the
//!   library's answer to a conflict alone must make every loser's answer "not acquired".
//!   The control: the same rounds of plain inserts of one key, each sent once with no library,
//!   must see statements fail with a conflict, or the rounds would not catch a store that
//!   passes a conflict on as an error.
//!
//! No server, network or process fault is injected (the forced releases of the turns and the
//! collision rounds are the only provocations): `galera-history`'s RELIABILITY line counts the
//! cluster's certification conflicts as faults, and `galera-fenced`'s counts none.
//! It lasts `LEASE_RELIABILITY_GALERA_SECS` seconds (default 12), after the cluster starts
//! (about 15 s).

use std::path::Path;
use std::time::{Duration, Instant};

use futures::future::join_all;

use lease_core::{BoxError, LeaseClient, LeaseHandle};
use lease_diesel::diesel_async::AsyncMysqlConnection;
use lease_reliability::Driver;
use lease_reliability::contenders::{Contenders, Contest};
use lease_reliability::db::{self, Db};
use lease_reliability::diesel::Diesel;
use lease_reliability::factory::{Sqlx, StoreFactory};
use lease_reliability::fenced::{self, FencedWrites, Protected};
use lease_reliability::report::{self, Counts};
use lease_reliability::scenario::{Timing, runtime, take_over};
use lease_sqlx::CheckAt;
use lease_sqlx::sqlx::mysql::MySqlDatabaseError;
use lease_sqlx::sqlx::{self, Connection, MySql, MySqlConnection, Row};
use lease_tests::env;

const WORKER: &str = env!("CARGO_BIN_EXE_lease-reliability-worker");
/// How long past their time the contenders may take to end.
const FINISH_SLACK: Duration = Duration::from_secs(30);
/// How long one call of the scenario's own (a write, a read of the protected table, a forced
/// release) may take: a node that accepts connections and never answers ends the call with an
/// error, not the test run with a hang.
const CALL_LIMIT: Duration = Duration::from_secs(15);

/// A fenced write that had no answer within [`CALL_LIMIT`]: it may still commit, so it is no
/// refusal.
#[derive(Debug)]
struct NoAnswer;

impl std::fmt::Display for NoAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the fenced write had no answer within {CALL_LIMIT:?}")
    }
}

impl std::error::Error for NoAnswer {}
/// Collision rounds played past the least number when the cluster has counted no conflict yet.
const EXTRA_COLLISION_ROUNDS: u64 = 380;
/// The collision rounds stop after this long past the time their least number takes (a few
/// milliseconds a round), however many were played.
const COLLISION_TIME: Duration = Duration::from_secs(20);

/// The least number of collision rounds: `LEASE_RELIABILITY_GALERA_ROUNDS` (default 20).
fn collision_rounds() -> u64 {
    std::env::var("LEASE_RELIABILITY_GALERA_ROUNDS")
        .ok()
        .and_then(|rounds| rounds.parse().ok())
        .unwrap_or(20)
}

/// Critical sections each contender of the history must log at least.
const SECTIONS_EACH: usize = 1;

fn duration() -> Duration {
    let secs = std::env::var("LEASE_RELIABILITY_GALERA_SECS")
        .ok()
        .and_then(|secs| secs.parse().ok())
        .unwrap_or(12);
    Duration::from_secs(secs)
}

fn timing() -> Timing {
    Timing::for_ttl(Duration::from_secs(2))
}

/// Holders of one driver on two nodes take turns with one name until `until`.
async fn turns<F: FencedWrites>(
    factory: F,
    urls: [&str; 2],
    table: &str,
    until: Instant,
) -> Counts {
    let timing = timing();
    let label = factory.label().replace("mariadb", "mariadb-galera");
    let mut counts = Counts::new("galera-fenced", label);
    let driver = counts.backend.replace(['/', '-'], "_");
    let protected = Protected::new(format!("{table}_{driver}"));
    let name = format!("ledger-{driver}");
    let mut stores = Vec::new();
    for url in urls {
        stores.push(
            bounded("a node's store", factory.connect(url, table, 3))
                .await
                .expect("a store"),
        );
    }
    for statement in protected.create() {
        bounded(
            "the protected table",
            factory.execute(&stores[0], &statement),
        )
        .await
        .unwrap();
    }
    let clients: Vec<_> = stores.iter().map(|s| timing.client(s.clone())).collect();
    let mut fences = Vec::new();
    let mut turn = 0;
    // Forced releases whose late write the cluster kept out (the check on the holder's node
    // found the lease gone, or certification failed it), not the holder's guard.
    let mut kept_out_by_cluster = 0;
    while Instant::now() < until {
        let node = turn % 2;
        turn += 1;
        let takeover = match take_over(
            &clients[node],
            &name,
            Duration::from_millis(50),
            timing.ttl * 2,
        )
        .await
        {
            Ok(takeover) => takeover,
            Err(error) => {
                counts.violation(error);
                break;
            }
        };
        counts.operations += takeover.attempts;
        let guard = takeover.guard;
        fences.push(guard.fence().get());
        let held = Instant::now();
        let (mut committed, mut failed) = (0, Vec::new());
        while held.elapsed() < timing.ttl * 2 {
            counts.operations += 1;
            match checked_write(&factory, &stores[node], guard.as_ref(), &protected, &driver).await
            {
                Ok(_) => committed += 1,
                Err(error) if fenced::is_refusal(&error) => {
                    counts.violation(format!("a fenced write of the holder was refused: {error}"));
                    break;
                }
                // A certification conflict rolls the write back; nothing was committed.
                Err(error) if fenced::is_conflict(&error) => {}
                // Anything else is no part of the scenario: counted, and too many fail the run.
                Err(error) => failed.push(error.to_string()),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Every holder writes: a node or driver whose fenced writes all fail (the check's
        // statement refused there, say) would otherwise pass on the other node's writes.
        counts.expect(committed > 0 && failed.len() * 2 <= committed, || {
            format!(
                "holder {turn} on node {node} committed {committed} fenced writes, and {} \
                 failed otherwise than by a conflict: {:?}",
                failed.len(),
                failed.first()
            )
        });
        counts.expect(guard.is_held(), || {
            format!("holder {turn} on node {node} lost its lease with no fault: renewals failed")
        });
        // Every second turn ends with a forced release, and so does every later one while no
        // late write has been kept out by the cluster yet: the release follows a renewal at
        // once, but a renewal that failed or was late can still come in the milliseconds
        // before the late write, and then the holder's own guard refuses the write.
        if turn % 2 == 0 || (turn > 2 && kept_out_by_cluster == 0) {
            // An operator's forced release on the other node, then at once a write of the
            // holder, which still believes it holds the lease, on its own node: the check must
            // keep it out there (the release replicated: `NotHeld`) or the cluster must (not
            // yet applied: the check's write of the row fails certification against it).
            let fence = guard.fence().get() as i64;
            let before = committed_of(&factory, &stores[node], &protected, fence).await;
            let not_held = clients[node].stats().fenced_checks.not_held;
            // Right after a renewal the next is a quarter TTL away, far longer than the
            // release and the write take.
            renewed(&clients[node], timing.renew_every * 3).await;
            let forced = format!("UPDATE {table} SET holder = NULL WHERE name = '{name}'");
            let release = factory.execute(&stores[1 - node], &forced);
            if let Err(error) = tokio::time::timeout(CALL_LIMIT, release)
                .await
                .map_err(|_| format!("no answer within {CALL_LIMIT:?}"))
                .and_then(|answer| answer.map_err(|error| error.to_string()))
            {
                counts.violation(format!("the forced release failed: {error}"));
                break;
            }
            let late =
                checked_write(&factory, &stores[node], guard.as_ref(), &protected, &driver).await;
            counts.operations += 1;
            let after = committed_of(&factory, &stores[node], &protected, fence).await;
            // A write that had no answer may still commit: no proof it was kept out.
            let unanswered = late.as_ref().is_err_and(|error| error.is::<NoAnswer>());
            counts.expect(!unanswered && late.is_err() && before.is_some() && before == after, || {
                format!(
                    "a fenced write after a forced release on the other node answered {late:?}; \
                     committed writes of fence {fence}: {before:?} before, {after:?} after"
                )
            });
            let by_database = clients[node].stats().fenced_checks.not_held > not_held;
            // A lost certification, not any failure: a pool timeout or a broken connection
            // keeps nothing out.
            let certified = late.as_ref().is_err_and(fenced::is_conflict);
            if by_database || certified {
                kept_out_by_cluster += 1;
            }
            // The lease is gone: its guard is lost, or learns it at its next renewal.
            drop(guard);
            continue;
        }
        let handle = guard.handle();
        if let Err(error) = guard.release().await {
            counts.violation(format!("a release failed: {error}"));
        }
        // A write under the released lease, on the other node.
        let late = checked_write(&factory, &stores[1 - node], &handle, &protected, &driver).await;
        counts.operations += 1;
        counts.expect(late.as_ref().is_err_and(fenced::is_refusal), || {
            format!("a fenced write under a released lease answered {late:?}")
        });
    }
    counts.expect(fences.windows(2).all(|w| w[0] < w[1]), || {
        format!("fences did not increase from holder to holder: {fences:?}")
    });
    counts.expect(fences.len() >= 2, || {
        format!("only {} turns: nothing changed hands", fences.len())
    });
    counts.expect(kept_out_by_cluster >= 1, || {
        "no write after a forced release was kept out by the cluster: every one was refused \
         by the holder's own guard, so the nodes' check went untested"
            .into()
    });
    match tokio::time::timeout(CALL_LIMIT, factory.writes(&stores[0], &protected))
        .await
        .map_err(|_| format!("no answer within {CALL_LIMIT:?}").into())
        .and_then(|answer| answer)
    {
        Ok(writes) => {
            // Acquisitions unrecorded: a node's plain read of the counter may not yet hold a
            // write set another node committed first (applied after certification), so a
            // reading after an acquisition would not mark where commit order stood.
            let verdict = fenced::check(&writes, &[]);
            eprintln!(
                "{}: {} turns, fences {fences:?}, {} fenced writes committed",
                counts.backend,
                fences.len(),
                verdict.writes
            );
            counts.expect(verdict.writes > 0, || "no fenced write committed".into());
            for stale in &verdict.stale {
                counts.violation(stale.to_string());
            }
        }
        Err(error) => counts.violation(format!("the writes could not be read: {error}")),
    }
    counts
}

/// Waits, at most `limit`, until `client` has renewed a lease once more.
async fn renewed(client: &LeaseClient, limit: Duration) {
    let renewals = client.stats().renewals;
    let waited = Instant::now();
    while client.stats().renewals == renewals && waited.elapsed() < limit {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// One write by `driver` under `lease` through `store`, checked with the commit (every fenced
/// write of these turns is).
async fn checked_write<F: FencedWrites>(
    factory: &F,
    store: &F::Store,
    lease: &LeaseHandle,
    protected: &Protected,
    driver: &str,
) -> Result<i64, BoxError> {
    let write = factory.write(store, lease, Some(CheckAt::Commit), protected, driver);
    match tokio::time::timeout(CALL_LIMIT, write).await {
        Ok(answer) => answer,
        Err(_) => Err(Box::new(NoAnswer)),
    }
}

/// How many writes of `fence` the protected table holds, as `store`'s node reads it; `None`
/// when they cannot be read.
async fn committed_of<F: FencedWrites>(
    factory: &F,
    store: &F::Store,
    protected: &Protected,
    fence: i64,
) -> Option<usize> {
    let writes = tokio::time::timeout(CALL_LIMIT, factory.writes(store, protected))
        .await
        .ok()?
        .ok()?;
    Some(writes.iter().filter(|write| write.fence == fence).count())
}

/// Collision rounds on `table` until the cluster at `urls` has counted a conflict (see the
/// module's documentation).
async fn collisions(urls: &[String], table: &str, scenario: &str) -> Counts {
    let mut counts = Counts::new(scenario, "mariadb-galera/sqlx+diesel");
    let timing = timing();
    let sqlx = Sqlx::<MySql>::new();
    let diesel = Diesel::<AsyncMysqlConnection>::new();
    let mut clients: Vec<LeaseClient> = Vec::new();
    for (i, url) in [&urls[0], &urls[1], &urls[2], &urls[0]]
        .into_iter()
        .enumerate()
    {
        let client = if i % 2 == 0 {
            timing.client(
                bounded("a node's store", sqlx.connect(url, table, 1))
                    .await
                    .expect("a store"),
            )
        } else {
            timing.client(
                bounded("a node's store", diesel.connect(url, table, 1))
                    .await
                    .expect("a store"),
            )
        };
        clients.push(client);
    }
    let before = conflicts(urls).await;
    let started = Instant::now();
    let mut rounds = 0;
    let least = collision_rounds();
    let time =
        COLLISION_TIME + Duration::from_millis(20) * u32::try_from(least).unwrap_or(u32::MAX);
    while rounds < least + EXTRA_COLLISION_ROUNDS && started.elapsed() < time {
        let name = format!("{scenario}-{rounds}");
        rounds += 1;
        // Every client sends its statement on the first poll, before any answer comes back.
        let answers = join_all(clients.iter().map(|c| c.try_acquire(name.as_str()))).await;
        counts.operations += answers.len() as u64;
        let mut winners = Vec::new();
        for (client, answer) in answers.into_iter().enumerate() {
            match answer {
                Ok(Some(guard)) => winners.push(guard),
                Ok(None) => {}
                Err(error) => counts.violation(format!(
                    "round {rounds}: client {client} failed instead of answering: {error}"
                )),
            }
        }
        counts.expect(winners.len() <= 1, || {
            format!("round {rounds}: {} clients acquired {name}", winners.len())
        });
        counts.expect(!winners.is_empty(), || {
            format!("round {rounds}: no client acquired the free lease {name}")
        });
        for guard in winners {
            counts.operations += 1;
            if let Err(error) = guard.release().await {
                counts.violation(format!("round {rounds}: a release failed: {error}"));
            }
        }
        if rounds >= least && rounds % 10 == 0 && conflicts(urls).await > before {
            break;
        }
    }
    let seen = conflicts(urls).await - before;
    counts.faults = seen;
    eprintln!(
        "galera collisions: {rounds} rounds in {:?}, {seen} certification conflicts",
        started.elapsed()
    );
    counts.expect(seen > 0, || {
        format!(
            "no certification conflict in {rounds} rounds of simultaneous acquisitions: \
             the run shows nothing about them"
        )
    });
    counts
}

/// The control of the collision rounds: the same rounds with no library, four connections
/// inserting the same new key at once into a table of their own, each statement sent once (the
/// nodes' own retry is off by then).
/// It shows that the rounds make conflicts reach a client that does not answer them (the
/// losers' statements fail with a deadlock, MariaDB's error 1213), so the rounds would catch a
/// store that passed one on as an error.
async fn raw_collisions(urls: &[String]) -> Counts {
    let mut counts = Counts::new("galera-collisions-control", "mariadb-galera/sqlx");
    let mut connections = Vec::new();
    for url in [&urls[0], &urls[1], &urls[2], &urls[0]] {
        connections.push(
            bounded("a node", MySqlConnection::connect(url))
                .await
                .expect("a node"),
        );
    }
    bounded(
        "the control's table",
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS galera_collisions_control \
             (name VARCHAR(64) PRIMARY KEY, n BIGINT NOT NULL) ENGINE = InnoDB",
        )
        .execute(&mut connections[0]),
    )
    .await
    .expect("the control's table");
    let least = collision_rounds();
    let started = Instant::now();
    let mut rounds = 0;
    while rounds < least + EXTRA_COLLISION_ROUNDS
        && started.elapsed() < COLLISION_TIME
        && (rounds < least || counts.faults == 0)
    {
        let name = format!("control-{rounds}");
        rounds += 1;
        let answers = bounded(
            "a control round",
            join_all(connections.iter_mut().map(|connection| {
                sqlx::query(
                    "INSERT INTO galera_collisions_control (name, n) VALUES (?, 1) \
                     ON DUPLICATE KEY UPDATE n = n + 1",
                )
                .bind(name.clone())
                .execute(connection)
            })),
        )
        .await;
        for answer in answers {
            counts.operations += 1;
            if let Err(error) = answer {
                let number = error
                    .as_database_error()
                    .and_then(|e| e.try_downcast_ref::<MySqlDatabaseError>())
                    .map(MySqlDatabaseError::number);
                counts.expect(number == Some(1213), || {
                    format!("round {rounds}: a statement failed with another error than a conflict: {error}")
                });
                counts.faults += 1;
            }
        }
    }
    eprintln!(
        "galera collisions, control: {rounds} rounds, {} of {} statements failed with a conflict",
        counts.faults, counts.operations
    );
    counts.expect(counts.faults > 0, || {
        format!(
            "no statement of {rounds} control rounds failed with a conflict: the collision \
             rounds would not catch a store that passes a conflict on as an error"
        )
    });
    counts
}

/// `call`'s answer within [`CALL_LIMIT`]: a node that never answers fails the run, naming
/// `what`, rather than hang it.
async fn bounded<T>(what: &str, call: impl Future<Output = T>) -> T {
    tokio::time::timeout(CALL_LIMIT, call)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within {CALL_LIMIT:?}"))
}

/// Turns off every node's own retry of an autocommit statement that lost a certification
/// (`wsrep_retry_autocommit`, 1 by default).
async fn no_server_retries(urls: &[String]) {
    for url in urls {
        let mut connection = bounded("a node", MySqlConnection::connect(url))
            .await
            .expect("a node");
        bounded(
            "the node's setting",
            sqlx::query("SET GLOBAL wsrep_retry_autocommit = 0").execute(&mut connection),
        )
        .await
        .expect("the node's setting");
    }
}

/// Certification failures and brute-force aborts, summed over the nodes.
async fn conflicts(urls: &[String]) -> u64 {
    let mut total = 0;
    for url in urls {
        let mut connection = bounded("a node", MySqlConnection::connect(url))
            .await
            .expect("a node");
        let rows = bounded(
            "the node's counters",
            sqlx::query(
                "SHOW GLOBAL STATUS WHERE Variable_name IN \
                 ('wsrep_local_cert_failures', 'wsrep_local_bf_aborts')",
            )
            .fetch_all(&mut connection),
        )
        .await
        .expect("the node's counters");
        for row in rows {
            let value: String = row.get(1);
            total += value.parse::<u64>().unwrap_or(0);
        }
    }
    total
}

#[test]
fn galera_contention() {
    let Some(cluster) = db::galera_or_skip(3) else {
        return;
    };
    let urls = cluster.urls();
    let table = env::unique_table("galera");
    let secs = duration();
    let mut history = Counts::new("galera-history", "mariadb-galera/sqlx+diesel");
    let (outcome, a, b, conflicts, collided) = runtime().block_on(async {
        let sqlx = Sqlx::<MySql>::new();
        let admin = bounded("a node's store", sqlx.connect(&urls[0], &table, 1))
            .await
            .expect("a store");
        bounded("the lease table", sqlx.setup(&admin))
            .await
            .expect("the lease table");
        let contest = Contest {
            db: Db::MariaDb,
            table: table.clone(),
            names: "sweep,alerts,mail-checks".to_owned(),
            tasks: 3,
            ttl_ms: 2_000,
            secs: secs.as_secs(),
        };
        let members = [
            (Driver::Sqlx, urls[0].clone()),
            (Driver::Diesel, urls[1].clone()),
            (Driver::Sqlx, urls[2].clone()),
            (Driver::Diesel, urls[0].clone()),
        ];
        // The cluster's counters hold every conflict since it started: counted from here.
        let before = conflicts(&urls).await;
        let contenders =
            Contenders::start(Path::new(WORKER), &contest, &members).expect("contenders start");
        let until = Instant::now() + secs;
        let (a, b) = tokio::join!(
            turns(sqlx, [&urls[0], &urls[2]], &table, until),
            turns(
                Diesel::<AsyncMysqlConnection>::new(),
                [&urls[1], &urls[2]],
                &table,
                until
            ),
        );
        let outcome =
            tokio::task::block_in_place(|| contenders.finish(&mut history, secs + FINISH_SLACK));
        let contest_conflicts = conflicts(&urls).await.saturating_sub(before);
        let collided = collisions(&urls, &table, "galera-collisions").await;
        no_server_retries(&urls).await;
        let alone = collisions(&urls, &table, "galera-collisions-no-server-retry").await;
        let control = raw_collisions(&urls).await;
        (outcome, a, b, contest_conflicts, (collided, alone, control))
    });
    drop(cluster);
    history.operations = outcome.attempts + outcome.verdict.sections as u64;
    // No fault is injected into the contenders: the cluster's certification conflicts are this
    // run's faults.
    history.faults = conflicts;
    eprintln!(
        "galera: {} critical sections ({} ended by loss) per name {:?}, per contender {:?}, \
         {} attempts, {} failed, {conflicts} certification conflicts in the cluster",
        outcome.verdict.sections,
        outcome.verdict.lost,
        outcome.verdict.per_name,
        outcome
            .members
            .iter()
            .map(|member| member.sections)
            .collect::<Vec<_>>(),
        outcome.attempts,
        outcome.errors
    );
    history.expect(outcome.errors == 0, || {
        format!(
            "{} acquisition rounds failed with an error instead of answering",
            outcome.errors
        )
    });
    history.expect(outcome.verdict.sections >= 10, || {
        format!(
            "only {} critical sections: the history shows little",
            outcome.verdict.sections
        )
    });
    // Each node's contender took part: one whose every acquisition answered "not acquired"
    // (a conflict misread) would otherwise pass on the other nodes' sections.
    outcome.expect_each(&mut history, SECTIONS_EACH);
    report::conclude_all(&[&a, &b, &history, &collided.0, &collided.1, &collided.2]);
}
