//! The suite's fenced cases with the whole transaction through `lease_sqlx::fenced` (and
//! `fenced_with(.., CheckAt::Begin, ..)`), on every database (on PostgreSQL the check at the commit is the statement prepared on the
//! connection, on MariaDB the check's text, on SQLite the check at the start), and on
//! PostgreSQL how the prepared fence lives on a connection.
#![cfg(all(feature = "postgres", feature = "mysql", feature = "sqlite"))]

mod common;

use std::sync::Arc;

use common::fenced::{Check, Expect, FencedSql, expect};
use common::{Backend, TestDb};
use lease_sqlx::sqlx::{MySql, Postgres, Sqlite};
use lease_tests::{TestBackend, cases, env};

/// One test per database listed for `case`, with fenced writes through `lease_sqlx::fenced`
/// (`Check::Function`) or `fenced_with(.., CheckAt::Begin, ..)` (`Check::FunctionAtBegin`).
macro_rules! through_fenced {
    ($case:ident, $check:ident: $($db:ident = $ty:ty),+ $(,)?) => {
        mod $case {
            use super::*;

            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $db() {
                    let backend =
                        Backend::<$ty>::plain().checking(stringify!($db), Check::$check);
                    expect(backend, Expect::Pass, |ctx| async move {
                        cases::$case(&*ctx).await
                    })
                    .await;
                }
            )+
        }
    };
}

mod at_commit {
    use super::*;

    through_fenced!(fenced_write_commits_while_held, Function: postgres = Postgres, mariadb = MySql, sqlite = Sqlite);
    through_fenced!(expired_lease_fails_fenced_check, Function: postgres = Postgres, mariadb = MySql, sqlite = Sqlite);
    through_fenced!(freed_lease_fails_fenced_check, Function: postgres = Postgres, mariadb = MySql, sqlite = Sqlite);
    through_fenced!(stale_fenced_write_commits_nothing, Function: postgres = Postgres, mariadb = MySql, sqlite = Sqlite);
    // Checked at the commit, a takeover does not wait for the work: on SQLite, checked first.
    through_fenced!(takeover_waits_for_fenced_transaction, Function: sqlite = Sqlite);
    // Checked first, a takeover and a renewal wait for the work: on PostgreSQL and MariaDB,
    // checked at the commit.
    through_fenced!(takeover_during_fenced_work_commits_nothing, Function: postgres = Postgres, mariadb = MySql);
    through_fenced!(renewal_goes_on_during_fenced_work, Function: postgres = Postgres, mariadb = MySql);
    through_fenced!(fenced_work_spans_a_renewal, Function: postgres = Postgres, mariadb = MySql, sqlite = Sqlite);
}

/// Checked with the `BEGIN`: the row stays locked while the work runs, on every database.
mod at_begin {
    use super::*;

    through_fenced!(fenced_write_commits_while_held, FunctionAtBegin: postgres = Postgres, mariadb = MySql, sqlite = Sqlite);
    through_fenced!(expired_lease_fails_fenced_check, FunctionAtBegin: postgres = Postgres, mariadb = MySql, sqlite = Sqlite);
    through_fenced!(freed_lease_fails_fenced_check, FunctionAtBegin: postgres = Postgres, mariadb = MySql, sqlite = Sqlite);
    through_fenced!(stale_fenced_write_commits_nothing, FunctionAtBegin: postgres = Postgres, mariadb = MySql, sqlite = Sqlite);
    through_fenced!(takeover_waits_for_fenced_transaction, FunctionAtBegin: postgres = Postgres, mariadb = MySql, sqlite = Sqlite);
    through_fenced!(fenced_work_spans_a_renewal, FunctionAtBegin: postgres = Postgres, mariadb = MySql, sqlite = Sqlite);
}

/// On PostgreSQL connections whose transactions are `SERIALIZABLE` by default: `fenced` finds
/// that its transaction reads from a snapshot and checks with the `BEGIN` (a takeover then
/// waits for it), and a renewal that falls into it costs nothing; through the extended protocol
/// (the prepared probe and check) and through the simple one (the texts, as behind a
/// transaction pooler).
mod under_snapshot {
    use super::*;
    use lease_sqlx::PgProtocol;

