//! Work can end its fenced transaction without an error it sees: on MariaDB `TRUNCATE` (as any
//! data definition) commits it first, and on either database a `COMMIT` or `ROLLBACK` the work
//! sends itself ends it; the writes after it commit on their own. Through
//! `lease_diesel::fenced_with`, with the check at the `BEGIN` or with the commit, the fenced
//! transaction must not answer that it committed under the lease (nor that nothing committed):
//! it answers `OutcomeUnknown`, whose source says why, and the lease is not lost by it; and on
//! PostgreSQL and MariaDB it marks the connection broken, so that its pool closes it: its
//! session may keep locks no rollback releases (MariaDB's `LOCK TABLES`). On SQLite (where SQLite
//! may also roll the transaction back by itself) the connection stays usable and goes back to
//! its pool: an in-memory database lives only as long as its connections.
#![cfg(all(
    feature = "deadpool",
    any(feature = "mysql", feature = "postgres", feature = "sqlite")
))]

use diesel_async::SimpleAsyncConnection;
use diesel_async::pooled_connection::AsyncDieselConnectionManager;
use diesel_async::pooled_connection::deadpool::Pool;
use lease_core::runtime::TokioRuntime;
use lease_core::{BoxError, LeaseClient, StoreErrorKind};
use lease_diesel::{CheckAt, Dialect, DieselPool, DieselStore, TransactionEnded};
use lease_tests::env;

#[cfg(feature = "mysql")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_work_that_ended_its_transaction_is_not_told_it_committed() {
    use diesel_async::AsyncMysqlConnection;

    let manager = AsyncDieselConnectionManager::<AsyncMysqlConnection>::new(env::mysql_url());
    let pool: Pool<AsyncMysqlConnection> = Pool::builder(manager).max_size(2).build().unwrap();
    let mut connection = match pool.get().await {
        Ok(connection) => connection,
        Err(error) => return env::skip_or_fail("mariadb", &error.to_string()),
    };
    let table = env::unique_table("ended");
    let store = DieselStore::with_table(pool.clone(), &table).unwrap();
    store.setup().await.unwrap();
    let scratch = format!("{table}_scratch");
    connection
        .batch_execute(&format!("CREATE TABLE {scratch} (v int)"))
        .await
        .unwrap();
    // Given back: each fenced transaction takes a connection of its own, and the store's
    // statements need the other.
    drop(connection);
    // Commits the transaction first.
    let truncate = format!("TRUNCATE TABLE {scratch}");
    ended_inside_work(&store, &pool, &table, &[&truncate]).await;
    pool.get()
        .await
        .unwrap()
        .batch_execute(&format!("DROP TABLE {scratch}"))
        .await
        .unwrap();
}

