//! PostgreSQL: `lease_diesel::fenced` prepares its check once per connection, runs it at every
//! commit, and prepares it again before the work on a connection that lost it.

mod support;

use diesel_async::AsyncPgConnection;
use diesel_async::pooled_connection::deadpool;
use lease_tests::{TestBackend, env};
use support::{Backend, Postgres};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_prepares_the_fence_once_per_connection() {
    let backend = Backend::<Postgres, deadpool::Pool<AsyncPgConnection>>::new().through_fenced();
    if let Err(why) = backend.available().await {
        return env::skip_or_fail("postgres", &why.to_string());
    }
    let (fresh, writes) = backend.fenced_writes(1).await.unwrap();
    let store = fresh.store().clone();
    lease_tests::prepared_fence::prepared_once_per_connection(&store, writes).await;
    fresh.teardown().await.unwrap();
}
