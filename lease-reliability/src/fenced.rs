//! Fenced writes to a protected table, through either driver, and the checker of their
//! history.
//!
//! The protected table [`Protected`] holds one row per committed write: its `seq`, taken from
//! a one-row counter in the same transaction, the fence of the lease it was written under, and
//! the fence the lease's row had as the transaction read it (`seen`).
//! The counter's row lock is held until the transaction ends, so writers take it one at a time
//! and `seq` is the commit order (an identity column would not be: it is assigned at insert,
//! and transactions commit in another order). [`FencedWrites::write`] runs one such
//! transaction, checked by the driver's fenced function when asked to;
//! [`check`] reads the history and finds every write a holder committed after a greater
//! fence's first one, in a transaction that read a greater fence in the lease's row (a
//! holder that took the lease and had not written yet), or after a greater fence was taken
//! ([`Taken`]: what the counter read right after an acquisition), and every fence written by
//! two workers.

use async_trait::async_trait;
use lease_core::{BoxError, Error, LeaseHandle, StoreErrorKind};
use lease_diesel::diesel;
use lease_diesel::diesel_async::pooled_connection::deadpool;
use lease_diesel::diesel_async::{
    AsyncMysqlConnection, AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection,
};
use lease_diesel::{AsyncSqliteConnection, DieselStore};
use lease_sqlx::sqlx::{self, AssertSqlSafe, MySql, Postgres, Sqlite};
use lease_sqlx::{CheckAt, Execute, SqlxStore};

use crate::diesel::Diesel;
use crate::factory::{Sqlx, StoreFactory};

/// The tables of one protected resource: `<prefix>_counter` (one row, `n`) and
/// `<prefix>_writes` (`seq`, `fence`, `worker`, `seen`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protected {
    prefix: String,
}

impl Protected {
    /// The tables named from `prefix`, a plain identifier the caller chose.
    pub fn new(prefix: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
        }
    }

    /// The prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The counter table.
    pub fn counter(&self) -> String {
        format!("{}_counter", self.prefix)
    }

    /// The table of writes.
    pub fn writes(&self) -> String {
        format!("{}_writes", self.prefix)
    }

    /// The statements that create both tables and the counter's row, one each (the same on
    /// every database).
    pub fn create(&self) -> [String; 3] {
        [
            format!("CREATE TABLE {} (n BIGINT NOT NULL)", self.counter()),
            format!("INSERT INTO {} (n) VALUES (0)", self.counter()),
            format!(
                "CREATE TABLE {} (seq BIGINT NOT NULL PRIMARY KEY, fence BIGINT NOT NULL, \
                 worker VARCHAR(32) NOT NULL, seen BIGINT NULL)",
                self.writes()
            ),
        ]
    }

    /// The statements that drop both tables.
    pub fn drop_tables(&self) -> [String; 2] {
        [
            format!("DROP TABLE IF EXISTS {}", self.counter()),
            format!("DROP TABLE IF EXISTS {}", self.writes()),
        ]
    }

    /// Takes the next `seq`: the counter's row stays locked until the transaction ends.
    fn bump(&self) -> String {
        format!("UPDATE {} SET n = n + 1", self.counter())
    }

    /// Reads the `seq` just taken (the transaction sees its own update).
    fn read_counter(&self) -> String {
        format!("SELECT n FROM {}", self.counter())
    }

    /// Reads the fence in the row of the lease `lease` in the lease table `table`, with a plain
    /// read (no lock: a locking read would hold the holder's renewals and the takeovers up, as
    /// the fenced check does, and so fence the control). Read after the counter's bump, so that
    /// a transaction held up there reads the row as it is when it goes on; on PostgreSQL at
    /// `READ COMMITTED` and in SQLite that is the row's latest committed state, on MariaDB and
    /// under a serializable transaction the transaction's snapshot (which may only miss a later
    /// acquisition).
    fn read_seen(table: &str, lease: &str) -> String {
        // `table` and `lease` are names the scenario made, plain identifiers.
        format!("SELECT fence FROM {table} WHERE name = '{lease}'")
    }

    fn insert(&self, seq: i64, fence: u64, worker: &str, seen: Option<i64>) -> String {
        // `worker` is a label the scenario made (`w0`, `w1`, ...), never outside input.
        let seen = seen.map_or_else(|| "NULL".to_owned(), |seen| seen.to_string());
        format!(
            "INSERT INTO {} (seq, fence, worker, seen) VALUES ({seq}, {fence}, '{worker}', {seen})",
            self.writes()
        )
    }

    fn select(&self) -> String {
        format!(
            "SELECT seq, fence, worker, seen FROM {} ORDER BY seq",
            self.writes()
        )
    }
}