    /// One test for `case` through `lease_sqlx::fenced` on serializable connections, per protocol.
    macro_rules! serializable {
        ($case:ident) => {
            mod $case {
                use super::*;

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn prepared() {
                    let backend = Backend::<Postgres>::plain()
                        .checking("postgres", Check::Function)
                        .serializable("postgres-serializable");
                    expect(backend, Expect::Pass, |ctx| async move {
                        cases::$case(&*ctx).await
                    })
                    .await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn simple_protocol() {
                    let backend =
                        Backend::<Postgres>::adjusted("postgres-simple-protocol", |store| {
                            store.map_executor(|x| x.with_protocol(PgProtocol::SimpleInline))
                        })
                        .checking("postgres-simple-protocol", Check::Function)
                        .serializable("postgres-simple-protocol-serializable");
                    expect(backend, Expect::Pass, |ctx| async move {
                        cases::$case(&*ctx).await
                    })
                    .await;
                }
            }
        };
    }

    serializable!(fenced_write_commits_while_held);
    serializable!(expired_lease_fails_fenced_check);
    serializable!(stale_fenced_write_commits_nothing);
    serializable!(takeover_waits_for_fenced_transaction);
    serializable!(fenced_work_spans_a_renewal);
}

/// PostgreSQL: prepared once per connection, run at every commit, prepared again once lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_prepares_the_fence_once_per_connection() {
    let backend = Backend::<Postgres>::plain();
    if let Err(why) = backend.available().await {
        return env::skip_or_fail("postgres", &why.to_string());
    }
    let (fresh, pool, table) = backend.fresh(1).await.unwrap();
    let notices = format!("{table}_notices");
    Postgres::execute(
        &pool,
        format!("CREATE TABLE {notices} (value BIGINT NOT NULL)"),
    )
    .await
    .unwrap();
    let store = fresh.store().clone();
    let writes = Arc::new(FencedSql {
        store: store.clone(),
        notices,
        check: Check::Function,
        snapshot: false,
    });
    lease_tests::prepared_fence::prepared_once_per_connection(&store, writes).await;
    fresh.teardown().await.unwrap();
}

/// On PostgreSQL a failed statement aborts the transaction, and a plain `COMMIT` then answers
/// `ROLLBACK` without an error: work that swallowed such a failure must not be told that its
/// writes committed, wherever the check goes. Nothing is committed, the caller gets an error,
/// and the lease is not lost by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_work_that_swallowed_a_failure_is_not_told_it_committed() {
    use lease_core::BoxError;
    use lease_sqlx::sqlx::{self, AssertSqlSafe};
    use lease_sqlx::{CheckAt, LeaseClient, runtime::TokioRuntime};

    let Some(fixture) = PgNotes::new("swallowed").await else {
        return;
    };
    let PgNotes {
        pool, store, notes, ..
    } = &fixture;
    let client = LeaseClient::new(store.clone(), TokioRuntime);
    let guard = client.try_acquire("notes").await.unwrap().expect("free");
    for at in [CheckAt::Begin, CheckAt::Commit] {
        let answer = lease_sqlx::fenced_with(store, &guard, at, async |tx| {
            sqlx::query(AssertSqlSafe(format!("INSERT INTO {notes} VALUES (1)")))
                .execute(&mut *tx)
                .await?;
            // A failure the work expects and ignores: the transaction is aborted.
            let _ = sqlx::query("SELECT 1 / 0").execute(&mut *tx).await;
            Ok::<_, BoxError>(())
        })
        .await;
        let (rows,): (i64,) =
            sqlx::query_as(AssertSqlSafe(format!("SELECT count(*) FROM {notes}")))
                .fetch_one(pool)
                .await
                .unwrap();
        assert_eq!(rows, 0, "{at:?}: the aborted transaction committed");
        let error = answer.expect_err(&format!("{at:?}: told it committed"));
        let kind = error
            .downcast_ref::<lease_sqlx::Error>()
            .and_then(lease_sqlx::Error::store_error_kind);
        // Nothing committed, and the answer says so: not an outcome unknown.
        assert_ne!(
            kind,
            Some(lease_core::StoreErrorKind::OutcomeUnknown),
            "{at:?}: {error}"
        );
        assert!(
            guard.is_held(),
            "{at:?}: the aborted transaction cost the lease"
        );
    }
    guard.release().await.unwrap();
    fixture.drop_tables().await;
}

