//! The fenced check through diesel-async, inside a transaction on the caller's connection: the
//! holder's write commits; once the lease has expired by the database's clock the check fails
//! with `Error::NotHeld`, the guard is lost at once, and the transaction rolls back; the same
//! write without the check (the negative control) commits. On `SERIALIZABLE` connections, a check
//! after the transaction's first statement never reports a lease still held as gone.

use std::time::Duration;

use diesel_async::pooled_connection::AsyncDieselConnectionManager;
use diesel_async::pooled_connection::deadpool::{self, Pool};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};
use lease_core::runtime::TokioRuntime;
use lease_core::{Error, LeaseClient, LeaseGuard, LossReason, Ttl};
use lease_diesel::DieselStore;
use lease_tests::env;
use lease_tests::renewal_in_flight::RenewalInFlight;
use lease_tests::spans::SpanCapture;
use tracing::instrument::WithSubscriber;

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

type PgPool = Pool<AsyncPgConnection>;

/// A store on a fresh table named from `prefix`, a protected table beside it, a connection of
/// the store's pool, and a guard of the lease `name`; `None` (after saying so, or failing under
/// `LEASE_TEST_REQUIRE_ALL`) when PostgreSQL cannot be reached.
struct Fixture {
    store: DieselStore<PgPool>,
    table: String,
    notices: String,
    conn: deadpool::Object<AsyncPgConnection>,
    guard: LeaseGuard,
}

impl Fixture {
    async fn new(prefix: &str, name: &str) -> Option<Self> {
        Self::on(env::postgres_url(), Duration::from_secs(60), prefix, name).await
    }

    /// The same on the server `url`, the guard's lease renewed every quarter of `ttl`, each
    /// renewal given a third of it (a loaded machine can take a fifth).
    async fn on(url: String, ttl: Duration, prefix: &str, name: &str) -> Option<Self> {
        let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new(url);
        let pool = Pool::builder(manager).max_size(4).build().unwrap();
        if let Err(e) = pool.get().await {
            env::skip_or_fail("postgres", &e.to_string());
            return None;
        }
        let table = env::unique_table(prefix);
        let store = DieselStore::with_table(pool.clone(), &table).unwrap();
        store.setup().await.unwrap();
        let notices = format!("{table}_notices");
        let mut conn = pool.get().await.unwrap();
        conn.batch_execute(&format!("CREATE TABLE {notices} (fence BIGINT NOT NULL)"))
            .await
            .unwrap();
        let client = LeaseClient::builder(store.clone(), TokioRuntime)
            .ttl(Ttl::new(ttl).unwrap())
            .renew_every(ttl / 4)
            .store_timeout(ttl / 3)
            .build()
            .unwrap();
        // A wait rather than one try: it rides out a statement a loaded machine makes outlast
        // a short lease's store timeout.
        let guard = client.acquire(name, Duration::from_secs(10)).await.unwrap();
        Some(Self {
            store,
            table,
            notices,
            conn,
            guard,
        })
    }
}

/// A transaction on `conn` that checks `guard`'s lease first, writes its fence to `notices` and
/// commits.
async fn checked_write(
    store: &DieselStore<PgPool>,
    conn: &mut AsyncPgConnection,
    guard: &LeaseGuard,
    notices: &str,
) {
    conn.batch_execute("BEGIN").await.unwrap();
    assert_eq!(store.fence(&mut *conn, guard).await.unwrap(), guard.fence());
    conn.batch_execute(&format!(
        "INSERT INTO {notices} VALUES ({}); COMMIT",
        guard.fence()
    ))
    .await
    .unwrap();
}

