//! `SqlStore::fence` after another statement of a PostgreSQL transaction that reads from one
//! snapshot (`SERIALIZABLE` connections): the check must never report a lease still held as
//! gone, nor let a stale holder's write commit; of a lease its snapshot cannot see, it says so.
//! A renewal in flight when the check begins fails it with a serialization failure, and
//! `fenced` then begins again by itself.
#![cfg(feature = "postgres")]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::Backend;
use lease_core::BoxError;
use lease_sqlx::runtime::TokioRuntime;
use lease_sqlx::sqlx::{self, AssertSqlSafe, Connection, PgConnection, Pool, Postgres};
use lease_sqlx::{Error, LeaseClient, SnapshotIsolation, SqlxStore, StoreErrorKind, Ttl};
use lease_tests::renewal_in_flight::RenewalInFlight;
use lease_tests::spans::SpanCapture;
use lease_tests::{FreshStore, TestBackend, env};
use tracing::instrument::WithSubscriber;

/// The TTL of the leases here: short, so that a transaction outlives the expiry its snapshot saw,
/// and long enough that its store timeout (a third of it) outlasts a slow statement of a loaded
/// machine (at a fifth of 1.2 s, an acquisition once timed out in a full test run).
const TTL: Duration = Duration::from_secs(2);

/// A fresh store on `SERIALIZABLE` connections, a protected table beside it, and a client whose
/// renewer keeps its leases for as long as they are held. `None` when the server is missing
/// (and skipping is allowed).
async fn fixture() -> Option<(
    FreshStore<SqlxStore<Postgres>>,
    Pool<Postgres>,
    String,
    LeaseClient,
)> {
    let backend = Backend::<Postgres>::plain().serializable("postgres-serializable");
    if let Err(why) = backend.available().await {
        env::skip_or_fail("postgres-serializable", &why.to_string());
        return None;
    }
    let (fresh, pool, table) = backend.fresh(3).await.unwrap();
    let notices = format!("{table}_notices");
    sqlx::raw_sql(AssertSqlSafe(format!(
        "CREATE TABLE {notices} (value BIGINT NOT NULL)"
    )))
    .execute(&pool)
    .await
    .unwrap();
    let client = LeaseClient::builder(fresh.store().clone(), TokioRuntime)
        .ttl(Ttl::new(TTL).unwrap())
        .renew_every(TTL / 4)
        .store_timeout(TTL / 3)
        .build()
        .unwrap();
    Some((fresh, pool, notices, client))
}

/// How many rows `notices` holds.
async fn count(pool: &Pool<Postgres>, notices: &str) -> i64 {
    let (count,): (i64,) = sqlx::query_as(AssertSqlSafe(format!("SELECT count(*) FROM {notices}")))
        .fetch_one(pool)
        .await
        .unwrap();
    count
}

/// A transaction's snapshot was taken by its first statement; the lease's expiry in that
/// snapshot then passed while the renewer kept the lease. A check after that statement sees the
/// row as the snapshot did: it must fail (a serialization failure: try the transaction again)
/// without reporting the lease gone, and a transaction that checks first must then go through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_after_a_read_never_reports_a_renewed_lease_gone() {
    let Some((fresh, pool, notices, client)) = fixture().await else {
        return;
    };
    let store = fresh.store().clone();
    let guard = client.try_acquire("notify").await.unwrap().unwrap();

    let mut tx = outlived_snapshot(&pool, &notices, &guard).await;
    let error = store
        .fence(&mut *tx, &guard)
        .await
        .expect_err("a check on a stale snapshot answered that the lease is held");
    assert!(
        !matches!(error, Error::NotHeld { .. }),
        "a lease still held was reported gone: {error}"
    );
    assert_serialization_failure(&error);
    assert!(guard.is_held(), "the failed check cost a lease still held");
    drop(tx);

    // Checked first. A renewal in flight when the check begins still fails it (see
    // `a_renewal_in_flight_fails_a_check_and_fenced_begins_again`): try again, as a caller would.
    let mut tries = 0;
    let mut tx = loop {
        tries += 1;
        let mut tx = pool.begin().await.unwrap();
        match store.fence(&mut *tx, &guard).await {
            Ok(fence) => {
                assert_eq!(fence, guard.fence());
                break tx;
            }
            Err(error)
                if tries < 3 && error.store_error_kind() == Some(StoreErrorKind::Conflict) => {}
            Err(error) => panic!("the check first failed {tries} times: {error}"),
        }
    };
    insert_in(&mut tx, &notices).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(count(&pool, &notices).await, 1);
    guard.release().await.unwrap();
    fresh.teardown().await.unwrap();
}