/// One committed write: its place in commit order, the fence it was written under, the
/// worker that wrote it, and the fence its transaction read in the lease's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// Commit order, from the counter.
    pub seq: i64,
    /// The writer's fence.
    pub fence: i64,
    /// The writer's label (`w0`, `w1`, ...).
    pub worker: String,
    /// The fence in the lease's row as the write's transaction read it (`None`: no row).
    pub seen: Option<i64>,
}

/// An acquisition, as the holder saw it: its fence, and the counter's committed value read
/// with a plain read (no lock, in a transaction of its own) right after the store answered.
/// Every write with a greater `seq` committed after that read, so after the acquisition: a
/// write under a lesser fence among them committed after another holder took the lease, which
/// the check in its transaction must have kept out. It catches what the fences of the writes
/// cannot show: the new holder's first write waits for the counter's row, which a late
/// transaction holds, so in commit order it comes after the late write whatever that did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    /// The acquisition's fence.
    pub fence: i64,
    /// The counter's committed value read right after it.
    pub after: i64,
}

/// Writes to a [`Protected`] table through a factory's stores.
#[async_trait]
pub trait FencedWrites: StoreFactory {
    /// One write under `lease` (a guard's [`handle`](lease_core::LeaseGuard::handle), or
    /// `guard.as_ref()`; a handle outlives its guard's release) by `worker`, in a transaction
    /// of its own: the counter is bumped, the row inserted, and the transaction committed;
    /// when `checked`, through the driver's fenced function with the check placed there
    /// (`lease_sqlx::fenced_with`, `lease_diesel::fenced_with`: with the commit or with the
    /// `BEGIN` on PostgreSQL and MariaDB, first on SQLite). Answers the write's `seq`.
    ///
    /// # Errors
    /// [`Error::NotHeld`] (boxed) when the check refused the write (nothing committed); any
    /// other error of the database or the connection.
    async fn write(
        &self,
        store: &Self::Store,
        lease: &LeaseHandle,
        checked: Option<CheckAt>,
        protected: &Protected,
        worker: &str,
    ) -> Result<i64, BoxError>;

    /// Every committed write, in commit order.
    async fn writes(
        &self,
        store: &Self::Store,
        protected: &Protected,
    ) -> Result<Vec<Write>, BoxError>;

    /// The counter's committed value, read in a statement of its own without a lock (it
    /// waits for no writer's transaction), outside any transaction: the `seq` of the last write
    /// committed ([`Taken::after`]).
    ///
    /// # Errors
    /// Any error of the database or the connection; the reading is then missing.
    async fn committed(&self, store: &Self::Store, protected: &Protected) -> Result<i64, BoxError>;

    /// Whether the database's fenced check passes for `lease` now: the store's own check
    /// statement, sent alone outside a transaction, without asking the guard first (the
    /// drivers' fenced functions refuse a lease the guard already knows lost before any
    /// statement). For a scenario that must show the database itself refusing a holder.
    ///
    /// # Errors
    /// Any error of the database or the connection; the check's own error when the row names
    /// the holder and fence but has expired.
    async fn check_alone(&self, store: &Self::Store, lease: &LeaseHandle)
    -> Result<bool, BoxError>;
}

/// [`FencedWrites::check_alone`] on any SQL store: one driver's as the other's.
async fn check_alone<X: Execute>(
    store: &lease_sqlx::SqlStore<X>,
    lease: &LeaseHandle,
) -> Result<bool, BoxError> {
    let check = store
        .statements()
        .fence(lease.name(), lease.holder(), lease.fence());
    Ok(store.executor().affected(check).await? > 0)
}