/// How many rows `notices` holds.
async fn count(conn: &mut AsyncPgConnection, notices: &str) -> i64 {
    let count: Count = diesel::sql_query(format!("SELECT count(*) AS n FROM {notices}"))
        .get_result(conn)
        .await
        .unwrap();
    count.n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_writes_on_postgres() {
    let Some(Fixture {
        store,
        table,
        notices,
        mut conn,
        guard,
    }) = Fixture::new("lease_diesel_fenced", "notify").await
    else {
        return;
    };

    // Checked and committed.
    checked_write(&store, &mut conn, &guard, &notices).await;

    // Expired by the database's clock: refused, lost at once, nothing committed.
    conn.batch_execute(&format!("UPDATE {table} SET expires_at = taken_at"))
        .await
        .unwrap();
    conn.batch_execute("BEGIN").await.unwrap();
    let refused = store.fence(&mut *conn, &guard).await.unwrap_err();
    assert!(matches!(refused, Error::NotHeld { .. }), "{refused}");
    conn.batch_execute("ROLLBACK").await.unwrap();
    assert!(!guard.is_held());
    let lost = tokio::time::timeout(Duration::from_secs(1), guard.lost()).await;
    assert_eq!(lost.unwrap(), LossReason::NotHeld);

    // The negative control: without the check the stale write commits.
    conn.batch_execute(&format!("INSERT INTO {notices} VALUES ({})", guard.fence()))
        .await
        .unwrap();
    assert_eq!(count(&mut conn, &notices).await, 2);
    conn.batch_execute(&format!("DROP TABLE {notices}; DROP TABLE {table}"))
        .await
        .unwrap();
}

/// `lease_diesel::fenced` on a connection already in a transaction is refused before it sends
/// anything: its commit would commit the outer transaction, whose own write stays uncommitted
/// until the outer transaction decides (here: rolled back, so nothing is left).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_refuses_a_connection_in_a_transaction() {
    use diesel_async::AsyncConnection;

    let Some(Fixture {
        store,
        table,
        notices,
        mut conn,
        guard,
    }) = Fixture::new("lease_diesel_nested", "nested").await
    else {
        return;
    };

    let outer = conn
        .transaction::<(), diesel::result::Error, _>(async |conn| {
            conn.batch_execute(&format!("INSERT INTO {notices} VALUES (1)"))
                .await?;
            let inner = lease_diesel::fenced(&store, conn, &guard, async |conn| {
                conn.batch_execute(&format!("INSERT INTO {notices} VALUES (2)"))
                    .await
                    .map_err(Box::<dyn std::error::Error + Send + Sync>::from)
            })
            .await;
            let refused = inner.unwrap_err();
            assert!(
                matches!(
                    refused.downcast_ref::<diesel::result::Error>(),
                    Some(diesel::result::Error::AlreadyInTransaction)
                ),
                "{refused}"
            );
            Err(diesel::result::Error::RollbackTransaction)
        })
        .await;
    assert!(matches!(
        outer,
        Err(diesel::result::Error::RollbackTransaction)
    ));
    assert_eq!(count(&mut conn, &notices).await, 0, "nothing committed");
    assert!(guard.is_held(), "the refusal costs the lease nothing");
    conn.batch_execute(&format!("DROP TABLE {notices}; DROP TABLE {table}"))
        .await
        .unwrap();
}

