//! Plans that cannot go wrong, on PostgreSQL through sqlx: lease_tests::plans on this driver's
//! statements, each prepared once per connection (sqlx's statement cache). Each case runs with
//! PostgreSQL's default `plan_cache_mode` (`auto`) and with `force_generic_plan`, the plan every
//! later run of a prepared statement may get.

use lease_core::{LeaseHandle, async_trait};
use lease_sqlx::sqlx::Postgres;
use lease_sqlx::sqlx::postgres::PgPoolOptions;
use lease_sqlx::{SqlStore, SqlxExecutor};
use lease_tests::env;
use lease_tests::plans::{self, PlanProbe};

/// A fenced check in a sqlx transaction.
struct Probe;

#[async_trait]
impl PlanProbe<SqlxExecutor<Postgres>> for Probe {
    async fn fenced(&self, store: &SqlStore<SqlxExecutor<Postgres>>, lease: &LeaseHandle) {
        let mut tx = store.pool().begin().await.unwrap();
        store.fence(&mut *tx, lease).await.unwrap();
        tx.commit().await.unwrap();
    }
}

async fn check(plan_cache_mode: &str) {
    let pool = match PgPoolOptions::new()
        .max_connections(1)
        .connect(&env::postgres_url())
        .await
    {
        Ok(pool) => pool,
        Err(e) => return env::skip_or_fail("postgres", &e.to_string()),
    };
    plans::check_plans(
        "sqlx",
        SqlxExecutor::new(pool.clone()),
        &Probe,
        plan_cache_mode,
    )
    .await;
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_sequential_scan_with_default_or_generic_plans() {
    check("auto").await;
    check("force_generic_plan").await;
}