/// Whether `error` is the fenced check's refusal.
pub fn is_refusal(error: &BoxError) -> bool {
    matches!(error.downcast_ref::<Error>(), Some(Error::NotHeld { .. }))
}

/// Whether `error` is a conflict with a concurrent transaction: on a Galera cluster, a write
/// that lost certification against one another node committed first, rolled back. The store's
/// error of the kind [`StoreErrorKind::Conflict`] at the commit, or the driver's deadlock
/// (MariaDB's 1213, how Galera reports a lost certification) answered to the work's statement
/// when the replicated write aborted its transaction first.
pub fn is_conflict(error: &BoxError) -> bool {
    if let Some(error) = error.downcast_ref::<Error>() {
        return error.store_error_kind() == Some(StoreErrorKind::Conflict);
    }
    error.to_string().to_ascii_lowercase().contains("deadlock")
}

macro_rules! sqlx_writes {
    ($db:ty) => {
        #[async_trait]
        impl FencedWrites for Sqlx<$db> {
            async fn write(
                &self,
                store: &SqlxStore<$db>,
                lease: &LeaseHandle,
                checked: Option<CheckAt>,
                protected: &Protected,
                worker: &str,
            ) -> Result<i64, BoxError> {
                // The job: bump the counter, read it, insert the write with its place.
                let read_seen =
                    Protected::read_seen(&store.table().to_string(), lease.name().as_str());
                let job = async |tx: &mut <$db as sqlx::Database>::Connection| {
                    sqlx::raw_sql(AssertSqlSafe(protected.bump()))
                        .execute(&mut *tx)
                        .await?;
                    let seen: Option<i64> = sqlx::query_scalar(AssertSqlSafe(read_seen.clone()))
                        .fetch_optional(&mut *tx)
                        .await?;
                    let seq: i64 = sqlx::query_scalar(AssertSqlSafe(protected.read_counter()))
                        .fetch_one(&mut *tx)
                        .await?;
                    let insert = protected.insert(seq, lease.fence().get(), worker, seen);
                    sqlx::raw_sql(AssertSqlSafe(insert))
                        .execute(&mut *tx)
                        .await?;
                    Ok::<_, BoxError>(seq)
                };
                if let Some(at) = checked {
                    // Through `lease_sqlx::fenced_with`: on PostgreSQL and MariaDB the check
                    // goes with the commit or the `BEGIN`, on SQLite it comes first.
                    return lease_sqlx::fenced_with(store, lease, at, job).await;
                }
                // Dropped on an error, the transaction rolls back.
                let mut tx = store.executor().pool().begin().await?;
                let seq = job(&mut *tx).await?;
                tx.commit().await?;
                Ok(seq)
            }

            async fn writes(
                &self,
                store: &SqlxStore<$db>,
                protected: &Protected,
            ) -> Result<Vec<Write>, BoxError> {
                let rows: Vec<(i64, i64, String, Option<i64>)> =
                    sqlx::query_as(AssertSqlSafe(protected.select()))
                        .fetch_all(store.executor().pool())
                        .await?;
                Ok(rows
                    .into_iter()
                    .map(|(seq, fence, worker, seen)| Write {
                        seq,
                        fence,
                        worker,
                        seen,
                    })
                    .collect())
            }

            async fn committed(
                &self,
                store: &SqlxStore<$db>,
                protected: &Protected,
            ) -> Result<i64, BoxError> {
                Ok(sqlx::query_scalar(AssertSqlSafe(protected.read_counter()))
                    .fetch_one(store.executor().pool())
                    .await?)
            }

            async fn check_alone(
                &self,
                store: &SqlxStore<$db>,
                lease: &LeaseHandle,
            ) -> Result<bool, BoxError> {
                check_alone(store, lease).await
            }
        }
    };
}

sqlx_writes!(Postgres);
sqlx_writes!(MySql);
sqlx_writes!(Sqlite);

#[derive(diesel::QueryableByName)]
struct Counter {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

#[derive(diesel::QueryableByName)]
struct Seen {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    fence: i64,
}

#[derive(diesel::QueryableByName)]
struct WriteRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    seq: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    fence: i64,
    #[diesel(sql_type = diesel::sql_types::Text)]
    worker: String,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::BigInt>)]
    seen: Option<i64>,
}

