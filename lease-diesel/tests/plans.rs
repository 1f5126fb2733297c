//! Plans that cannot go wrong, on PostgreSQL through diesel-async (deadpool), whose store
//! prepares each statement once per connection in diesel's statement cache: on a lease table
//! analyzed while empty and then grown past 10,000 rows, every statement of the store (all but
//! `list`, a full read by nature), each prepared once and run more than ten times on one
//! connection, so that PostgreSQL considers its generic plan after the fifth run, reads the
//! table through its index and never with a sequential scan (but for the statements in
//! `KNOWN_SEQUENTIAL`). The counters are the table's own in `pg_stat_user_tables`, read before
//! and after each statement's runs. A deliberately unindexed lookup on the same table, read the
//! same way, is the negative control: the check does see sequential scans.
//!
//! Each case runs twice: with PostgreSQL's default `plan_cache_mode` (`auto`) and with
//! `force_generic_plan`, the plan every later run of a prepared statement may get.

use std::time::Duration;

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text};
use diesel_async::pooled_connection::AsyncDieselConnectionManager;
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::{AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};
use lease_core::runtime::TokioRuntime;
use lease_core::{HolderId, LeaseClient, LeaseName, LeaseStore, Ttl};
use lease_diesel::DieselStore;
use lease_tests::env;

/// Released rows put into the table after it was analyzed empty.
const FILLER: usize = 12_000;
/// Runs of each statement: past the fifth, PostgreSQL may choose the generic plan.
const RUNS: usize = 12;
/// Statements known to read the table with a sequential scan, reported and not failed; the
/// test fails once one of them no longer does, so that it leaves this list. None now:
/// renew_many, which joins the table to its JSON lists unpacked (PostgreSQL guesses 100 rows
/// for them, and below about 50,000 rows hashed the whole table), also filters on the key with
/// `name = ANY (...)`, which the index serves.
const KNOWN_SEQUENTIAL: &[&str] = &[];

/// The table's scan counters.
#[derive(Debug, Clone, Copy)]
struct Scans {
    seq: i64,
    idx: i64,
}

#[derive(QueryableByName)]
struct Counters {
    #[diesel(sql_type = BigInt)]
    seq: i64,
    #[diesel(sql_type = BigInt)]
    idx: i64,
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    #[allow(dead_code)]
    n: i64,
}

#[derive(QueryableByName, Debug)]
struct Prepared {
    #[diesel(sql_type = BigInt)]
    generic: i64,
    #[diesel(sql_type = BigInt)]
    custom: i64,
    #[diesel(sql_type = Text)]
    statement: String,
}

/// One store on a fresh, grown table, on a pool of one connection.
struct Fixture {
    pool: Pool<AsyncPgConnection>,
    store: DieselStore<Pool<AsyncPgConnection>>,
    table: String,
}

impl Fixture {
    async fn new(plan_cache_mode: &str) -> Option<Self> {
        let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new(env::postgres_url());
        let pool = Pool::builder(manager).max_size(1).build().unwrap();
        if let Err(e) = pool.get().await {
            env::skip_or_fail("postgres", &e.to_string());
            return None;
        }
        let table = env::unique_table("lease_diesel_plans");
        let store = DieselStore::with_table(pool.clone(), &table).unwrap();
        store.setup().await.unwrap();
        let fixture = Self { pool, store, table };
        // Statistics of an empty table, which autovacuum is not to refresh: the worst estimate
        // a table that grew since its last ANALYZE can have.
        fixture
            .run_sql(&format!(
                "ALTER TABLE {} SET (autovacuum_enabled = false)",
                fixture.table
            ))
            .await;
        fixture.run_sql(&format!("ANALYZE {}", fixture.table)).await;
        fixture
            .run_sql(&format!(
                "INSERT INTO {} (name, holder, fence, taken_at, expires_at) \
                 SELECT 'filler-' || i, NULL, 1, now(), now() FROM generate_series(1, {FILLER}) AS i",
                fixture.table
            ))
            .await;
        // The pool's one connection keeps the setting.
        fixture
            .run_sql(&format!("SET plan_cache_mode = {plan_cache_mode}"))
            .await;
        Some(fixture)
    }