/// On PostgreSQL a `COMMIT` or `ROLLBACK` the work sends itself ends the fenced transaction, and
/// the writes after it commit on their own. The fenced transaction must not answer that it
/// committed under the lease (nor that nothing committed): it answers `OutcomeUnknown`
/// (`TransactionEnded`) wherever the check goes, through the prepared statements and through
/// the simple protocol, and so does the caller's own transaction checked with its commit
/// (`commit_fenced`), even where the session's default isolation level is one the check with
/// the commit refuses. The lease is not lost by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_work_that_ended_its_transaction_is_not_told_it_committed() {
    use lease_core::BoxError;
    use lease_sqlx::sqlx::{self, Acquire, AssertSqlSafe};
    use lease_sqlx::{CheckAt, LeaseClient, PgProtocol, runtime::TokioRuntime};

    let Some(fixture) = PgNotes::new("ended").await else {
        return;
    };
    let PgNotes {
        pool,
        store: prepared,
        notes,
        ..
    } = &fixture;
    let serializable = sqlx::PgPool::connect(&env::serializable(&env::postgres_url()))
        .await
        .unwrap();
    let count = async || -> i64 {
        let (rows,): (i64,) =
            sqlx::query_as(AssertSqlSafe(format!("SELECT count(*) FROM {notes}")))
                .fetch_one(pool)
                .await
                .unwrap();
        rows
    };
    for protocol in [PgProtocol::Prepared, PgProtocol::SimpleInline] {
        let store = prepared
            .clone()
            .map_executor(|executor| executor.with_protocol(protocol));
        let client = LeaseClient::new(store.clone(), TokioRuntime);
        let guard = client.try_acquire("notes").await.unwrap().expect("free");
        for ending in ["COMMIT", "ROLLBACK"] {
            for at in [CheckAt::Begin, CheckAt::Commit] {
                let context = format!("{protocol:?}, {ending} at {at:?}");
                let before = count().await;
                let answer = lease_sqlx::fenced_with(&store, &guard, at, async |tx| {
                    insert_end_insert::<Postgres>(tx, notes, ending).await
                })
                .await;
                assert_transaction_ended(answer, &context);
                let committed = if ending == "COMMIT" { 2 } else { 1 };
                assert_eq!(count().await - before, committed, "{context}");
                assert!(
                    guard.is_held(),
                    "{context}: the ended transaction cost the lease"
                );
            }
            // The caller's own transaction, checked with its commit, at `READ COMMITTED` on a
            // connection whose transactions are `SERIALIZABLE` by default: once ended, the
            // commit's message runs at the default, and must still say that the work ended it.
            let context = format!("{protocol:?}, {ending} in the caller's transaction");
            let mut connection = serializable.acquire().await.unwrap();
            let mut tx = connection.begin().await.unwrap();
            sqlx::raw_sql(AssertSqlSafe(format!(
                "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; \
                 INSERT INTO {notes} VALUES (1); {ending}; INSERT INTO {notes} VALUES (2)"
            )))
            .execute(&mut *tx)
            .await
            .unwrap();
            let answer = lease_sqlx::commit_fenced(&store, tx, &guard)
                .await
                .map_err(BoxError::from);
            assert_transaction_ended(answer, &context);
            assert!(
                guard.is_held(),
                "{context}: the ended transaction cost the lease"
            );
        }
        // A transaction that stays open still commits under the lease, both ways.
        for at in [CheckAt::Begin, CheckAt::Commit] {
            let before = count().await;
            lease_sqlx::fenced_with(&store, &guard, at, async |tx| {
                sqlx::query(AssertSqlSafe(format!("INSERT INTO {notes} VALUES (3)")))
                    .execute(&mut *tx)
                    .await?;
                Ok::<_, BoxError>(())
            })
            .await
            .unwrap_or_else(|error| panic!("{protocol:?} at {at:?}: {error}"));
            assert_eq!(count().await - before, 1, "{protocol:?} at {at:?}");
        }
        guard.release().await.unwrap();
        // The lease lost while the work ran, after the work had ended the transaction: its
        // later write committed all the same, so the answer is still not "nothing committed".
        for at in [CheckAt::Begin, CheckAt::Commit] {
            let context = format!("{protocol:?}, COMMIT at {at:?}, then the lease lost");
            let guard = client
                .try_acquire(format!("lost-{protocol:?}-{at:?}"))
                .await
                .unwrap()
                .expect("free");
            let before = count().await;
            let answer = lease_sqlx::fenced_with(&store, &guard, at, async |tx| {
                insert_end_insert::<Postgres>(tx, notes, "COMMIT").await?;
                let _ = guard.mark_not_held();
                Ok::<_, BoxError>(())
            })
            .await;
            assert_transaction_ended(answer, &context);
            assert_eq!(count().await - before, 2, "{context}");
            drop(guard);
        }
    }
    fixture.drop_tables().await;
}

