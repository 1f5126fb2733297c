//! A fenced transaction whose future is dropped while its begin is in flight leaves no
//! transaction open on a pooled connection.
//!
//! The begin of `fenced_with(.., CheckAt::Begin, ..)` carries the check, which waits for the
//! lease's row while another transaction holds it locked. Dropped then (a timeout, or
//! `run_exclusive` stopping the work at a loss), the future leaves the server's transaction
//! to go on: once the row is free, the check runs and the transaction stays open. sqlx does
//! not see it (it counts a transaction only once its `BEGIN` has answered), and its pool only
//! pings a connection it takes back, so that connection would go back to the pool inside the
//! transaction, holding the lease's row lock, and run whoever takes it next inside it. The
//! pool here has one connection, so the statements after the drop run on the connection the
//! transaction ran on, unless it was closed.
//!
//! The control beside each case takes the same steps with sqlx's own `Transaction::begin` and
//! a begin message of the same shape: there the pooled connection does come back inside the
//! transaction, which shows that the case can see what it checks.

use std::time::Duration;

use lease_core::runtime::TokioRuntime;
use lease_core::{Error, LeaseClient, LeaseGuard};
use lease_sqlx::sqlx::{self, AssertSqlSafe, Connection, Pool, SqlSafeStr};
use lease_sqlx::{CheckAt, Execute, ExecuteOn, SqlxDatabase, SqlxExecutor, SqlxStore};
use lease_tests::env;

/// How long the dropped future waits for the row before it is dropped: long enough for its
/// begin to reach the server, which answers only once the row is free.
const WAIT: Duration = Duration::from_millis(300);

/// What the server needs to run the check once the row is free, before the pool is asked for
/// its connection again.
const SETTLE: Duration = Duration::from_millis(300);

/// A lease held through `store`, whose table is `table`, and the SQL that locks its row.
async fn held<DB: SqlxDatabase>(
    store: &SqlxStore<DB>,
    table: &str,
) -> (LeaseClient, LeaseGuard, String)
where
    lease_sqlx::SqlxExecutor<DB>: lease_sqlx::Execute,
{
    store.setup().await.unwrap();
    let client = LeaseClient::new(store.clone(), TokioRuntime);
    let guard = client.try_acquire("dropped").await.unwrap().unwrap();
    let lock = format!("SELECT 1 FROM {table} WHERE name = 'dropped' FOR UPDATE");
    (client, guard, lock)
}

/// Drops `begin` after [`WAIT`], then commits `blocker`'s transaction, which frees the row.
async fn drop_while_waiting<DB: sqlx::Database, F: Future>(begin: F, blocker: &mut DB::Connection)
where
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
{
    let waited = tokio::time::timeout(WAIT, begin).await;
    assert!(waited.is_err(), "the begin should wait for the locked row");
    sqlx::raw_sql("COMMIT")
        .execute(&mut *blocker)
        .await
        .unwrap();
    tokio::time::sleep(SETTLE).await;
}

/// What a case leaves for its check and its cleanup: the lease's table, the connection that
/// locked its row, and the client and guard (kept until the check ran).
struct Dropped<DB: sqlx::Database> {
    table: String,
    blocker: DB::Connection,
    _held: (LeaseClient, LeaseGuard),
}

