//! Planned switchover of a PostgreSQL primary and its asynchronous streaming standby, on
//! private servers (`lease_tests::server::PostgresReplication`), while clients keep going on
//! the service address: the primary is shut down cleanly, the standby promoted, the old
//! primary brought back as a standby of the new one, and a second later the service address
//! moves. Clients that connect in that second reach the demoted server and are refused writes
//! (read-only).
//!
//! - Contenders (worker processes, one per driver, three tasks each, 3 s TTL) contend for
//!   three names through it all; the history checker finds no two believers of a name and
//!   strictly increasing fences. Each driver's process logs critical sections of its own and
//!   sees at most half its attempts fail.
//! - A long-held lease per driver (12 s TTL) either renews on the new primary with the same
//!   holder and fence, or its loss is reported; never is it believed held while the store
//!   shows it taken by somebody else, or has no row for it (a planned switchover loses no
//!   commit).
//! - The pool recovers without a restart: the same store, with a connection to the read-only
//!   server in its pool, acquires on the new primary. The time to recovery (from the start of
//!   the switchover to the first acquisition sent after it that succeeds) is measured and
//!   printed.
//!
//! It lasts `LEASE_RELIABILITY_FAILOVER_SECS` seconds (default 15).

use std::path::Path;
use std::time::{Duration, Instant};

use lease_core::{LeaseClient, LeaseGuard, LeaseName, LeaseStore, StoreErrorKind};
use lease_diesel::diesel_async::AsyncPgConnection;
use lease_reliability::Driver;
use lease_reliability::contenders::{Contenders, Contest};
use lease_reliability::db::{self, Db};
use lease_reliability::diesel::Diesel;
use lease_reliability::factory::{Sqlx, StoreFactory};
use lease_reliability::report::{self, Counts};
use lease_reliability::scenario::{Timing, runtime};
use lease_sqlx::sqlx::Postgres;
use lease_tests::env;
use lease_tests::server::Replication;

const WORKER: &str = env!("CARGO_BIN_EXE_lease-reliability-worker");
/// How long past their time the contenders may take to end.
const FINISH_SLACK: Duration = Duration::from_secs(30);
/// How long clients may reach the demoted server after the switchover.
const LINGER: Duration = Duration::from_secs(1);
/// How long after the switchover began the pool must have recovered.
const RECOVERY_LIMIT: Duration = Duration::from_secs(20);
/// The least number of critical sections each contender must log (each logs about fifty in
/// the default 15 s).
const SECTIONS_EACH: usize = 5;

fn duration() -> Duration {
    let secs = std::env::var("LEASE_RELIABILITY_FAILOVER_SECS")
        .ok()
        .and_then(|secs| secs.parse().ok())
        .unwrap_or(15);
    Duration::from_secs(secs)
}

fn timing() -> Timing {
    Timing::for_ttl(Duration::from_secs(12))
}

/// One driver's long-held lease and its probe of the pool.
struct Leg<S: LeaseStore + Clone> {
    store: S,
    counts: Counts,
    client: LeaseClient,
    keeper: LeaseGuard,
}

impl<S: LeaseStore + Clone> Leg<S> {
    async fn new<F: StoreFactory<Store = S>>(factory: &F, url: &str, table: &str) -> Self {
        let store = factory.connect(url, table, 4).await.expect("a store");
        let client = timing().client(store.clone());
        let name = format!("keeper-{}", factory.label().replace('/', "-"));
        let keeper = client
            .try_acquire(name.as_str())
            .await
            .expect("an acquisition")
            .expect("a free name");
        Self {
            store,
            counts: Counts::new("switchover", factory.label()),
            client,
            keeper,
        }
    }