macro_rules! diesel_writes {
    ($conn:ty) => {
        #[async_trait]
        impl FencedWrites for Diesel<$conn> {
            async fn write(
                &self,
                store: &DieselStore<deadpool::Pool<$conn>>,
                lease: &LeaseHandle,
                checked: Option<CheckAt>,
                protected: &Protected,
                worker: &str,
            ) -> Result<i64, BoxError> {
                // The job: bump the counter, read it, insert the write with its place.
                let read_seen =
                    Protected::read_seen(&store.table().to_string(), lease.name().as_str());
                let job = async |conn: &mut $conn| {
                    conn.batch_execute(&protected.bump()).await?;
                    let seen: Vec<Seen> = diesel::sql_query(read_seen.clone())
                        .load(&mut *conn)
                        .await?;
                    let counter: Counter = diesel::sql_query(protected.read_counter())
                        .get_result(&mut *conn)
                        .await?;
                    let seen = seen.into_iter().next().map(|seen| seen.fence);
                    let insert = protected.insert(counter.n, lease.fence().get(), worker, seen);
                    conn.batch_execute(&insert).await?;
                    Ok::<_, BoxError>(counter.n)
                };
                let mut conn = store.pool().get().await?;
                if let Some(at) = checked {
                    // Through `lease_diesel::fenced_with`, as the sqlx workers write through
                    // `lease_sqlx::fenced_with`.
                    return lease_diesel::fenced_with(store, &mut conn, lease, at, job).await;
                }
                // The control: the same job in a plain transaction.
                conn.batch_execute("BEGIN").await?;
                let done: Result<i64, BoxError> = async {
                    let seq = job(&mut conn).await?;
                    conn.batch_execute("COMMIT").await?;
                    Ok(seq)
                }
                .await;
                if done.is_err() {
                    // A connection that cannot roll back is broken; the pool's recycling
                    // check drops it.
                    let _ = conn.batch_execute("ROLLBACK").await;
                }
                done
            }

            async fn writes(
                &self,
                store: &DieselStore<deadpool::Pool<$conn>>,
                protected: &Protected,
            ) -> Result<Vec<Write>, BoxError> {
                let mut conn = store.pool().get().await?;
                let rows: Vec<WriteRow> = diesel::sql_query(protected.select())
                    .load(&mut *conn)
                    .await?;
                Ok(rows
                    .into_iter()
                    .map(|row| Write {
                        seq: row.seq,
                        fence: row.fence,
                        worker: row.worker,
                        seen: row.seen,
                    })
                    .collect())
            }

            async fn committed(
                &self,
                store: &DieselStore<deadpool::Pool<$conn>>,
                protected: &Protected,
            ) -> Result<i64, BoxError> {
                let mut conn = store.pool().get().await?;
                let counter: Counter = diesel::sql_query(protected.read_counter())
                    .get_result(&mut *conn)
                    .await?;
                Ok(counter.n)
            }

            async fn check_alone(
                &self,
                store: &DieselStore<deadpool::Pool<$conn>>,
                lease: &LeaseHandle,
            ) -> Result<bool, BoxError> {
                check_alone(store, lease).await
            }
        }
    };
}

diesel_writes!(AsyncPgConnection);
diesel_writes!(AsyncMysqlConnection);
diesel_writes!(AsyncSqliteConnection);

/// A write committed, in commit order, after the first committed write of a greater fence, in
/// a transaction that read a greater fence in the lease's row, or after a greater fence was
/// taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleWrite {
    /// The stale write.
    pub write: Write,
    /// The greatest fence it came after: written before it, read by its transaction in the
    /// lease's row, or taken before it committed.
    pub behind: i64,
    /// How the greater fence came before it.
    pub by: Behind,
}

/// How a [`StaleWrite`]'s greater fence came before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behind {
    /// The greater fence had written: a write of it came first in commit order.
    Written,
    /// The write's transaction read the greater fence in the lease's row: taken, and not
    /// written under yet.
    Read,
    /// The greater fence was taken before the write committed: the counter read `after`
    /// right after the acquisition ([`Taken`]), and the write's `seq` is greater.
    Taken {
        /// What the counter read right after the acquisition.
        after: i64,
    },
}

