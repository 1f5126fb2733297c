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

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text};
use diesel_async::pooled_connection::AsyncDieselConnectionManager;
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::{AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};
use lease_core::LeaseHandle;
use lease_diesel::DieselStore;
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
        // a table that grew since its last ANALYZE can have. The pool's one connection keeps
        // the plan cache setting.
        for sql in plans::grown_table_sql(&fixture.table, FILLER, plan_cache_mode) {
            fixture.run_sql(&sql).await;
        }
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

/// The shared statement sequence runs through this driver's own connection.
#[async_trait::async_trait]
impl PlanProbe for Fixture {
    async fn scans(&self) -> Scans {
        Fixture::scans(self).await
    }

    async fn fenced(&self, lease: &LeaseHandle) {
        let mut connection = self.pool.get().await.unwrap();
        connection.batch_execute("BEGIN").await.unwrap();
        self.store.fence(&mut *connection, lease).await.unwrap();
        connection.batch_execute("COMMIT").await.unwrap();
    }

    async fn unindexed(&self, holder: &str) {
        let unindexed = format!("SELECT count(*) AS n FROM {} WHERE holder = $1", self.table);
        let mut connection = self.pool.get().await.unwrap();
        let _: Count = diesel::sql_query(&unindexed)
            .bind::<Text, _>(holder)
            .get_result(&mut *connection)
            .await
            .unwrap();
    }
}

async fn every_statement(plan_cache_mode: &str) {
    let Some(fixture) = Fixture::new(plan_cache_mode).await else {
        return;
    };
    let (deltas, control) = plans::every_statement(&fixture.store, &fixture).await;

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
    for plan in &plans {
        env::report(&format!(
            "  prepared: {:>2} generic, {:>2} custom plans: {}",
            plan.generic, plan.custom, plan.statement
        ));
    }
    fixture.finish().await;

    plans::conclude(
        &format!("plans through diesel, plan_cache_mode = {plan_cache_mode}, {FILLER} rows:"),
        &deltas,
        &control,
        KNOWN_SEQUENTIAL,
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
