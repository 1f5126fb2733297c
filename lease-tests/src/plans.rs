//! Plans that cannot go wrong: the plan test of the SQL backends on PostgreSQL, written once for
//! every driver ([`check_plans`]). On a lease table analyzed while empty and then grown past
//! 10,000 rows ([`GrownTable`]), every statement of the store (all but `list`, a full read by
//! nature), each prepared once and run more than ten times on one connection, so that
//! PostgreSQL considers its generic plan after the fifth run, must read the table through its
//! index and never with a sequential scan. The counters are the table's own in
//! `pg_stat_user_tables`, read through the store's own executor before and after each
//! statement's runs. A deliberately unindexed lookup on the same table, read the same way, is the
//! negative control: the check does see sequential scans.
//!
//! A backend gives only its executor on a pool of one connection and a [`PlanProbe`] that runs
//! a fenced check in a transaction of its driver.

use std::time::Duration;

use async_trait::async_trait;
use lease_core::{HolderId, LeaseClient, LeaseHandle, LeaseName, LeaseStore, Ttl};
use lease_sql::{Execute, Param, Query, SqlStore};

use crate::env;

/// Released rows put into the table after it was analyzed empty.
pub const FILLER: usize = 12_000;
/// Statements known to read the table with a sequential scan, reported and not failed; the
/// check fails once one of them no longer does, so that it leaves this list. None now:
/// renew_many, which joins the table to its JSON lists unpacked (PostgreSQL guesses 100 rows
/// for them, and below about 50,000 rows hashed the whole table), also filters on the key with
/// `name = ANY (...)`, which the index serves.
pub const KNOWN_SEQUENTIAL: &[&str] = &[];

/// Runs of each statement: past the fifth, PostgreSQL may choose the generic plan.
pub const RUNS: usize = 12;

/// The table's scan counters.
#[derive(Debug, Clone, Copy)]
pub struct Scans {
    /// `seq_scan` of `pg_stat_user_tables`.
    pub seq: i64,
    /// `idx_scan` of `pg_stat_user_tables` (0 when null).
    pub idx: i64,
}

/// What one statement did to the counters over its runs.
#[derive(Debug)]
pub struct Delta {
    /// Which statement.
    pub statement: &'static str,
    /// Sequential scans it caused.
    pub seq: i64,
    /// Index scans it caused.
    pub idx: i64,
}

/// What a backend's plan test does through its own driver, on the store's one connection.
#[async_trait]
pub trait PlanProbe<X: Execute>: Send + Sync {
    /// One transaction that runs the store's fenced check for `lease` and commits.
    async fn fenced(&self, store: &SqlStore<X>, lease: &LeaseHandle);
}

/// A lease store on a fresh table made the worst case for plans ([`grown_table_sql`]), whose
/// executor has a pool of one connection (so the session keeps the plan cache setting and its
/// prepared statements). The table's counters and the unindexed lookup go through the same
/// executor.
pub struct GrownTable<X: Execute> {
    store: SqlStore<X>,
    table: String,
}

impl<X: Execute> GrownTable<X> {
    /// Sets up a fresh table named from `prefix` on `executor` and grows it.
    ///
    /// # Cancel safety
    /// Not cancel safe: dropped before it completes, it leaves the table it made behind as far as
    /// it got (made, analyzed, filled in part or whole), with nothing to drop it.
    ///
    /// # Panics
    /// When a statement fails.
    pub async fn new(executor: X, prefix: &str, plan_cache_mode: &str) -> Self {
        let table = env::unique_table(prefix);
        let store = SqlStore::with_table(executor, &table).unwrap();
        store.setup().await.unwrap();
        let grown = Self { store, table };
        for sql in grown_table_sql(&grown.table, FILLER, plan_cache_mode) {
            grown.run_sql(&sql).await;
        }
        grown
    }

    /// The store on the table.
    pub fn store(&self) -> &SqlStore<X> {
        &self.store
    }

    async fn run_sql(&self, sql: &str) {
        self.store.executor().batch(sql).await.unwrap();
    }