impl std::fmt::Display for StaleWrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (seq, fence, behind) = (self.write.seq, self.write.fence, self.behind);
        match self.by {
            Behind::Written => write!(
                f,
                "write {seq} under fence {fence} committed after fence {behind} had written"
            ),
            Behind::Read => write!(
                f,
                "write {seq} under fence {fence} committed in a transaction that read fence \
                 {behind} in the lease's row"
            ),
            Behind::Taken { after } => write!(
                f,
                "write {seq} under fence {fence} committed after fence {behind} was taken (the \
                 last write committed then was {after})"
            ),
        }
    }
}

/// A fence whose writes came from two workers or more: two writers under one lease, which
/// stale-write order alone does not show (their writes are all of one fence).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedFence {
    /// The fence.
    pub fence: i64,
    /// Every worker that wrote under it, in the order of its first write.
    pub workers: Vec<String>,
    /// The first write of the second worker.
    pub seq: i64,
}

impl std::fmt::Display for SharedFence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "fence {} was written by {} workers ({}), the second from write {} on",
            self.fence,
            self.workers.len(),
            self.workers.join(", "),
            self.seq
        )
    }
}

/// What [`check`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Writes checked.
    pub writes: usize,
    /// Distinct fences among them.
    pub fences: usize,
    /// Every stale write.
    pub stale: Vec<StaleWrite>,
    /// Every fence written by more than one worker, in fence order.
    pub shared: Vec<SharedFence>,
}

/// A write its worker was told had committed (`wrote <seq> <fence>`): `fenced_with` answered
/// `Ok` with its `seq`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acknowledged {
    /// The worker's label (`w0`, `w1`, ...).
    pub worker: String,
    /// The `seq` it was answered.
    pub seq: i64,
    /// The fence it was written under.
    pub fence: i64,
}

/// The acknowledged writes the table does not hold as acknowledged (same `seq`, fence and
/// worker): a write answered as committed that did not commit, or committed as another. In
/// the order given.
pub fn unrecorded<'a>(acknowledged: &'a [Acknowledged], writes: &[Write]) -> Vec<&'a Acknowledged> {
    let recorded: std::collections::HashSet<(i64, i64, &str)> = writes
        .iter()
        .map(|write| (write.seq, write.fence, write.worker.as_str()))
        .collect();
    acknowledged
        .iter()
        .filter(|ack| !recorded.contains(&(ack.seq, ack.fence, ack.worker.as_str())))
        .collect()
}