/// On connections whose transactions are `SERIALIZABLE`, the check after the transaction's first
/// statement, once a renewal has pushed back an expiry that the snapshot saw pass, fails with a
/// serialization failure (`Conflict`: try again), and the lease stays held; the next
/// transaction, checked first, goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_after_a_read_under_a_snapshot_keeps_a_renewed_lease() {
    use lease_core::StoreErrorKind;

    let ttl = Duration::from_millis(1200);
    let url = env::serializable(&env::postgres_url());
    let Some(Fixture {
        store,
        table,
        notices,
        mut conn,
        guard,
    }) = Fixture::on(url, ttl, "lease_diesel_snapshot", "notify").await
    else {
        return;
    };

    // The transaction's first statement takes its snapshot; the expiry it saw then passes.
    conn.batch_execute(&format!("BEGIN; SELECT count(*) FROM {notices}"))
        .await
        .unwrap();
    tokio::time::sleep(ttl + ttl / 2).await;
    assert!(guard.is_held(), "the renewer did not keep the lease");
    let refused = store.fence(&mut *conn, &guard).await.unwrap_err();
    assert!(
        !matches!(refused, Error::NotHeld { .. }),
        "a lease still held was reported gone: {refused}"
    );
    assert_eq!(
        refused.store_error_kind(),
        Some(StoreErrorKind::Conflict),
        "{refused}"
    );
    assert!(guard.is_held(), "the failed check cost a lease still held");
    conn.batch_execute("ROLLBACK").await.unwrap();

    // Checked first. A renewal in flight when the check begins still fails it with a
    // serialization failure: try again, as a caller would.
    let mut tries = 0;
    loop {
        tries += 1;
        conn.batch_execute("BEGIN").await.unwrap();
        match store.fence(&mut *conn, &guard).await {
            Ok(fence) => {
                assert_eq!(fence, guard.fence());
                break;
            }
            Err(error)
                if tries < 3 && error.store_error_kind() == Some(StoreErrorKind::Conflict) =>
            {
                conn.batch_execute("ROLLBACK").await.unwrap();
            }
            Err(error) => panic!("the check first failed {tries} times: {error}"),
        }
    }
    conn.batch_execute(&format!(
        "INSERT INTO {notices} VALUES ({}); COMMIT",
        guard.fence()
    ))
    .await
    .unwrap();
    assert_eq!(count(&mut conn, &notices).await, 1);
    guard.release().await.unwrap();
    conn.batch_execute(&format!("DROP TABLE {notices}; DROP TABLE {table}"))
        .await
        .unwrap();
}

/// On connections whose transactions are `SERIALIZABLE`, the holder's own renewal in flight when
/// `fenced` checks with its `BEGIN`: the check's snapshot predates the renewal's commit, so the
/// check fails with a serialization failure once the renewal frees the row, and `fenced` begins
/// again by itself: the work runs once, and commits. (lease-sqlx's `fence_under_a_snapshot`
/// shows the same race failing a check in the caller's own transaction.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_under_a_snapshot_begins_again_after_a_renewal_in_flight() {
    // A TTL of a minute: no renewal of the client's own during the test.
    let url = env::serializable(&env::postgres_url());
    let Some(mut fixture) = Fixture::on(
        url,
        Duration::from_secs(60),
        "lease_diesel_in_flight",
        "notify",
    )
    .await
    else {
        return;
    };
    let (store, table, notices, guard) = (
        &fixture.store,
        &fixture.table,
        &fixture.notices,
        &fixture.guard,
    );
    let conn = &mut fixture.conn;
    let renewal = RenewalInFlight::start(
        store.executor(),
        AsyncPgConnection::establish(&env::postgres_url())
            .await
            .unwrap(),
        table,
        "notify",
    )
    .await
    .unwrap();
    let commit_once_waited_for = async {
        renewal
            .commit_once_waited_for(store.executor())
            .await
            .unwrap();
    };
    let mut runs = 0;
    let capture = SpanCapture::new();
    let transaction = lease_diesel::fenced(store, &mut **conn, guard, async |conn| {
        runs += 1;
        diesel::sql_query(format!("INSERT INTO {notices} VALUES (1)"))
            .execute(conn)
            .await?;
        Ok::<_, lease_core::BoxError>(())
    })
    .with_subscriber(capture.clone());
    let (done, ()) = tokio::join!(transaction, commit_once_waited_for);
    done.expect("fenced did not begin again after losing to the renewal");
    assert_eq!(runs, 1, "the work ran more than once");
    // One check, begun twice: one span, that passed.
    let outcomes: Vec<_> = capture
        .named("lease.store")
        .into_iter()
        .map(|span| {
            (
                span["lease.operation"].clone(),
                span.get("lease.outcome").cloned(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [("fence".to_owned(), Some("ok".to_owned()))],
        "the fenced transaction's spans"
    );
    assert_eq!(count(conn, notices).await, 1);
    assert!(guard.is_held());
    fixture.guard.release().await.unwrap();
    conn.batch_execute(&format!("DROP TABLE {notices}; DROP TABLE {table}"))
        .await
        .unwrap();
}