/// Work that ended its transaction while a new holder's transaction holds the lease's row:
/// the check with the commit, the connection's prepared statement as much as its text, tests
/// for the ended transaction before it touches the row, so it does not wait for the row's lock
/// and then answer a lock timeout as a failure that committed nothing (the work's later write
/// committed): it answers `TransactionEnded`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_work_that_ended_its_transaction_waits_for_no_row_lock() {
    use lease_sqlx::sqlx::{self, Acquire, AssertSqlSafe};
    use lease_sqlx::{CheckAt, LeaseClient, PgProtocol, runtime::TokioRuntime};

    let Some(fixture) = PgNotes::new("ended_locked").await else {
        return;
    };
    let PgNotes {
        pool,
        store: prepared,
        table,
        notes,
    } = &fixture;
    for protocol in [PgProtocol::Prepared, PgProtocol::SimpleInline] {
        let store = prepared
            .clone()
            .map_executor(|executor| executor.with_protocol(protocol));
        let client = LeaseClient::new(store.clone(), TokioRuntime);
        let guard = client.try_acquire("notes").await.unwrap().expect("free");
        // Another transaction holds the lease's row, as a new holder's check at its begin would.
        let mut holding = pool.acquire().await.unwrap();
        let mut other = holding.begin().await.unwrap();
        sqlx::query(AssertSqlSafe(format!(
            "SELECT 1 FROM {table} WHERE name = 'notes' FOR UPDATE"
        )))
        .execute(&mut *other)
        .await
        .unwrap();
        let answer = lease_sqlx::fenced_with(&store, &guard, CheckAt::Commit, async |tx| {
            // The setting outlives the transaction the work ended: a check that waited for the
            // row would fail after it.
            insert_end_insert::<Postgres>(tx, notes, "COMMIT; SET lock_timeout = '300ms'").await
        })
        .await;
        other.rollback().await.unwrap();
        assert_transaction_ended(answer, &format!("{protocol:?}"));
        guard.release().await.unwrap();
    }
    fixture.drop_tables().await;
}

/// On MariaDB a statement can end the transaction inside the work without an error the work
/// sees: `TRUNCATE` (as any data definition) commits it first, and the writes after it commit
/// on their own. The fenced transaction must not answer that it committed under the lease (nor
/// that nothing committed): it answers `OutcomeUnknown`, whose source says why, wherever the
/// check goes, and the lease is not lost by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_work_that_ended_its_transaction_is_not_told_it_committed() {
    use lease_sqlx::sqlx::{self, AssertSqlSafe};
    use lease_sqlx::{CheckAt, LeaseClient, MySqlLeaseStore, runtime::TokioRuntime};

    let pool = match sqlx::MySqlPool::connect(&env::mysql_url()).await {
        Ok(pool) => pool,
        Err(error) => return env::skip_or_fail("mariadb", &error.to_string()),
    };
    let table = env::unique_table("ended");
    let store = MySqlLeaseStore::with_table(pool.clone(), &table).unwrap();
    store.setup().await.unwrap();
    let (notes, scratch) = (format!("{table}_notes"), format!("{table}_scratch"));
    sqlx::raw_sql(AssertSqlSafe(format!(
        "CREATE TABLE {notes} (v int); CREATE TABLE {scratch} (v int)"
    )))
    .execute(&pool)
    .await
    .unwrap();
    let client = LeaseClient::new(store.clone(), TokioRuntime);
    let guard = client.try_acquire("notes").await.unwrap().expect("free");
    for at in [CheckAt::Begin, CheckAt::Commit] {
        // `TRUNCATE` commits the transaction first.
        let truncate = format!("TRUNCATE TABLE {scratch}");
        let answer = lease_sqlx::fenced_with(&store, &guard, at, async |tx| {
            insert_end_insert::<MySql>(tx, &notes, &truncate).await
        })
        .await;
        assert_transaction_ended(answer, &format!("{at:?}"));
        assert!(
            guard.is_held(),
            "{at:?}: the ended transaction cost the lease"
        );
        // The same with the lease lost while the work ran, after `TRUNCATE`.
        let lost = client
            .try_acquire(format!("lost-{at:?}"))
            .await
            .unwrap()
            .expect("free");
        let answer = lease_sqlx::fenced_with(&store, &lost, at, async |tx| {
            insert_end_insert::<MySql>(tx, &notes, &truncate).await?;
            let _ = lost.mark_not_held();
            Ok::<_, lease_core::BoxError>(())
        })
        .await;
        assert_transaction_ended(answer, &format!("{at:?}, then the lease lost"));
        drop(lost);
    }
    guard.release().await.unwrap();
    sqlx::raw_sql(AssertSqlSafe(format!(
        "DROP TABLE {notes}; DROP TABLE {scratch}; DROP TABLE {table}"
    )))
    .execute(&pool)
    .await
    .unwrap();
}