/// Checks a history of writes against the acquisitions `taken`: taken in `seq` order, no
/// write's fence may be below the greatest fence of an earlier write, nor below the fence its
/// transaction read in the lease's row (a greater one there was taken by another holder before
/// this write committed), nor below the fence of an acquisition whose [`Taken::after`] is less
/// than its `seq` (it committed after that acquisition); and every write of one fence comes
/// from one worker. `taken` may be empty (a scenario that does not record its acquisitions):
/// the first two rules still hold.
///
/// The last rule holds because each acquisition hands out a fence of its own (fences strictly
/// increase per name with every acquisition) and a worker label names one process, which never
/// gives its guard to another: a fence written by two labels is two writers under one lease.
pub fn check(writes: &[Write], taken: &[Taken]) -> Verdict {
    let mut sorted = writes.to_vec();
    sorted.sort_by_key(|w| w.seq);
    let mut taken = taken.to_vec();
    taken.sort_by_key(|t| t.after);
    // Each fence's workers, in the order of their first write.
    let mut by_fence: std::collections::BTreeMap<i64, SharedFence> = Default::default();
    for write in &sorted {
        let entry = by_fence.entry(write.fence).or_insert_with(|| SharedFence {
            fence: write.fence,
            workers: Vec::new(),
            seq: write.seq,
        });
        if !entry.workers.contains(&write.worker) {
            if entry.workers.len() == 1 {
                entry.seq = write.seq;
            }
            entry.workers.push(write.worker.clone());
        }
    }
    let mut verdict = Verdict {
        writes: sorted.len(),
        fences: by_fence.len(),
        stale: Vec::new(),
        shared: by_fence
            .into_values()
            .filter(|fence| fence.workers.len() > 1)
            .collect(),
    };
    let mut greatest = i64::MIN;
    // The greatest fence taken before the current write committed, and the counter's reading
    // after that acquisition; `next` is the first acquisition not yet before it.
    let mut taken_before: Option<Taken> = None;
    let mut next = 0;
    for write in sorted {
        while let Some(&acquisition) = taken.get(next).filter(|t| t.after < write.seq) {
            if taken_before.is_none_or(|before| acquisition.fence > before.fence) {
                taken_before = Some(acquisition);
            }
            next += 1;
        }
        let fence = write.fence;
        let seen = write.seen.unwrap_or(i64::MIN);
        let taken_fence = taken_before.map_or(i64::MIN, |t| t.fence);
        let behind = greatest.max(seen).max(taken_fence);
        if fence < behind {
            let by = if greatest == behind {
                Behind::Written
            } else if seen == behind {
                Behind::Read
            } else {
                Behind::Taken {
                    after: taken_before.map_or(0, |t| t.after),
                }
            };
            verdict.stale.push(StaleWrite { write, behind, by });
        }
        greatest = greatest.max(fence);
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes of `(seq, fence)`, each fence's by a worker of its own.
    fn history(pairs: &[(i64, i64)]) -> Vec<Write> {
        pairs
            .iter()
            .map(|&(seq, fence)| write(seq, fence, &format!("w{fence}")))
            .collect()
    }

    fn write(seq: i64, fence: i64, worker: &str) -> Write {
        Write {
            seq,
            fence,
            worker: worker.to_owned(),
            seen: Some(fence),
        }
    }

    #[test]
    fn increasing_fences_pass() {
        let verdict = check(&history(&[(1, 3), (2, 3), (3, 4), (4, 7), (5, 7)]), &[]);
        assert_eq!(verdict.writes, 5);
        assert_eq!(verdict.fences, 3);
        assert!(verdict.stale.is_empty());
        assert!(verdict.shared.is_empty());
    }

    #[test]
    fn a_write_after_a_greater_fence_is_stale() {
        let verdict = check(&history(&[(1, 3), (2, 4), (3, 3), (4, 4), (5, 2)]), &[]);
        assert_eq!(
            verdict.stale,
            [
                StaleWrite {
                    write: write(3, 3, "w3"),
                    behind: 4,
                    by: Behind::Written,
                },
                StaleWrite {
                    write: write(5, 2, "w2"),
                    behind: 4,
                    by: Behind::Written,
                },
            ]
        );
    }

    /// A holder held up in its transaction commits after another took the lease, before the
    /// new holder's first write (which waits for the row the first one locked): in commit
    /// order no greater fence wrote before it, but its transaction read the greater one in
    /// the lease's row. A write whose transaction read a lesser fence (its own lease taken
    /// again after a release, read before) or none is not stale for that.
    #[test]
    fn a_write_that_read_a_greater_fence_in_the_lease_row_is_stale() {
        let mut late = write(2, 3, "w3");
        late.seen = Some(4);
        let mut unread = write(4, 4, "w4");
        unread.seen = None;
        let mut earlier = write(5, 5, "w5");
        earlier.seen = Some(4);
        let verdict = check(
            &[
                write(1, 3, "w3"),
                late.clone(),
                write(3, 4, "w4"),
                unread,
                earlier,
            ],
            &[],
        );
        assert_eq!(
            verdict.stale,
            [StaleWrite {
                write: late,
                behind: 4,
                by: Behind::Read,
            }]
        );
        assert_eq!(
            verdict.stale[0].to_string(),
            "write 2 under fence 3 committed in a transaction that read fence 4 in the lease's row"
        );
    }

    #[test]
    fn order_is_by_seq_not_by_position() {
        let verdict = check(&history(&[(3, 5), (1, 4), (2, 5)]), &[]);
        assert!(verdict.stale.is_empty());
        let verdict = check(&history(&[(3, 4), (1, 4), (2, 5)]), &[]);
        assert_eq!(verdict.stale.len(), 1);
        assert_eq!(verdict.stale[0].write.seq, 3);
    }

    #[test]
    fn two_workers_under_one_fence_share_it() {
        // In fence order, no write stale: only the workers tell the two writers apart.
        let writes = [
            write(1, 3, "w0"),
            write(2, 4, "w1"),
            write(3, 4, "w2"),
            write(4, 4, "w1"),
            write(5, 7, "w0"),
            write(6, 7, "w0"),
        ];
        let verdict = check(&writes, &[]);
        assert!(verdict.stale.is_empty());
        assert_eq!(verdict.fences, 3);
        assert_eq!(
            verdict.shared,
            [SharedFence {
                fence: 4,
                workers: vec!["w1".to_owned(), "w2".to_owned()],
                seq: 3,
            }]
        );
        assert_eq!(
            verdict.shared[0].to_string(),
            "fence 4 was written by 2 workers (w1, w2), the second from write 3 on"
        );
    }

    #[test]
    fn one_worker_under_many_fences_shares_none() {
        // A worker that takes the lease again writes under each of its fences alone.
        let verdict = check(
            &[write(1, 3, "w0"), write(2, 5, "w0"), write(3, 8, "w0")],
            &[],
        );
        assert!(verdict.shared.is_empty());
        assert!(verdict.stale.is_empty());
    }

    /// A holder held up in its transaction commits after another took the lease, before the
    /// new holder's first write (which waits for the counter's row the late one holds) and in a
    /// transaction that read the lease's row before the takeover: neither the written fences
    /// nor the fence read show it, the acquisition's reading of the counter does. A write
    /// committed before that reading, and the new holder's own, are not stale.
    #[test]
    fn a_write_committed_after_a_greater_fence_was_taken_is_stale() {
        let writes = [write(1, 3, "w3"), write(2, 3, "w3"), write(3, 4, "w4")];
        let taken = [Taken { fence: 3, after: 0 }, Taken { fence: 4, after: 1 }];
        let verdict = check(&writes, &taken);
        assert_eq!(
            verdict.stale,
            [StaleWrite {
                write: write(2, 3, "w3"),
                behind: 4,
                by: Behind::Taken { after: 1 },
            }]
        );
        assert_eq!(
            verdict.stale[0].to_string(),
            "write 2 under fence 3 committed after fence 4 was taken (the last write committed \
             then was 1)"
        );
        // Without the acquisitions the same history passes: what the rule adds.
        assert!(check(&writes, &[]).stale.is_empty());
        // Taken after the late write committed, fence 4 makes nothing stale.
        let verdict = check(&writes, &[Taken { fence: 4, after: 2 }]);
        assert!(verdict.stale.is_empty());
        // Acquisitions in any order; a lesser one taken later changes nothing.
        let verdict = check(
            &writes,
            &[
                Taken { fence: 4, after: 1 },
                Taken { fence: 2, after: 1 },
                Taken { fence: 3, after: 0 },
            ],
        );
        assert_eq!(verdict.stale.len(), 1);
        assert_eq!(verdict.stale[0].write.seq, 2);
    }

    /// A write answered as committed must be in the table as answered: one missing (rolled
    /// back after an `Ok`), or there under another fence or worker, is found; the others not.
    #[test]
    fn acknowledged_writes_missing_from_the_table_are_found() {
        let ack = |worker: &str, seq, fence| Acknowledged {
            worker: worker.to_owned(),
            seq,
            fence,
        };
        let writes = [write(1, 3, "w0"), write(2, 3, "w0"), write(3, 4, "w1")];
        let acknowledged = [
            ack("w0", 1, 3),
            ack("w0", 2, 3),
            ack("w1", 3, 4),
            ack("w1", 4, 4),
            ack("w0", 3, 4),
            ack("w1", 2, 5),
        ];
        let missing = unrecorded(&acknowledged, &writes);
        assert_eq!(
            missing,
            [&acknowledged[3], &acknowledged[4], &acknowledged[5]]
        );
        assert!(unrecorded(&acknowledged[..3], &writes).is_empty());
    }
}
