//! PostgreSQL's prepared fence through a driver's fenced function: the statements are prepared
//! once per connection, every fenced commit runs the prepared check (so the server neither
//! parses nor plans it again), and a connection that lost them (`DEALLOCATE`, `DISCARD ALL`)
//! prepares them again before the work, which then commits.
//!
//! The store must have a pool of one connection, so that the statements counted are those of
//! the connection the fenced transactions ran on.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use lease_core::runtime::TokioRuntime;
use lease_core::{LeaseClient, Ttl};
use lease_sql::{Execute, Param, PreparedFence, Query, SqlStore};

use crate::FencedWrites;

/// How many times each of the connection's prepared fence statements ran: `(check at the
/// commit, ready)`, `None` for a statement the connection does not have.
async fn executions<X: Execute>(
    store: &SqlStore<X>,
    prepared: &PreparedFence,
) -> (Option<i64>, Option<i64>) {
    let rows = store
        .executor()
        .text_pairs(Query::new(
            "SELECT name, (generic_plans + custom_plans)::text FROM pg_prepared_statements \
             WHERE name IN ($1, $2)",
            vec![
                Param::text(prepared.commit_name()),
                Param::text(prepared.ready_name()),
            ],
        ))
        .await
        .unwrap();
    let count = |name: &str| {
        rows.iter()
            .find(|(row, _)| row == name)
            .map(|(_, runs)| runs.parse::<i64>().unwrap())
    };
    (count(prepared.commit_name()), count(prepared.ready_name()))
}

/// Three fenced writes through `writes` on `store`'s one connection, then the statements
/// deallocated and one more write: every write commits, the statements are there after the
/// first, and each commit ran the prepared check (a commit through the check's text leaves
/// the count where it was).
///
/// # Cancel safety
/// Not cancel safe: dropped, the guard of `prepared-fence` is released in the background, a fenced
/// write cut off before its commit commits nothing, and the connection may be left without its
/// prepared statements, which its next fenced write prepares again. The writes already committed
/// stay in the protected table.
///
/// # Panics
/// When a write fails, a value is missing from the protected table, or the counts differ.
pub async fn prepared_once_per_connection<X: Execute + Clone>(
    store: &SqlStore<X>,
    writes: Arc<dyn FencedWrites>,
) {
    let table = store.statements().table().to_string();
    let prepared = store
        .statements()
        .prepared_fence()
        .expect("PostgreSQL's statements have a prepared fence");
    assert_eq!(
        executions(store, prepared).await,
        (None, None),
        "{table}: a new connection has no prepared fence"
    );
    let client = LeaseClient::builder(store.clone(), TokioRuntime)
        .ttl(Ttl::new(Duration::from_secs(30)).unwrap())
        .build()
        .unwrap();
    let guard = client
        .try_acquire("prepared-fence")
        .await
        .unwrap()
        .expect("a fresh lease is free");
    let handle = guard.as_ref();
    for value in 1..=3 {
        writes
            .write(handle, value, futures::future::ready(()).boxed())
            .await
            .unwrap();
    }
    assert_eq!(
        executions(store, prepared).await,
        (Some(3), Some(3)),
        "{table}: prepared once, the check run at each of three commits and the probe at each begin"
    );

    // Every statement of the prepared fence: each is named after the check.
    let names = store
        .executor()
        .text_pairs(Query::new(
            "SELECT name, name FROM pg_prepared_statements WHERE starts_with(name, $1)",
            vec![Param::text(prepared.check_name())],
        ))
        .await
        .unwrap();
    assert_eq!(names.len(), prepared.prepare().len(), "{table}: {names:?}");
    for (name, _) in names {
        store
            .executor()
            .batch(&format!("DEALLOCATE {name}"))
            .await
            .unwrap();
    }
    assert_eq!(executions(store, prepared).await, (None, None));
    writes
        .write(handle, 4, futures::future::ready(()).boxed())
        .await
        .unwrap();
    assert_eq!(
        executions(store, prepared).await,
        (Some(1), Some(1)),
        "{table}: prepared again before the work, and run once"
    );
    let mut written = writes.written().await.unwrap();
    written.sort_unstable();
    assert_eq!(written, [1, 2, 3, 4], "{table}: every write committed");
    assert!(guard.is_held(), "{table}: the lease stays held");
    guard.release().await.unwrap();
}