    /// The table's counters, once the connection has flushed its statistics.
    ///
    /// # Cancel safety
    /// Cancel safe: it flushes and reads statistics, and changes nothing else.
    pub async fn scans(&self) -> Scans {
        self.run_sql("SELECT pg_stat_force_next_flush()").await;
        // A statement of its own, so a transaction of its own: a fresh statistics snapshot.
        self.run_sql("SELECT pg_stat_clear_snapshot()").await;
        let rows = self
            .store
            .executor()
            .int_pairs(Query::new(
                "SELECT seq_scan, coalesce(idx_scan, 0) FROM pg_stat_user_tables \
                 WHERE relid = $1::text::regclass",
                vec![Param::text(&self.table)],
            ))
            .await
            .unwrap();
        let (seq, idx) = rows[0];
        Scans { seq, idx }
    }

    /// One lookup of the table by `holder`, which no index serves.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn unindexed(&self, holder: &str) {
        self.store
            .executor()
            .int_pairs(Query::new(
                format!(
                    "SELECT count(*), 0::int8 FROM {} WHERE holder = $1",
                    self.table
                ),
                vec![Param::text(holder)],
            ))
            .await
            .unwrap();
    }

    /// The connection's prepared statements on the table: how many generic plans each got, and
    /// a line about it.
    async fn prepared(&self) -> Vec<(i64, String)> {
        let rows = self
            .store
            .executor()
            .text_pairs(Query::new(
                "SELECT generic_plans::text, format('%2s generic, %2s custom plans: %s', \
                 generic_plans, custom_plans, left(regexp_replace(statement, '\\s+', ' ', 'g'), 60)) \
                 FROM pg_prepared_statements WHERE statement LIKE '%' || $1 || '%' ORDER BY statement",
                vec![Param::text(&self.table)],
            ))
            .await
            .unwrap();
        rows.into_iter()
            .map(|(generic, line)| (generic.parse().unwrap(), line))
            .collect()
    }

    async fn finish(self) {
        self.run_sql(&format!("DROP TABLE {}", self.table)).await;
    }
}

/// The plan test through one driver: [`every_statement`] on a [`GrownTable`] of `executor`,
/// the prepared statements reported, then [`conclude`]; with `force_generic_plan`, every
/// prepared statement must also have had its generic plan.
///
/// # Cancel safety
/// Not cancel safe: the grown table is dropped only once every statement was measured, so, dropped
/// earlier, the check leaves it behind, with what [`every_statement`] leaves on it.
///
/// # Panics
/// When a statement fails or the check does.
pub async fn check_plans<X: Execute + Clone>(
    driver: &str,
    executor: X,
    probe: &dyn PlanProbe<X>,
    plan_cache_mode: &str,
) {
    let prefix = format!("lease_{driver}_plans");
    let grown = GrownTable::new(executor, &prefix, plan_cache_mode).await;
    let (deltas, control) = every_statement(&grown, probe).await;
    let prepared = grown.prepared().await;
    for (_, line) in &prepared {
        env::report(&format!("  prepared: {line}"));
    }
    grown.finish().await;
    conclude(
        &format!("plans through {driver}, plan_cache_mode = {plan_cache_mode}, {FILLER} rows:"),
        &deltas,
        &control,
        KNOWN_SEQUENTIAL,
    );
    if plan_cache_mode == "force_generic_plan" {
        assert!(
            prepared.iter().all(|(generic, _)| *generic > 0),
            "{prepared:?}"
        );
    }
}

/// What makes a fresh lease `table` the worst case for plans, in order: autovacuum off for it,
/// statistics of the empty table (`ANALYZE`), then `filler` released rows (`filler-1` and on)
/// the statistics do not know of, and `plan_cache_mode` for the session that runs them all.
pub fn grown_table_sql(table: &str, filler: usize, plan_cache_mode: &str) -> [String; 4] {
    [
        format!("ALTER TABLE {table} SET (autovacuum_enabled = false)"),
        format!("ANALYZE {table}"),
        format!(
            "INSERT INTO {table} (name, holder, fence, taken_at, expires_at) \
             SELECT 'filler-' || i, NULL, 1, now(), now() FROM generate_series(1, {filler}) AS i"
        ),
        format!("SET plan_cache_mode = {plan_cache_mode}"),
    ]
}