    async fn run_sql(&self, sql: &str) {
        let mut connection = self.pool.get().await.unwrap();
        connection.batch_execute(sql).await.unwrap();
    }

    /// The table's counters, once the pool's one connection has flushed its statistics.
    async fn scans(&self) -> Scans {
        self.run_sql("SELECT pg_stat_force_next_flush()").await;
        // A statement of its own, so a transaction of its own: a fresh statistics snapshot.
        self.run_sql("SELECT pg_stat_clear_snapshot()").await;
        let mut connection = self.pool.get().await.unwrap();
        let counters: Counters = diesel::sql_query(
            "SELECT seq_scan AS seq, coalesce(idx_scan, 0) AS idx FROM pg_stat_user_tables \
             WHERE relid = $1::text::regclass",
        )
        .bind::<Text, _>(&self.table)
        .get_result(&mut *connection)
        .await
        .unwrap();
        Scans {
            seq: counters.seq,
            idx: counters.idx,
        }
    }

    async fn finish(self) {
        self.run_sql(&format!("DROP TABLE {}", self.table)).await;
        self.pool.close();
    }
}

/// What one statement did to the counters over its runs.
#[derive(Debug)]
struct Delta {
    statement: &'static str,
    seq: i64,
    idx: i64,
}

/// Runs `runs` and measures them.
async fn measured(fixture: &Fixture, statement: &'static str, runs: impl AsyncFnOnce()) -> Delta {
    let before = fixture.scans().await;
    runs().await;
    let after = fixture.scans().await;
    Delta {
        statement,
        seq: after.seq - before.seq,
        idx: after.idx - before.idx,
    }
}

fn names(prefix: &str) -> Vec<LeaseName> {
    (1..=RUNS)
        .map(|i| LeaseName::new(format!("{prefix}-{i}")).unwrap())
        .collect()
}