/// On MariaDB `LOCK TABLES` commits the transaction first, and its table locks outlive it: no
/// rollback releases them. The connection of fenced work that took them is closed, not given
/// back to the pool (of one connection here), where the store's next statement on it would
/// fail ("was not locked with LOCK TABLES") and other sessions would wait for the table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_work_that_locked_tables_leaves_no_lock_on_the_pool() {
    use lease_sqlx::sqlx::mysql::MySqlPoolOptions;
    use lease_sqlx::sqlx::{self, AssertSqlSafe};
    use lease_sqlx::{CheckAt, LeaseClient, MySqlLeaseStore, runtime::TokioRuntime};

    let connected = MySqlPoolOptions::new()
        .max_connections(1)
        .connect(&env::mysql_url())
        .await;
    let pool = match connected {
        Ok(pool) => pool,
        Err(error) => return env::skip_or_fail("mariadb", &error.to_string()),
    };
    let table = env::unique_table("locked");
    let store = MySqlLeaseStore::with_table(pool.clone(), &table).unwrap();
    store.setup().await.unwrap();
    let notes = format!("{table}_notes");
    sqlx::raw_sql(AssertSqlSafe(format!("CREATE TABLE {notes} (v int)")))
        .execute(&pool)
        .await
        .unwrap();
    let client = LeaseClient::new(store.clone(), TokioRuntime);
    let guard = client.try_acquire("notes").await.unwrap().expect("free");
    for at in [CheckAt::Begin, CheckAt::Commit] {
        let answer = lease_sqlx::fenced_with(&store, &guard, at, async |tx| {
            for statement in [
                format!("LOCK TABLES {notes} WRITE"),
                format!("INSERT INTO {notes} VALUES (1)"),
            ] {
                sqlx::raw_sql(AssertSqlSafe(statement))
                    .execute(&mut *tx)
                    .await?;
            }
            Ok::<_, lease_core::BoxError>(())
        })
        .await;
        assert_transaction_ended(answer, &format!("{at:?}"));
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            lease_core::LeaseStore::inspect(&store, guard.name()),
        )
        .await
        .unwrap_or_else(|_| panic!("{at:?}: the store's next statement did not answer"));
        assert!(
            matches!(&read, Ok(Some(info)) if info.holder == *guard.holder()),
            "{at:?}: the store's next statement, on the pool's one connection: {read:?}"
        );
    }
    guard.release().await.unwrap();
    sqlx::raw_sql(AssertSqlSafe(format!(
        "DROP TABLE {notes}; DROP TABLE {table}"
    )))
    .execute(&pool)
    .await
    .unwrap();
}

