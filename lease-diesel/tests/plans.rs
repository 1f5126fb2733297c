//! Plans that cannot go wrong, on PostgreSQL through diesel: lease_tests::plans on this driver's
//! statements, each prepared once per connection (a cacheable query fragment). Each case runs
//! with PostgreSQL's default `plan_cache_mode` (`auto`) and with `force_generic_plan`, the plan
//! every later run of a prepared statement may get.

use diesel_async::pooled_connection::AsyncDieselConnectionManager;
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::{AsyncPgConnection, SimpleAsyncConnection};
use lease_core::{LeaseHandle, async_trait};
use lease_diesel::DieselExecutor;
use lease_sql::SqlStore;
use lease_tests::env;
use lease_tests::plans::{self, PlanProbe};

type Executor = DieselExecutor<Pool<AsyncPgConnection>>;

/// A fenced check in a transaction on the pool's one connection.
struct Probe;

#[async_trait]
impl PlanProbe<Executor> for Probe {
    async fn fenced(&self, store: &SqlStore<Executor>, lease: &LeaseHandle) {
        let mut connection = store.pool().get().await.unwrap();
        connection.batch_execute("BEGIN").await.unwrap();
        store.fence(&mut *connection, lease).await.unwrap();
        connection.batch_execute("COMMIT").await.unwrap();
    }
}

async fn check(plan_cache_mode: &str) {
    let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new(env::postgres_url());
    let pool = Pool::builder(manager).max_size(1).build().unwrap();
    if let Err(e) = pool.get().await {
        return env::skip_or_fail("postgres", &e.to_string());
    }
    plans::check_plans(
        "diesel",
        DieselExecutor::new(pool.clone()),
        &Probe,
        plan_cache_mode,
    )
    .await;
    pool.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_sequential_scan_with_default_or_generic_plans() {
    check("auto").await;
    check("force_generic_plan").await;
}