/// The negative control: the same steps with the check as it was, the expiry read in its
/// `WHERE`. That check matches no row, so it would have reported the lease gone while the lease
/// is held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_check_reading_the_expiry_in_its_where_reports_a_renewed_lease_gone() {
    let Some((fresh, pool, notices, client)) = fixture().await else {
        return;
    };
    let store = fresh.store().clone();
    let guard = client.try_acquire("notify").await.unwrap().unwrap();

    let mut tx = outlived_snapshot(&pool, &notices, &guard).await;
    let matched = update_in(
        &mut tx,
        &store,
        "expires_at = expires_at + interval '1 microsecond'",
        "AND expires_at > statement_timestamp()",
        &guard,
    )
    .await;
    assert_eq!(
        matched, 0,
        "the old check found the renewed row: the scenario no longer sets its trap"
    );
    assert!(guard.is_held());
    drop(tx);
    guard.release().await.unwrap();
    fresh.teardown().await.unwrap();
}

/// The same shape, with the lease taken over after the transaction's snapshot: the stale check
/// fails, and nothing of the stale transaction commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_after_a_read_fails_a_lease_taken_over_since() {
    let Some((fresh, pool, notices, client)) = fixture().await else {
        return;
    };
    let store = fresh.store().clone();
    let guard = client.try_acquire("notify").await.unwrap().unwrap();
    let stale = guard.handle();

    let mut tx = pool.begin().await.unwrap();
    count_in(&mut tx, &notices).await;
    expire(&pool, &store).await;
    let other = LeaseClient::new(store.clone(), TokioRuntime);
    let taker = other.try_acquire("notify").await.unwrap().unwrap();
    assert!(taker.fence() > stale.fence());
    store
        .fence(&mut *tx, &stale)
        .await
        .expect_err("a stale holder's check passed");
    insert_in(&mut tx, &notices).await.ok();
    let _ = tx.commit().await;
    assert_eq!(
        count(&pool, &notices).await,
        0,
        "the stale transaction committed"
    );
    drop(guard);
    taker.release().await.unwrap();
    fresh.teardown().await.unwrap();
}

/// A lease acquired after the transaction's snapshot was taken is not in that snapshot: the
/// check cannot tell it from a lease gone, and says so (`SnapshotIsolation`, the snapshot
/// predating the lease) without marking it lost; whether the name had no row before, or an
/// older holder's. The negative control: the snapshot shows no row of this holder, which a
/// check that did not tell why would report as a lease gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_of_a_lease_acquired_after_the_snapshot_says_so_and_costs_nothing() {
    let Some((fresh, pool, notices, client)) = fixture().await else {
        return;
    };
    let store = fresh.store().clone();
    for round in ["no row before", "an older holder's row before"] {
        let mut tx = pool.begin().await.unwrap();
        count_in(&mut tx, &notices).await;
        let guard = client.try_acquire("notify").await.unwrap().unwrap();
        let matched = update_in(&mut tx, &store, "fence = fence", "", &guard).await;
        assert_eq!(matched, 0, "{round}: the snapshot shows the lease");
        let error = store
            .fence(&mut *tx, &guard)
            .await
            .expect_err("a check that cannot see the lease passed");
        let Error::Store { source, .. } = &error else {
            panic!("{round}: not a store error: {error}");
        };
        let refusal = source
            .downcast_ref::<SnapshotIsolation>()
            .unwrap_or_else(|| panic!("{round}: not the snapshot's refusal: {error}"));
        assert!(refusal.predates_the_lease(), "{round}: {refusal}");
        assert_eq!(refusal.level(), "serializable");
        assert_eq!(error.store_error_kind(), Some(StoreErrorKind::Permanent));
        assert!(
            guard.is_held(),
            "{round}: the check cost a lease still held"
        );
        drop(tx);
        guard.release().await.unwrap();
    }
    assert_eq!(count(&pool, &notices).await, 0);
    fresh.teardown().await.unwrap();
}