/// Runs `runs` and measures them.
///
/// # Cancel safety
/// Cancel safe as far as `runs` is: dropped, it drops `runs` wherever it was, and nothing is
/// measured.
pub async fn measured<X: Execute>(
    table: &GrownTable<X>,
    statement: &'static str,
    runs: impl AsyncFnOnce(),
) -> Delta {
    let before = table.scans().await;
    runs().await;
    let after = table.scans().await;
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

/// Every statement of `store` but `list`, each run [`RUNS`] times or more, measured; and the
/// negative control, measured the same way. The table must hold the filler's released rows
/// (`filler-1` and on).
///
/// # Cancel safety
/// Not cancel safe: dropped, the leases it took stay on the table until their TTL of a minute runs
/// out, the guard of `fenced`, once taken, is released in the background, and a probe's transaction
/// cut off rolls back, as the driver rolls back a dropped transaction.
pub async fn every_statement<X: Execute + Clone>(
    table: &GrownTable<X>,
    probe: &dyn PlanProbe<X>,
) -> (Vec<Delta>, Delta) {
    let store = table.store();
    let ttl = Ttl::from_secs(60).unwrap();
    let holder = HolderId::generate();
    let other = HolderId::generate();
    let fresh = names("plan");
    let released = names("filler");
    let mut deltas = Vec::new();

    deltas.push(
        measured(table, "try_acquire, a new name", async || {
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
        measured(table, "try_acquire, a held name", async || {
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
        measured(table, "try_acquire, a released row", async || {
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
        measured(table, "renew", async || {
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
        measured(table, "renew_many", async || {
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
        measured(table, "inspect", async || {
            for name in &fresh {
                assert!(store.inspect(name).await.unwrap().is_some());
            }
        })
        .await,
    );
    deltas.push(
        measured(table, "release", async || {
            for name in fresh.iter().chain(&released) {
                assert!(store.release(name, &holder, Duration::ZERO).await.unwrap());
            }
        })
        .await,
    );
    let client = LeaseClient::builder(store.clone(), lease_core::runtime::TokioRuntime)
        .ttl(ttl)
        .build()
        .unwrap();
    let guard = client.try_acquire("fenced").await.unwrap().unwrap();
    deltas.push(
        measured(table, "fence, in a transaction", async || {
            for _ in 0..RUNS {
                probe.fenced(store, &guard.handle()).await;
            }
        })
        .await,
    );
    guard.release().await.unwrap();

    // The negative control: the same counters see a lookup no index serves.
    let control = measured(table, "control: an unindexed lookup", async || {
        for _ in 0..RUNS {
            table.unindexed(holder.as_str()).await;
        }
    })
    .await;
    (deltas, control)
}

/// Prints what each statement did, then fails unless every statement but the `known` ones read
/// the table through its index only, none of the `known` ones does (it should then leave the
/// list), and the control saw a sequential scan.
pub fn conclude(heading: &str, deltas: &[Delta], control: &Delta, known: &[&str]) {
    env::report(heading);
    for delta in deltas.iter().chain([control]) {
        let mark = if known.contains(&delta.statement) {
            " (known, see KNOWN_SEQUENTIAL)"
        } else {
            ""
        };
        env::report(&format!(
            "  {:<30} seq_scan +{:<3} idx_scan +{}{mark}",
            delta.statement, delta.seq, delta.idx
        ));
    }
    let is_known = |d: &&Delta| known.contains(&d.statement);
    let scanned: Vec<&Delta> = deltas
        .iter()
        .filter(|d| !is_known(d))
        .filter(|d| d.seq != 0 || d.idx == 0)
        .collect();
    assert!(
        scanned.is_empty(),
        "statements that read the table without its index: {scanned:?}"
    );
    let mended: Vec<&Delta> = deltas
        .iter()
        .filter(is_known)
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
}
