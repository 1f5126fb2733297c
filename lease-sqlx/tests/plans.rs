//! Plans that cannot go wrong, on PostgreSQL through sqlx: on a lease table analyzed while
//! empty and then grown past 10,000 rows, every statement of the store (all but
//! `list`, a full read by nature), each prepared once and run more than ten times on one
//! connection, so that PostgreSQL considers its generic plan after the fifth run, reads the
//! table through its index and never with a sequential scan (but for the statements in
//! `KNOWN_SEQUENTIAL`). The counters are the table's own in `pg_stat_user_tables`, read before
//! and after each statement's runs. A deliberately unindexed lookup on the same table, read the
//! same way, is the negative control: the check does see sequential scans.
//!
//! Each case runs twice: with PostgreSQL's default `plan_cache_mode` (`auto`) and with
//! `force_generic_plan`, the plan every later run of a prepared statement may get.

use lease_core::LeaseHandle;
use lease_sqlx::PgLeaseStore;
use lease_sqlx::sqlx::postgres::PgPoolOptions;
use lease_sqlx::sqlx::{self, AssertSqlSafe, PgPool};
use lease_tests::env;
use lease_tests::plans::{self, PlanProbe, Scans};

/// Released rows put into the table after it was analyzed empty.
const FILLER: usize = 12_000;
/// Statements known to read the table with a sequential scan, reported and not failed; the
/// test fails once one of them no longer does, so that it leaves this list. None now:
/// renew_many, which joins the table to its JSON lists unpacked (PostgreSQL guesses 100 rows
/// for them, and below about 50,000 rows hashed the whole table), also filters on the key with
/// `name = ANY (...)`, which the index serves.
const KNOWN_SEQUENTIAL: &[&str] = &[];

/// One store on a fresh, grown table, on a pool of one connection.
struct Fixture {
    pool: PgPool,
    store: PgLeaseStore,
    table: String,
}

impl Fixture {
    async fn new(plan_cache_mode: &str) -> Option<Self> {
        let pool = match PgPoolOptions::new()
            .max_connections(1)
            .connect(&env::postgres_url())
            .await
        {
            Ok(pool) => pool,
            Err(e) => {
                env::skip_or_fail("postgres", &e.to_string());
                return None;
            }
        };
        let table = env::unique_table("lease_sqlx_plans");
        let store = PgLeaseStore::with_table(pool.clone(), &table).unwrap();
        store.setup().await.unwrap();
        let fixture = Self { pool, store, table };
        // Statistics of an empty table, which autovacuum is not to refresh: the worst estimate
        // a table that grew since its last ANALYZE can have. The pool's one connection keeps
        // the plan cache setting.
        for sql in plans::grown_table_sql(&fixture.table, FILLER, plan_cache_mode) {
            fixture.run_sql(&sql).await;
        }
        Some(fixture)
    }

    async fn run_sql(&self, sql: &str) {
        sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
            .execute(&self.pool)
            .await
            .unwrap();
    }

    /// The table's counters, once the pool's one connection has flushed its statistics.
    async fn scans(&self) -> Scans {
        self.run_sql("SELECT pg_stat_force_next_flush()").await;
        // A statement of its own, so a transaction of its own: a fresh statistics snapshot.
        self.run_sql("SELECT pg_stat_clear_snapshot()").await;
        let (seq, idx): (i64, i64) = sqlx::query_as(
            "SELECT seq_scan, coalesce(idx_scan, 0) FROM pg_stat_user_tables \
             WHERE relid = $1::text::regclass",
        )
        .bind(&self.table)
        .fetch_one(&self.pool)
        .await
        .unwrap();
        Scans { seq, idx }
    }

    async fn finish(self) {
        self.run_sql(&format!("DROP TABLE {}", self.table)).await;
        self.pool.close().await;
    }
}

/// The shared statement sequence runs through this driver's own connection.
#[lease_core::async_trait]
impl PlanProbe for Fixture {
    async fn scans(&self) -> Scans {
        Fixture::scans(self).await
    }

    async fn fenced(&self, lease: &LeaseHandle) {
        let mut tx = self.pool.begin().await.unwrap();
        self.store.fence(&mut *tx, lease).await.unwrap();
        tx.commit().await.unwrap();
    }

    async fn unindexed(&self, holder: &str) {
        let unindexed = format!("SELECT count(*) FROM {} WHERE holder = $1", self.table);
        let _: (i64,) = sqlx::query_as(AssertSqlSafe(unindexed))
            .bind(holder)
            .fetch_one(&self.pool)
            .await
            .unwrap();
    }
}

async fn every_statement(plan_cache_mode: &str) {
    let Some(fixture) = Fixture::new(plan_cache_mode).await else {
        return;
    };
    let (deltas, control) = plans::every_statement(&fixture.store, &fixture).await;

    let plans: Vec<(i64, i64, String)> = sqlx::query_as(
        "SELECT generic_plans, custom_plans, left(regexp_replace(statement, '\\s+', ' ', 'g'), 60) \
         FROM pg_prepared_statements WHERE statement LIKE '%' || $1 || '%' ORDER BY statement",
    )
    .bind(&fixture.table)
    .fetch_all(&fixture.pool)
    .await
    .unwrap();
    for (generic, custom, statement) in &plans {
        env::report(&format!(
            "  prepared: {generic:>2} generic, {custom:>2} custom plans: {statement}"
        ));
    }
    fixture.finish().await;

    plans::conclude(
        &format!("plans through sqlx, plan_cache_mode = {plan_cache_mode}, {FILLER} rows:"),
        &deltas,
        &control,
        KNOWN_SEQUENTIAL,
    );
    if plan_cache_mode == "force_generic_plan" {
        assert!(
            plans.iter().all(|(generic, _, _)| *generic > 0),
            "{plans:?}"
        );
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