/// A lease taken over before the transaction's snapshot was taken: the snapshot shows the
/// greater fence, so the check knows the lease is gone, says `NotHeld` and marks it lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_after_a_read_fails_a_lease_taken_over_before_the_snapshot() {
    let Some((fresh, pool, notices, client)) = fixture().await else {
        return;
    };
    let store = fresh.store().clone();
    let stale = client.try_acquire("notify").await.unwrap().unwrap();
    expire(&pool, &store).await;
    let other = LeaseClient::new(store.clone(), TokioRuntime);
    let taker = other.try_acquire("notify").await.unwrap().unwrap();

    let mut tx = pool.begin().await.unwrap();
    count_in(&mut tx, &notices).await;
    let error = store
        .fence(&mut *tx, &stale)
        .await
        .expect_err("a stale holder's check passed");
    assert!(matches!(error, Error::NotHeld { .. }), "{error}");
    assert!(!stale.is_held(), "the stale guard was not marked lost");
    drop(tx);
    taker.release().await.unwrap();
    fresh.teardown().await.unwrap();
}

/// The holder's own renewal in flight when a check under a snapshot begins: the check's
/// snapshot predates the renewal's commit, so when the renewal commits and frees the row, the
/// check fails with a serialization failure, even as its transaction's first statement. In the
/// caller's own transaction the check says so (`Conflict`: try the transaction again), and the
/// lease stays held: that is the negative control, the race made at will. `fenced`, which
/// checks with its `BEGIN` under a snapshot, begins again by itself: its work runs once, and the
/// lost try is not counted as a check: one check, in one `fence` span, that passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_in_flight_fails_a_check_and_fenced_begins_again() {
    let Some((fresh, pool, notices, _)) = fixture().await else {
        return;
    };
    let store = fresh.store().clone();
    // No renewal of its own during the test: the renewals here are the test's.
    let client = LeaseClient::builder(store.clone(), TokioRuntime)
        .ttl(Ttl::from_secs(60).unwrap())
        .renew_every(Duration::from_secs(20))
        .build()
        .unwrap();
    let guard = client.try_acquire("notify").await.unwrap().unwrap();

    let renewal = renewal_in_flight(&store).await;
    let check = tokio::spawn({
        let (pool, store, lease) = (pool.clone(), store.clone(), guard.handle());
        async move {
            let mut tx = pool.begin().await.unwrap();
            store.fence(&mut *tx, &lease).await
        }
    });
    renewal
        .commit_once_waited_for(store.executor())
        .await
        .unwrap();
    let error = check
        .await
        .unwrap()
        .expect_err("the check passed on a snapshot older than the renewal");
    assert_serialization_failure(&error);
    assert!(guard.is_held(), "the failed check cost a lease still held");

    let before = client.stats().fenced_checks;
    let runs = Arc::new(AtomicUsize::new(0));
    let capture = SpanCapture::new();
    let renewal = renewal_in_flight(&store).await;
    let transaction = tokio::spawn({
        let (store, lease, notices, runs) = (
            store.clone(),
            guard.handle(),
            notices.clone(),
            Arc::clone(&runs),
        );
        async move {
            lease_sqlx::fenced(&store, &lease, async |connection| {
                runs.fetch_add(1, Ordering::SeqCst);
                sqlx::query(AssertSqlSafe(format!(
                    "INSERT INTO {notices} (value) VALUES (1)"
                )))
                .execute(connection)
                .await?;
                Ok::<_, BoxError>(())
            })
            .await
        }
        .with_subscriber(capture.clone())
    });
    renewal
        .commit_once_waited_for(store.executor())
        .await
        .unwrap();
    transaction
        .await
        .unwrap()
        .expect("fenced did not begin again after losing to the renewal");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "the work ran more than once"
    );
    assert_eq!(count(&pool, &notices).await, 1);
    assert!(guard.is_held());
    let after = client.stats().fenced_checks;
    assert_eq!(
        (after.passed - before.passed, after.not_held, after.failed),
        (1, before.not_held, before.failed),
        "the checks counted: {after:?}, before: {before:?}"
    );
    let outcomes: Vec<_> = capture
        .named("lease.store")
        .into_iter()
        .map(|span| {
            (
                span["lease.operation"].clone(),
                span["lease.outcome"].clone(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [("fence".to_owned(), "ok".to_owned())],
        "the fenced transaction's spans"
    );
    guard.release().await.unwrap();
    fresh.teardown().await.unwrap();
}

/// The holder's renewal of `notify` in flight, on a connection of its own.
async fn renewal_in_flight(store: &SqlxStore<Postgres>) -> RenewalInFlight<PgConnection> {
    let connection = PgConnection::connect(&env::postgres_url()).await.unwrap();
    let table = store.table().to_string();
    RenewalInFlight::start(store.executor(), connection, &table, "notify")
        .await
        .unwrap()
}

/// Asserts that `error` is a serialization failure (`Conflict`: try the transaction again).
fn assert_serialization_failure(error: &Error) {
    assert_eq!(
        error.store_error_kind(),
        Some(StoreErrorKind::Conflict),
        "not a serialization failure: {}",
        lease_sqlx::ErrorChain(error)
    );
}

/// Expires `notify` by the database's clock.
async fn expire(pool: &Pool<Postgres>, store: &SqlxStore<Postgres>) {
    sqlx::raw_sql(AssertSqlSafe(format!(
        "UPDATE {} SET expires_at = statement_timestamp() WHERE name = 'notify'",
        store.table()
    )))
    .execute(pool)
    .await
    .unwrap();
}

/// A transaction whose snapshot its first statement took, and whose lease's expiry in that
/// snapshot has since passed while the renewer kept the lease (a later version of its row).
async fn outlived_snapshot<'p>(
    pool: &'p Pool<Postgres>,
    notices: &str,
    guard: &lease_sqlx::LeaseGuard,
) -> sqlx::Transaction<'p, Postgres> {
    let mut tx = pool.begin().await.unwrap();
    count_in(&mut tx, notices).await;
    tokio::time::sleep(TTL + TTL / 2).await;
    assert!(guard.is_held(), "the renewer did not keep the lease");
    tx
}

