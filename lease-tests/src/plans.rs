//! Plans that cannot go wrong: the statement sequence the plan tests of the SQL backends run on
//! PostgreSQL, the counters they read, and the verdict, written once for every driver. Each
//! backend gives a [`PlanProbe`] that reads `pg_stat_user_tables` on its one connection, runs a
//! fenced check in a transaction there, and makes the unindexed lookup of the negative control.

use std::time::Duration;

use async_trait::async_trait;
use lease_core::{HolderId, LeaseClient, LeaseHandle, LeaseName, LeaseStore, Ttl};

use crate::env;

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
pub trait PlanProbe: Send + Sync {
    /// The lease table's counters, once the connection has flushed its statistics.
    async fn scans(&self) -> Scans;
    /// One transaction that runs the store's fenced check for `lease` and commits.
    async fn fenced(&self, lease: &LeaseHandle);
    /// One lookup of the lease table by `holder`, which no index serves.
    async fn unindexed(&self, holder: &str);
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
pub async fn measured(
    probe: &dyn PlanProbe,
    statement: &'static str,
    runs: impl AsyncFnOnce(),
) -> Delta {
    let before = probe.scans().await;
    runs().await;
    let after = probe.scans().await;
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
pub async fn every_statement<S: LeaseStore + Clone>(
    store: &S,
    probe: &dyn PlanProbe,
) -> (Vec<Delta>, Delta) {
    let ttl = Ttl::from_secs(60).unwrap();
    let holder = HolderId::generate();
    let other = HolderId::generate();
    let fresh = names("plan");
    let released = names("filler");
    let mut deltas = Vec::new();

    deltas.push(
        measured(probe, "try_acquire, a new name", async || {
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
        measured(probe, "try_acquire, a held name", async || {
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
        measured(probe, "try_acquire, a released row", async || {
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
        measured(probe, "renew", async || {
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
        measured(probe, "renew_many", async || {
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
        measured(probe, "inspect", async || {
            for name in &fresh {
                assert!(store.inspect(name).await.unwrap().is_some());
            }
        })
        .await,
    );
    deltas.push(
        measured(probe, "release", async || {
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
        measured(probe, "fence, in a transaction", async || {
            for _ in 0..RUNS {
                probe.fenced(&guard.handle()).await;
            }
        })
        .await,
    );
    guard.release().await.unwrap();

    // The negative control: the same counters see a lookup no index serves.
    let control = measured(probe, "control: an unindexed lookup", async || {
        for _ in 0..RUNS {
            probe.unindexed(holder.as_str()).await;
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