/// SQLite may roll a transaction back by itself on a full disk, an I/O error or a busy database,
/// and work that goes on after that writes on its own (here a `ROLLBACK` of the work's own
/// stands in for it). The fenced transaction's `COMMIT` then finds no transaction: it answers
/// `OutcomeUnknown` (`TransactionEnded`), not that nothing was committed; and its connection
/// goes back to the pool, not closed (an in-memory database lives only as long as its
/// connections), also when the work then fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_work_whose_transaction_ended_is_not_told_nothing_committed() {
    use lease_core::BoxError;
    use lease_sqlx::sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
    use lease_sqlx::sqlx::{self, AssertSqlSafe};
    use lease_sqlx::{LeaseClient, SqliteLeaseStore, runtime::TokioRuntime};

    let file = std::env::temp_dir().join(format!("{}.db", env::unique_table("ended")));
    let options = SqliteConnectOptions::new()
        .filename(&file)
        .create_if_missing(true);
    // One connection: the statements after the fenced transaction run on the connection it
    // gave back, unless it was closed.
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(lease_sqlx::sqlite_connect_options(options))
        .await
        .unwrap();
    let store = SqliteLeaseStore::new(pool.clone());
    store.setup().await.unwrap();
    // A temporary table lives only on the connection that made it: the pool's one connection.
    sqlx::raw_sql("CREATE TABLE notes (v int); CREATE TEMP TABLE kept (v int)")
        .execute(&pool)
        .await
        .unwrap();
    let client = LeaseClient::new(store.clone(), TokioRuntime);
    let guard = client.try_acquire("notes").await.unwrap().expect("free");
    let answer = lease_sqlx::fenced(&store, &guard, async |tx| {
        sqlx::raw_sql("INSERT INTO notes VALUES (1); ROLLBACK")
            .execute(&mut *tx)
            .await?;
        sqlx::query(AssertSqlSafe("INSERT INTO notes VALUES (2)".to_owned()))
            .execute(&mut *tx)
            .await?;
        Ok::<_, BoxError>(())
    })
    .await;
    assert_transaction_ended(answer, "fenced");
    assert!(guard.is_held(), "the ended transaction cost the lease");
    assert_no_transaction_left(&pool, "after `fenced`").await;
    assert_connection_kept(&pool, "after `fenced`").await;

    // The same through the caller's own transaction and `commit_fenced`.
    let mut tx = pool.begin().await.unwrap();
    store.fence(&mut *tx, &guard).await.unwrap();
    sqlx::raw_sql("INSERT INTO notes VALUES (4); ROLLBACK")
        .execute(&mut *tx)
        .await
        .unwrap();
    let answer = lease_sqlx::commit_fenced(&store, tx, &guard)
        .await
        .map_err(BoxError::from);
    assert_transaction_ended(answer, "commit_fenced");
    assert!(guard.is_held(), "the ended transaction cost the lease");
    assert_no_transaction_left(&pool, "after `commit_fenced`").await;
    assert_connection_kept(&pool, "after `commit_fenced`").await;
    guard.release().await.unwrap();

    // The lease lost while the work ran, after its transaction ended: the later write committed
    // all the same, so the answer is still not "nothing committed".
    let lost = client.try_acquire("lost").await.unwrap().expect("free");
    let answer = lease_sqlx::fenced(&store, &lost, async |tx| {
        sqlx::raw_sql("INSERT INTO notes VALUES (5); ROLLBACK")
            .execute(&mut *tx)
            .await?;
        sqlx::query(AssertSqlSafe("INSERT INTO notes VALUES (6)".to_owned()))
            .execute(&mut *tx)
            .await?;
        let _ = lost.mark_not_held();
        Ok::<_, BoxError>(())
    })
    .await;
    assert_transaction_ended(answer, "fenced, then the lease lost");
    assert_no_transaction_left(&pool, "after `fenced` whose lease was lost").await;
    assert_connection_kept(&pool, "after `fenced` whose lease was lost").await;
    // And the lease taken over while the work ran: the check at the commit, which ran on its
    // own, finds it gone.
    let taken = client.try_acquire("taken").await.unwrap().expect("free");
    let mut tx = pool.begin().await.unwrap();
    store.fence(&mut *tx, &taken).await.unwrap();
    // Another holder takes the lease on the pool's one connection, once the transaction ended.
    sqlx::raw_sql(
        "INSERT INTO notes VALUES (7); ROLLBACK; INSERT INTO notes VALUES (8); \
         UPDATE leases SET holder = 'another', fence = fence + 1 WHERE name = 'taken'",
    )
    .execute(&mut *tx)
    .await
    .unwrap();
    let answer = lease_sqlx::commit_fenced(&store, tx, &taken)
        .await
        .map_err(BoxError::from);
    assert_transaction_ended(answer, "commit_fenced after the lease was taken");
    assert_no_transaction_left(&pool, "after `commit_fenced` whose lease was taken").await;
    assert_connection_kept(&pool, "after `commit_fenced` whose lease was taken").await;
    let written: i64 = sqlx::query_scalar("SELECT count(*) FROM notes WHERE v IN (6, 8)")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(written, 2, "the writes after the ended transactions");

    // Work whose transaction ended, and which then fails: its own error, and its connection
    // back in the pool, though sqlx's `ROLLBACK` of the transaction would find none to end.
    let failing = client.try_acquire("failing").await.unwrap().expect("free");
    let answer = lease_sqlx::fenced(&store, &failing, async |tx| {
        sqlx::raw_sql("ROLLBACK").execute(&mut *tx).await?;
        Err::<(), BoxError>("the work failed".into())
    })
    .await;
    assert_eq!(
        answer.map_err(|e| e.to_string()),
        Err("the work failed".to_owned())
    );
    assert!(failing.is_held(), "the failed work cost the lease");
    assert_no_transaction_left(&pool, "after failed work whose transaction ended").await;
    assert_connection_kept(&pool, "after failed work whose transaction ended").await;
    // And work that fails inside its transaction: its writes rolled back, its connection kept.
    let answer = lease_sqlx::fenced(&store, &failing, async |tx| {
        sqlx::raw_sql("INSERT INTO notes VALUES (9)")
            .execute(&mut *tx)
            .await?;
        Err::<(), BoxError>("the work failed".into())
    })
    .await;
    assert_eq!(
        answer.map_err(|e| e.to_string()),
        Err("the work failed".to_owned())
    );
    let kept: i64 = sqlx::query_scalar("SELECT count(*) FROM notes WHERE v = 9")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(kept, 0, "the failed work's write was kept");
    assert_no_transaction_left(&pool, "after failed work").await;
    assert_connection_kept(&pool, "after failed work").await;
    pool.close().await;
    let _ = std::fs::remove_file(&file);
}

/// Asserts that the one connection of `pool` is still the one that made its temporary table
/// `kept`: not closed and replaced by a new one.
async fn assert_connection_kept(pool: &lease_sqlx::sqlx::SqlitePool, context: &str) {
    let kept = lease_sqlx::sqlx::query_scalar::<_, i64>("SELECT count(*) FROM temp.kept")
        .fetch_one(pool)
        .await;
    assert!(
        kept.is_ok(),
        "{context}: the pool's connection was closed: {kept:?}"
    );
}