    /// Acquires a probe name every 100 ms from `began` on, until one succeeds after the demoted
    /// server refused one as read-only: answers how long after `began` it came back, and how
    /// many attempts the demoted server refused as read-only before. A success before any
    /// refusal came from the old primary before its demotion took hold (the switchover runs on
    /// another thread, on a loaded machine late): it recovers nothing, and the probing goes on.
    async fn recovery(&mut self, began: Instant) -> (Option<Duration>, u64) {
        let probe = LeaseName::new(format!("probe-{}", self.counts.backend.replace('/', "-")))
            .expect("a valid name");
        let mut read_only = 0;
        while began.elapsed() < RECOVERY_LIMIT {
            self.counts.operations += 1;
            match self.client.try_acquire(&probe).await {
                Ok(Some(guard)) if read_only == 0 => {
                    let _ = guard.release().await;
                }
                Ok(Some(guard)) => {
                    let recovered = began.elapsed();
                    let _ = guard.release().await;
                    return (Some(recovered), read_only);
                }
                Err(error) if error.store_error_kind() == Some(StoreErrorKind::ReadOnly) => {
                    read_only += 1;
                }
                Ok(None) | Err(_) => {}
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        (None, read_only)
    }

    /// Records the switchover and what [`recovery`](Self::recovery) found.
    fn recovered(&mut self, (recovered, read_only): (Option<Duration>, u64)) {
        self.counts.faults += 1;
        // Without a refusal the pool never held a connection to the demoted server, and its
        // recovery shows nothing.
        self.counts.expect(read_only > 0, || {
            "no attempt reached the demoted server while the service address lingered there".into()
        });
        match recovered {
            Some(after) => eprintln!(
                "{}: time to recovery {after:?} (an acquisition on the new primary, same pool, \
                 after {read_only} refused as read-only by the demoted server)",
                self.counts.backend
            ),
            // Without a refusal, the expectation above says what went wrong.
            None if read_only == 0 => {}
            None => self.counts.violation(format!(
                "the pool did not recover within {RECOVERY_LIMIT:?} of the switchover"
            )),
        }
    }

    /// After the switchover: the long-held lease renewed on the new primary with the same
    /// holder and fence, or its loss reported; never believed while taken by another, watched
    /// for a TTL. The expiry a renewal must move on is read on the new primary, once it
    /// answers: read before the switchover, a renewal that reached the old primary before it
    /// shut down would count as one on the new.
    async fn keeper_outcome(&mut self) {
        let started = Instant::now();
        let name = self.keeper.name().clone();
        let mut baseline = None;
        let mut renewed = false;
        while started.elapsed() < timing().ttl {
            if !self.keeper.is_held() {
                // A guard no longer held has its loss to report at once.
                let Ok(reason) =
                    tokio::time::timeout(Duration::from_millis(100), self.keeper.lost()).await
                else {
                    self.counts
                        .violation("the long-held lease is not held but its guard reports no loss");
                    return;
                };
                eprintln!(
                    "{}: the long-held lease was lost: {reason:?}",
                    self.counts.backend
                );
                return;
            }
            self.counts.operations += 1;
            match self.store.inspect(&name).await {
                Ok(Some(row)) => {
                    let same =
                        row.fence == self.keeper.fence() && &row.holder == self.keeper.holder();
                    if !same && self.keeper.is_held() {
                        self.counts.violation(format!(
                            "the long-held lease is believed held while the store shows {row:?}"
                        ));
                        return;
                    }
                    match baseline {
                        None if same => baseline = Some(row.expires_at),
                        Some(before) if same && row.expires_at > before && !renewed => {
                            renewed = true;
                            eprintln!(
                                "{}: the long-held lease renewed on the new primary with fence {}",
                                self.counts.backend, row.fence
                            );
                        }
                        _ => {}
                    }
                }
                // Nobody else uses the keeper's name and it never released, and a planned
                // switchover loses no commit (the clean shutdown sends every one to the
                // standby, docs/replication.md): its row must be there. No row while the keeper
                // believes is the lost-acquisition case of a crash failover, not a switchover.
                Ok(None) if self.keeper.is_held() => {
                    self.counts.violation(format!(
                        "the long-held lease {name} is believed held while the store has no row \
                         for it: the switchover lost its acquisition"
                    ));
                    return;
                }
                // Lost meanwhile: the next round reports it.
                Ok(None) => {}
                // The store is still switching: asked again below, within the TTL.
                Err(_) => {}
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        self.counts.expect(renewed, || {
            "the long-held lease neither renewed on the new primary nor reported its loss in a \
             TTL"
            .to_owned()
        });
    }
}

#[test]
fn postgres_switchover() {
    let Some(mut pair) = db::replication_or_skip(Replication::Asynchronous) else {
        return;
    };
    let url = pair.url();
    let table = env::unique_table("switchover");
    let secs = duration();
    let sqlx = Sqlx::<Postgres>::new();
    let diesel = Diesel::<AsyncPgConnection>::new();
    let mut history = Counts::new("switchover-history", "postgres/sqlx+diesel");
    let (a, b, outcome) = runtime().block_on(async {
        let admin = sqlx.connect(&url, &table, 1).await.expect("a store");
        sqlx.setup(&admin).await.expect("the lease table");
        let contest = Contest {
            db: Db::Postgres,
            table: table.clone(),
            names: "sweep,alerts,mail-checks".to_owned(),
            tasks: 3,
            ttl_ms: 3_000,
            secs: secs.as_secs(),
        };
        let members = [(Driver::Sqlx, url.clone()), (Driver::Diesel, url.clone())];
        let contenders =
            Contenders::start(Path::new(WORKER), &contest, &members).expect("contenders start");
        let mut a = Leg::new(&sqlx, &url, &table).await;
        let mut b = Leg::new(&diesel, &url, &table).await;
        tokio::time::sleep(secs / 3).await;

        let began = Instant::now();
        // The switchover blocks this task's thread; the clients run on the other worker.
        let switched = tokio::spawn(async move {
            let done = tokio::task::block_in_place(|| pair.switchover(LINGER).map(|()| pair));
            (done, began.elapsed())
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (recovered_a, recovered_b) = tokio::join!(a.recovery(began), b.recovery(began));
        let (pair, took) = switched.await.expect("the switchover task");
        let pair = pair.expect("the switchover");
        eprintln!("postgres: the switchover took {took:?} (the service address moved last)");
        a.recovered(recovered_a);
        b.recovered(recovered_b);
        tokio::join!(a.keeper_outcome(), b.keeper_outcome());
        let outcome =
            tokio::task::block_in_place(|| contenders.finish(&mut history, secs + FINISH_SLACK));
        drop(pair);
        (a, b, outcome)
    });
    history.faults = 1;
    history.operations = outcome.attempts + outcome.verdict.sections as u64;
    history.expect(outcome.verdict.sections >= 10, || {
        format!(
            "only {} critical sections: the history shows little",
            outcome.verdict.sections
        )
    });
    outcome.expect_each(&mut history, SECTIONS_EACH);
    eprintln!(
        "switchover: {} critical sections ({} ended by loss) per name {:?}, {} attempts, {} \
         failed",
        outcome.verdict.sections,
        outcome.verdict.lost,
        outcome.verdict.per_name,
        outcome.attempts,
        outcome.errors
    );
    for member in &outcome.members {
        eprintln!(
            "  {}: {} sections, {} attempts, {} failed",
            member.driver.as_str(),
            member.sections,
            member.attempts,
            member.errors
        );
    }
    report::conclude_all(&[&a.counts, &b.counts, &history]);
}