async fn every_statement(plan_cache_mode: &str) {
    let Some(fixture) = Fixture::new(plan_cache_mode).await else {
        return;
    };
    let store = &fixture.store;
    let ttl = Ttl::from_secs(60).unwrap();
    let holder = HolderId::generate();
    let other = HolderId::generate();
    let fresh = names("plan");
    let released = names("filler");
    let mut deltas = Vec::new();

    deltas.push(
        measured(&fixture, "try_acquire, a new name", async || {
            for name in &fresh {
                assert!(
                    store
                        .try_acquire(name, &holder, ttl)
                        .await
                        .unwrap()
                        .is_some()
                );
            }
        })
        .await,
    );
    deltas.push(
        measured(&fixture, "try_acquire, a held name", async || {
            for name in &fresh {
                assert!(
                    store
                        .try_acquire(name, &other, ttl)
                        .await
                        .unwrap()
                        .is_none()
                );
            }
        })
        .await,
    );
    deltas.push(
        measured(&fixture, "try_acquire, a released row", async || {
            for name in &released {
                assert!(
                    store
                        .try_acquire(name, &holder, ttl)
                        .await
                        .unwrap()
                        .is_some()
                );
            }
        })
        .await,
    );
    deltas.push(
        measured(&fixture, "renew", async || {
            for name in &fresh {
                assert!(store.renew(name, &holder, ttl).await.unwrap());
            }
        })
        .await,
    );
    let pairs: Vec<(LeaseName, HolderId)> = fresh
        .iter()
        .chain(&released)
        .map(|name| (name.clone(), holder.clone()))
        .collect();
    deltas.push(
        measured(&fixture, "renew_many", async || {
            // Batches of 1 to 12 pairs: one text, however many.
            for size in 1..=RUNS {
                let renewed = store.renew_many(&pairs[..size], ttl).await.unwrap();
                assert_eq!(renewed, vec![true; size]);
            }
            let renewed = store.renew_many(&pairs, ttl).await.unwrap();
            assert_eq!(renewed, vec![true; pairs.len()]);
        })
        .await,
    );
    deltas.push(
        measured(&fixture, "inspect", async || {
            for name in &fresh {
                assert!(store.inspect(name).await.unwrap().is_some());
            }
        })
        .await,
    );
    deltas.push(
        measured(&fixture, "release", async || {
            for name in fresh.iter().chain(&released) {
                assert!(store.release(name, &holder, Duration::ZERO).await.unwrap());
            }
        })
        .await,
    );
    let client = LeaseClient::builder(store.clone(), TokioRuntime)
        .ttl(ttl)
        .build()
        .unwrap();
    let guard = client.try_acquire("fenced").await.unwrap().unwrap();
    deltas.push(
        measured(&fixture, "fence, in a transaction", async || {
            for _ in 0..RUNS {
                let mut connection = fixture.pool.get().await.unwrap();
                connection.batch_execute("BEGIN").await.unwrap();
                store.fence(&mut *connection, &guard).await.unwrap();
                connection.batch_execute("COMMIT").await.unwrap();
            }
        })
        .await,
    );
    guard.release().await.unwrap();

    // The negative control: the same counters see a lookup no index serves.
    let unindexed = format!(
        "SELECT count(*) AS n FROM {} WHERE holder = $1",
        fixture.table
    );
    let control = measured(&fixture, "control: an unindexed lookup", async || {
        for _ in 0..RUNS {
            let mut connection = fixture.pool.get().await.unwrap();
            let _: Count = diesel::sql_query(&unindexed)
                .bind::<Text, _>(holder.as_str())
                .get_result(&mut *connection)
                .await
                .unwrap();
        }
    })
    .await;

    let mut connection = fixture.pool.get().await.unwrap();
    let plans: Vec<Prepared> = diesel::sql_query(
        "SELECT generic_plans AS generic, custom_plans AS custom, \
         left(regexp_replace(statement, '\\s+', ' ', 'g'), 60) AS statement \
         FROM pg_prepared_statements WHERE statement LIKE '%' || $1 || '%' ORDER BY statement",
    )
    .bind::<Text, _>(&fixture.table)
    .load(&mut *connection)
    .await
    .unwrap();
    drop(connection);
    env::report(&format!(
        "plans through diesel, plan_cache_mode = {plan_cache_mode}, {FILLER} rows:"
    ));
    for delta in deltas.iter().chain([&control]) {
        let known = if KNOWN_SEQUENTIAL.contains(&delta.statement) {
            " (known, see KNOWN_SEQUENTIAL)"
        } else {
            ""
        };
        env::report(&format!(
            "  {:<30} seq_scan +{:<3} idx_scan +{}{known}",
            delta.statement, delta.seq, delta.idx
        ));
    }
    for plan in &plans {
        env::report(&format!(
            "  prepared: {:>2} generic, {:>2} custom plans: {}",
            plan.generic, plan.custom, plan.statement
        ));
    }
    fixture.finish().await;

    let known = |d: &&Delta| KNOWN_SEQUENTIAL.contains(&d.statement);
    let scanned: Vec<&Delta> = deltas
        .iter()
        .filter(|d| !known(d))
        .filter(|d| d.seq != 0 || d.idx == 0)
        .collect();
    assert!(
        scanned.is_empty(),
        "statements that read the table without its index: {scanned:?}"
    );
    let mended: Vec<&Delta> = deltas
        .iter()
        .filter(known)
        .filter(|d| d.seq == 0 && d.idx > 0)
        .collect();
    assert!(
        mended.is_empty(),
        "no longer scanned, take them off KNOWN_SEQUENTIAL: {mended:?}"
    );
    assert!(
        control.seq >= 1,
        "the check saw no sequential scan: {control:?}"
    );
    if plan_cache_mode == "force_generic_plan" {
        assert!(plans.iter().all(|plan| plan.generic > 0), "{plans:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_sequential_scan_with_plan_cache_mode_auto() {
    every_statement("auto").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_sequential_scan_with_generic_plans() {
    every_statement("force_generic_plan").await;
}