/// Asserts that the connections of `pool` (of one connection) are outside any transaction, as
/// sqlx counts them and as SQLite does: a transaction begun and rolled back on it leaves nothing
/// open and nothing written (counted one transaction too many, sqlx would begin it with a
/// savepoint, whose rollback ends nothing), and a `BEGIN` it does not see starts one.
async fn assert_no_transaction_left(pool: &lease_sqlx::sqlx::SqlitePool, context: &str) {
    use lease_sqlx::sqlx::{self, Connection};

    let mut tx = pool.begin().await.unwrap();
    sqlx::raw_sql("INSERT INTO notes VALUES (3)")
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    let mut connection = pool.acquire().await.unwrap();
    assert!(
        !connection.is_in_transaction(),
        "{context}: sqlx counts a transaction on the connection given back"
    );
    sqlx::raw_sql("BEGIN")
        .execute(&mut *connection)
        .await
        .unwrap_or_else(|e| panic!("{context}: a transaction is still open: {e}"));
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut *connection)
        .await
        .unwrap();
    drop(connection);
    let rolled_back: i64 = sqlx::query_scalar("SELECT count(*) FROM notes WHERE v = 3")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(rolled_back, 0, "{context}: a rolled back insert stayed");
}

/// A deadlock ends MariaDB's transaction too: the victim's transaction is rolled back and no
/// transaction is open after it, so work that catches the error and goes on writes on its own.
/// The fenced transaction answers `OutcomeUnknown` (`TransactionEnded`) for it as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_work_that_went_on_after_a_deadlock_is_not_told_it_committed() {
    use lease_core::BoxError;
    use lease_sqlx::sqlx::{self, AssertSqlSafe};
    use lease_sqlx::{CheckAt, LeaseClient, MySqlLeaseStore, runtime::TokioRuntime};

    let pool = match sqlx::MySqlPool::connect(&env::mysql_url()).await {
        Ok(pool) => pool,
        Err(error) => return env::skip_or_fail("mariadb", &error.to_string()),
    };
    let table = env::unique_table("deadlock");
    let store = MySqlLeaseStore::with_table(pool.clone(), &table).unwrap();
    store.setup().await.unwrap();
    let (rows, heavy, notes) = (
        format!("{table}_rows"),
        format!("{table}_heavy"),
        format!("{table}_notes"),
    );
    sqlx::raw_sql(AssertSqlSafe(format!(
        "CREATE TABLE {rows} (id int PRIMARY KEY, v int) ENGINE = InnoDB;
         INSERT INTO {rows} VALUES (1, 0), (2, 0);
         CREATE TABLE {heavy} (v int) ENGINE = InnoDB;
         CREATE TABLE {notes} (v int) ENGINE = InnoDB"
    )))
    .execute(&pool)
    .await
    .unwrap();
    let client = LeaseClient::new(store.clone(), TokioRuntime);
    let guard = client.try_acquire("notes").await.unwrap().expect("free");
    let mut deadlocked = None;
    let answer = lease_sqlx::fenced_with(&store, &guard, CheckAt::Commit, async |tx| {
        sqlx::query(AssertSqlSafe(format!(
            "UPDATE {rows} SET v = 1 WHERE id = 1"
        )))
        .execute(&mut *tx)
        .await?;
        // Another transaction, heavier (so that InnoDB picks this one as the victim), takes
        // row 2 and waits for row 1, which this one holds.
        let (holding, held) = tokio::sync::oneshot::channel();
        let (other_pool, other_heavy, other_rows) = (pool.clone(), heavy.clone(), rows.clone());
        let other = tokio::spawn(async move {
            let mut other = other_pool.acquire().await.unwrap();
            sqlx::raw_sql(AssertSqlSafe(format!(
                "BEGIN; INSERT INTO {other_heavy} SELECT seq FROM seq_1_to_200;
                 UPDATE {other_rows} SET v = 9 WHERE id = 2"
            )))
            .execute(&mut *other)
            .await
            .unwrap();
            let _ = holding.send(());
            let waited = sqlx::query(AssertSqlSafe(format!(
                "UPDATE {other_rows} SET v = 9 WHERE id = 1"
            )))
            .execute(&mut *other)
            .await;
            let _ = sqlx::raw_sql("ROLLBACK").execute(&mut *other).await;
            waited.map(drop)
        });
        held.await.unwrap();
        // Row 2: a deadlock, whichever of the two asks last (InnoDB rolls back the lighter
        // transaction, this one), so nothing waits for the other's request. Caught, and gone
        // on from.
        let refused = sqlx::query(AssertSqlSafe(format!(
            "UPDATE {rows} SET v = 1 WHERE id = 2"
        )))
        .execute(&mut *tx)
        .await;
        deadlocked = refused.err().and_then(|e| {
            e.as_database_error()
                .and_then(|e| e.code().map(|c| c.into_owned()))
        });
        other.await.unwrap()?;
        sqlx::query(AssertSqlSafe(format!("INSERT INTO {notes} VALUES (1)")))
            .execute(&mut *tx)
            .await?;
        Ok::<_, BoxError>(())
    })
    .await;
    assert_eq!(
        deadlocked.as_deref(),
        Some("40001"),
        "the work's transaction was not the deadlock's victim: the case shows nothing"
    );
    assert_transaction_ended(answer, "");
    assert!(guard.is_held(), "the ended transaction cost the lease");
    guard.release().await.unwrap();
    sqlx::raw_sql(AssertSqlSafe(format!(
        "DROP TABLE {rows}; DROP TABLE {heavy}; DROP TABLE {notes}; DROP TABLE {table}"
    )))
    .execute(&pool)
    .await
    .unwrap();
}