/// Takes a lease through `pool`, locks its row from another connection, and drops a begin
/// that waits for it: `fenced_with(.., CheckAt::Begin, ..)`'s through the library, or sqlx's
/// own `Transaction::begin` with a message of the same shape on `pool`'s connection.
async fn drop_a_begin_in_flight<DB>(
    pool: &Pool<DB>,
    url: &str,
    through_the_library: bool,
) -> Dropped<DB>
where
    DB: SqlxDatabase,
    SqlxExecutor<DB>: Execute + for<'c> ExecuteOn<&'c mut DB::Connection>,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
{
    let table = env::unique_table("lease_sqlx_fenced_dropped");
    let store = SqlxStore::with_table(pool.clone(), &table).unwrap();
    let (client, guard, lock) = held(&store, &table).await;
    let mut blocker = <DB::Connection as Connection>::connect(url).await.unwrap();
    sqlx::raw_sql("BEGIN").execute(&mut blocker).await.unwrap();
    sqlx::raw_sql(AssertSqlSafe(lock.clone()))
        .execute(&mut blocker)
        .await
        .unwrap();
    if through_the_library {
        let begin =
            lease_sqlx::fenced_with(&store, &guard, CheckAt::Begin, async |_| Ok::<_, Error>(()));
        drop_while_waiting::<DB, _>(begin, &mut blocker).await;
    } else {
        let mut connection = pool.acquire().await.unwrap();
        let statement = AssertSqlSafe(format!("BEGIN; {lock}")).into_sql_str();
        let begin = sqlx::Transaction::<DB>::begin(&mut *connection, Some(statement));
        drop_while_waiting::<DB, _>(begin, &mut blocker).await;
    }
    Dropped {
        table,
        blocker,
        _held: (client, guard),
    }
}

/// Closes `pool` and drops the case's table through the connection that locked its row.
async fn clean_up<DB>(pool: Pool<DB>, mut dropped: Dropped<DB>)
where
    DB: sqlx::Database,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
{
    pool.close().await;
    let _ = sqlx::raw_sql(AssertSqlSafe(format!("DROP TABLE {}", dropped.table)))
        .execute(&mut dropped.blocker)
        .await;
}

async fn postgres_transaction_left_open(through_the_library: bool) -> bool {
    let url = env::postgres_url();
    let pool = match sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await
    {
        Ok(pool) => pool,
        Err(e) => {
            env::skip_or_fail("postgres", &e.to_string());
            return through_the_library;
        }
    };
    let dropped = drop_a_begin_in_flight(&pool, &url, through_the_library).await;
    // Two statements, one after the other, on the pool's one connection: in transactions of
    // their own, they get two transaction ids; inside one left open, the same.
    let mut ids = Vec::new();
    for _ in 0..2 {
        let id: String = sqlx::query_scalar("SELECT pg_current_xact_id()::text")
            .fetch_one(&pool)
            .await
            .unwrap();
        ids.push(id);
    }
    clean_up(pool, dropped).await;
    ids[0] == ids[1]
}

async fn mariadb_transaction_left_open(through_the_library: bool) -> bool {
    let url = env::mysql_url();
    let pool = match sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await
    {
        Ok(pool) => pool,
        Err(e) => {
            env::skip_or_fail("mariadb", &e.to_string());
            return through_the_library;
        }
    };
    let dropped = drop_a_begin_in_flight(&pool, &url, through_the_library).await;
    let in_transaction: u64 = sqlx::query_scalar("SELECT @@in_transaction")
        .fetch_one(&pool)
        .await
        .unwrap();
    clean_up(pool, dropped).await;
    in_transaction == 1
}

#[tokio::test]
async fn postgres_a_dropped_fenced_begin_leaves_no_transaction_on_the_pool() {
    assert!(
        !postgres_transaction_left_open(true).await,
        "the pooled connection came back inside the dropped fenced transaction"
    );
}

#[tokio::test]
async fn postgres_control_sqlx_alone_leaves_the_transaction_open() {
    assert!(
        postgres_transaction_left_open(false).await,
        "sqlx's own begin, dropped in flight, should leave the pooled connection in the transaction"
    );
}

#[tokio::test]
async fn mariadb_a_dropped_fenced_begin_leaves_no_transaction_on_the_pool() {
    assert!(
        !mariadb_transaction_left_open(true).await,
        "the pooled connection came back inside the dropped fenced transaction"
    );
}

#[tokio::test]
async fn mariadb_control_sqlx_alone_leaves_the_transaction_open() {
    assert!(
        mariadb_transaction_left_open(false).await,
        "sqlx's own begin, dropped in flight, should leave the pooled connection in the transaction"
    );
}