/// `LOCK TABLES` commits the transaction first, and its table locks outlive it: no rollback
/// releases them. Fenced work that took them is answered `TransactionEnded`, and its connection
/// is marked broken: given back to the pool (of one connection), it is closed, where the
/// store's next statement on it would fail ("was not locked with LOCK TABLES").
#[cfg(feature = "mysql")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_work_that_locked_tables_leaves_no_lock_on_the_pool() {
    use diesel_async::AsyncMysqlConnection;
    use lease_core::LeaseStore;

    let manager = AsyncDieselConnectionManager::<AsyncMysqlConnection>::new(env::mysql_url());
    let pool: Pool<AsyncMysqlConnection> = Pool::builder(manager).max_size(1).build().unwrap();
    let mut connection = match pool.get().await {
        Ok(connection) => connection,
        Err(error) => return env::skip_or_fail("mariadb", &error.to_string()),
    };
    let table = env::unique_table("locked");
    let notes = format!("{table}_notes");
    connection
        .batch_execute(&format!("CREATE TABLE {notes} (v int)"))
        .await
        .unwrap();
    drop(connection);
    let store = DieselStore::with_table(pool.clone(), &table).unwrap();
    store.setup().await.unwrap();
    let client = LeaseClient::new(store.clone(), TokioRuntime);
    let guard = client.try_acquire("notes").await.unwrap().expect("free");
    for at in [CheckAt::Begin, CheckAt::Commit] {
        let mut connection = pool.get().await.unwrap();
        let answer = lease_diesel::fenced_with(&store, &mut connection, &guard, at, async |conn| {
            conn.batch_execute(&format!("LOCK TABLES {notes} WRITE"))
                .await?;
            conn.batch_execute(&format!("INSERT INTO {notes} VALUES (1)"))
                .await?;
            Ok::<_, BoxError>(())
        })
        .await;
        assert_transaction_ended(answer, &format!("{at:?}"));
        drop(connection);
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            store.inspect(guard.name()),
        )
        .await
        .unwrap_or_else(|_| panic!("{at:?}: the store's next statement did not answer"));
        assert!(
            matches!(&read, Ok(Some(info)) if info.holder == *guard.holder()),
            "{at:?}: the store's next statement, on the pool's one connection: {read:?}"
        );
    }
    guard.release().await.unwrap();
    pool.get()
        .await
        .unwrap()
        .batch_execute(&format!("DROP TABLE {notes}; DROP TABLE {table}"))
        .await
        .unwrap();
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_work_that_ended_its_transaction_is_not_told_it_committed() {
    use diesel_async::AsyncPgConnection;

    let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new(env::postgres_url());
    let pool: Pool<AsyncPgConnection> = Pool::builder(manager).max_size(2).build().unwrap();
    let connection = match pool.get().await {
        Ok(connection) => connection,
        Err(error) => return env::skip_or_fail("postgres", &error.to_string()),
    };
    drop(connection);
    let table = env::unique_table("ended");
    let store = DieselStore::with_table(pool.clone(), &table).unwrap();
    store.setup().await.unwrap();
    ended_inside_work(&store, &pool, &table, &["COMMIT", "ROLLBACK"]).await;
}

/// A pool of one connection, as an in-memory database would need: the ended transaction's
/// connection must come back to it, neither broken nor closed.
#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_work_that_ended_its_transaction_keeps_its_connection() {
    use lease_diesel::{AsyncSqliteConnection, sqlite_manager};

    let table = env::unique_table("ended");
    let file = std::env::temp_dir().join(format!("{table}.sqlite3"));
    let manager = sqlite_manager(file.to_string_lossy());
    let pool: Pool<AsyncSqliteConnection> = Pool::builder(manager).max_size(1).build().unwrap();
    let store = DieselStore::with_table(pool.clone(), &table).unwrap();
    store.setup().await.unwrap();
    ended_inside_work(&store, &pool, &table, &["COMMIT", "ROLLBACK"]).await;
    pool.close();
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut path = file.clone().into_os_string();
        path.push(suffix);
        let _ = std::fs::remove_file(path);
    }
}