/// Fenced work that inserts into `notes`, ends its transaction with `ending` (so the next insert
/// commits on its own), and inserts again.
async fn insert_end_insert<DB>(
    tx: &mut DB::Connection,
    notes: &str,
    ending: &str,
) -> Result<(), lease_core::BoxError>
where
    DB: lease_sqlx::sqlx::Database,
    for<'e> &'e mut DB::Connection: lease_sqlx::sqlx::Executor<'e, Database = DB>,
{
    use lease_sqlx::sqlx::{self, AssertSqlSafe};

    for statement in [
        format!("INSERT INTO {notes} VALUES (1)"),
        ending.to_owned(),
        format!("INSERT INTO {notes} VALUES (2)"),
    ] {
        sqlx::raw_sql(AssertSqlSafe(statement))
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

/// A PostgreSQL pool, a store on a lease table of its own and a table of notes (one `int`
/// column) for fenced work to write to.
struct PgNotes {
    pool: lease_sqlx::sqlx::PgPool,
    store: lease_sqlx::PgLeaseStore,
    table: String,
    notes: String,
}

impl PgNotes {
    /// Makes both tables, named after `prefix`; `None`, after saying so (or failing where every
    /// backend must run), when the server cannot be reached.
    async fn new(prefix: &str) -> Option<Self> {
        use lease_sqlx::sqlx::{self, AssertSqlSafe};

        let pool = match sqlx::PgPool::connect(&env::postgres_url()).await {
            Ok(pool) => pool,
            Err(error) => {
                env::skip_or_fail("postgres", &error.to_string());
                return None;
            }
        };
        let table = env::unique_table(prefix);
        let store = lease_sqlx::PgLeaseStore::with_table(pool.clone(), &table).unwrap();
        store.setup().await.unwrap();
        let notes = format!("{table}_notes");
        sqlx::raw_sql(AssertSqlSafe(format!("CREATE TABLE {notes} (v int)")))
            .execute(&pool)
            .await
            .unwrap();
        Some(Self {
            pool,
            store,
            table,
            notes,
        })
    }

    /// Drops both tables.
    async fn drop_tables(self) {
        use lease_sqlx::sqlx::{self, AssertSqlSafe};

        let Self {
            pool, table, notes, ..
        } = self;
        sqlx::raw_sql(AssertSqlSafe(format!(
            "DROP TABLE {notes}; DROP TABLE {table}"
        )))
        .execute(&pool)
        .await
        .unwrap();
    }
}

/// Asserts that `answer` is the store's `OutcomeUnknown` whose source is `TransactionEnded`: the
/// work ended its transaction, and some of its writes committed on their own.
fn assert_transaction_ended<T: std::fmt::Debug>(
    answer: Result<T, lease_core::BoxError>,
    context: &str,
) {
    let error = answer.expect_err(&format!(
        "{context}: told that writes committed under the lease"
    ));
    let error = error
        .downcast_ref::<lease_sqlx::Error>()
        .unwrap_or_else(|| panic!("{context}: not the store's error: {error}"));
    assert_eq!(
        error.store_error_kind(),
        Some(lease_core::StoreErrorKind::OutcomeUnknown),
        "{context}: {error}"
    );
    let source = std::error::Error::source(error);
    assert!(
        source.is_some_and(|source| source.is::<lease_sqlx::TransactionEnded>()),
        "{context}: {error} ({source:?})"
    );
}