/// Runs `UPDATE <the lease table> SET <set> WHERE <the guard's name, holder and fence> <and>`
/// inside `tx`, as a hand-written check would; answers how many rows it matched.
async fn update_in(
    tx: &mut sqlx::Transaction<'_, Postgres>,
    store: &SqlxStore<Postgres>,
    set: &str,
    and: &str,
    guard: &lease_sqlx::LeaseGuard,
) -> u64 {
    sqlx::query(AssertSqlSafe(format!(
        "UPDATE {} SET {set} WHERE name = $1 AND holder = $2 AND fence = $3 {and}",
        store.table()
    )))
    .bind(guard.name().as_str())
    .bind(guard.holder().as_str())
    .bind(i64::try_from(guard.fence().get()).unwrap())
    .execute(&mut **tx)
    .await
    .unwrap()
    .rows_affected()
}

/// Reads the protected table inside `tx`: the transaction's first statement takes its snapshot.
async fn count_in(tx: &mut sqlx::Transaction<'_, Postgres>, notices: &str) {
    sqlx::query(AssertSqlSafe(format!("SELECT count(*) FROM {notices}")))
        .fetch_one(&mut **tx)
        .await
        .unwrap();
}

/// Writes one row to the protected table inside `tx`.
async fn insert_in(
    tx: &mut sqlx::Transaction<'_, Postgres>,
    notices: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(AssertSqlSafe(format!(
        "INSERT INTO {notices} (value) VALUES (1)"
    )))
    .execute(&mut **tx)
    .await
    .map(drop)
}