/// For each statement of `endings` and wherever the check goes, each on a connection of its own
/// from `pool`: fenced work that inserts, ends its transaction with the statement and inserts
/// again is answered `OutcomeUnknown` (`TransactionEnded`), and the lease stays held; so is such
/// work whose lease is lost before it ends (the answer is not "not held": a write committed).
/// On PostgreSQL and MariaDB its connection is marked broken; on SQLite (`pool` of one
/// connection) it takes the next fenced transaction and goes back to the pool, which keeps it.
/// Drops `table` and its notes at the end.
async fn ended_inside_work<P: DieselPool>(
    store: &DieselStore<P>,
    pool: &P,
    table: &str,
    endings: &[&str],
) {
    let notes = format!("{table}_notes");
    let kept = format!("{table}_kept");
    let sqlite = store.statements().dialect() == Dialect::Sqlite;
    let mut connection = pool.connection().await.unwrap();
    connection
        .batch_execute(&format!("CREATE TABLE {notes} (v int)"))
        .await
        .unwrap();
    if sqlite {
        // Lives only on the connection that made it: the pool's one connection.
        connection
            .batch_execute(&format!("CREATE TEMP TABLE {kept} (v int)"))
            .await
            .unwrap();
    }
    drop(connection);
    let client = LeaseClient::new(store.clone(), TokioRuntime);
    let guard = client.try_acquire("notes").await.unwrap().expect("free");
    for (n, ending) in endings.iter().enumerate() {
        for at in [CheckAt::Begin, CheckAt::Commit] {
            // Then with the lease lost while the work ran, after it ended the transaction: the
            // later write committed all the same, so the answer is still not "nothing
            // committed".
            for lose in [false, true] {
                let context = format!("{ending} at {at:?}, lease lost: {lose}");
                let lost = client
                    .try_acquire(format!("lost-{n}-{at:?}-{lose}"))
                    .await
                    .unwrap()
                    .expect("free");
                let lease = if lose { &lost } else { &guard };
                let mut connection = pool.connection().await.unwrap();
                let answer =
                    lease_diesel::fenced_with(store, &mut *connection, lease, at, async |conn| {
                        conn.batch_execute(&format!("INSERT INTO {notes} VALUES (1)"))
                            .await?;
                        // Ends the transaction; the next insert commits on its own.
                        conn.batch_execute(ending).await?;
                        conn.batch_execute(&format!("INSERT INTO {notes} VALUES (2)"))
                            .await?;
                        if lose {
                            let _ = lost.mark_not_held();
                        }
                        Ok::<_, BoxError>(())
                    })
                    .await;
                assert_transaction_ended(answer, &context);
                if sqlite {
                    let next = lease_diesel::fenced_with(
                        store,
                        &mut *connection,
                        &guard,
                        at,
                        async |_| Ok::<_, BoxError>(()),
                    )
                    .await;
                    assert!(
                        next.is_ok(),
                        "{context}: the connection cannot take the next fenced transaction: \
                         {next:?}"
                    );
                    drop(connection);
                    let read = pool
                        .connection()
                        .await
                        .unwrap()
                        .batch_execute(&format!("SELECT v FROM {kept}"))
                        .await;
                    assert!(
                        read.is_ok(),
                        "{context}: the pool closed the connection: {read:?}"
                    );
                } else {
                    assert!(
                        lease_diesel::fenced_with(store, &mut *connection, lease, at, async |_| {
                            Ok::<_, BoxError>(())
                        })
                        .await
                        .is_err_and(|error| matches!(
                            error.downcast_ref::<diesel::result::Error>(),
                            Some(diesel::result::Error::BrokenTransactionManager)
                        )),
                        "{context}: the connection was not marked broken"
                    );
                }
                assert!(
                    guard.is_held(),
                    "{context}: the ended transaction cost the lease"
                );
                drop(lost);
            }
        }
    }
    guard.release().await.unwrap();
    pool.connection()
        .await
        .unwrap()
        .batch_execute(&format!("DROP TABLE {notes}; DROP TABLE {table}"))
        .await
        .unwrap();
}

/// Asserts that `answer` is the store's `OutcomeUnknown` whose source is `TransactionEnded`: the
/// work ended its transaction, and some of its writes committed on their own.
fn assert_transaction_ended<T: std::fmt::Debug>(answer: Result<T, BoxError>, context: &str) {
    let error = answer.expect_err(&format!(
        "{context}: told that writes committed under the lease"
    ));
    let error = error
        .downcast_ref::<lease_diesel::Error>()
        .unwrap_or_else(|| panic!("{context}: not the store's error: {error}"));
    assert_eq!(
        error.store_error_kind(),
        Some(StoreErrorKind::OutcomeUnknown),
        "{context}: {error}"
    );
    let source = std::error::Error::source(error);
    assert!(
        source.is_some_and(|source| source.is::<TransactionEnded>()),
        "{context}: {error} ({source:?})"
    );
}
