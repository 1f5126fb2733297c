//! Each message that ends a fenced transaction holds as many statements as its
//! `CommitMessage` says, as sqlx counts them on each database: what tells a failure after the
//! `COMMIT` (of the `BEGIN` that follows it) from one before it. A statement that fails is sent
//! after the message, and the driver must count every statement of the message complete.
#![cfg(all(feature = "postgres", feature = "mysql", feature = "sqlite"))]

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::TestDb;
use lease_core::runtime::TokioRuntime;
use lease_core::{LeaseGuard, LeaseHandle};
use lease_sqlx::sqlx::{self, AssertSqlSafe, MySql, Postgres, Sqlite};
use lease_sqlx::{CommitMessage, ExecuteOn, LeaseClient, SqlxDatabase, SqlxExecutor, SqlxStore};
use lease_tests::env;

/// How many of `message`'s statements, and of a failing one sent after it in the same message
/// inside a transaction, the driver counts complete.
async fn completed_before_a_failure<DB>(store: &SqlxStore<DB>, message: &str) -> Option<usize>
where
    DB: SqlxDatabase,
    SqlxExecutor<DB>: for<'c> ExecuteOn<&'c mut DB::Connection>,
{
    let mut transaction = store.executor().pool().begin().await.unwrap();
    let failed = store
        .executor()
        .batch_counted_on(
            &mut *transaction,
            format!("{message};\nSELECT missing FROM lease_no_such_table"),
        )
        .await
        .expect_err("the statement after the message fails");
    assert!(
        failed.error.to_string().contains("lease_no_such_table"),
        "the message failed before the statement after it: {}",
        failed.error
    );
    failed.completed
}

/// Asserts that the driver counts each of `message`'s statements.
async fn counts<DB>(store: &SqlxStore<DB>, what: &str, message: &CommitMessage)
where
    DB: SqlxDatabase,
    SqlxExecutor<DB>: for<'c> ExecuteOn<&'c mut DB::Connection>,
{
    assert_eq!(
        completed_before_a_failure(store, message.sql()).await,
        Some(message.statements()),
        "{:?}: {what}, {:?}",
        DB::DIALECT,
        message.sql()
    );
}

/// A store on a table of its own through a pool of one connection, and a lease it holds.
struct Held<DB: SqlxDatabase> {
    store: SqlxStore<DB>,
    client: LeaseClient,
    guard: LeaseGuard,
    table: String,
    file: Option<PathBuf>,
}

impl<DB: TestDb> Held<DB>
where
    SqlxExecutor<DB>: lease_sqlx::Execute,
{
    async fn new() -> Self {
        let (pool, file) = DB::connect(1).await.unwrap();
        let table = env::unique_table("lease_sqlx_commit_statements");
        let store = SqlxStore::with_table(pool, &table).unwrap();
        DB::setup(&store).await.unwrap();
        let client = LeaseClient::new(store.clone(), TokioRuntime);
        let guard = client.try_acquire("counted").await.unwrap().unwrap();
        Self {
            store,
            client,
            guard,
            table,
            file,
        }
    }

    /// Lets go of the lease, drops the table and removes SQLite's files.
    async fn clean_up(self) {
        drop(self.guard);
        self.client.shutdown(Duration::from_secs(5)).await;
        let pool = self.store.executor().pool().clone();
        DB::execute(&pool, format!("DROP TABLE {}", self.table))
            .await
            .unwrap();
        pool.close().await;
        common::remove_files(self.file.as_deref()).unwrap();
    }
}

/// The check with the commit as text, and the commit after a check at the start.
async fn text_messages<DB: TestDb>(store: &SqlxStore<DB>, lease: &LeaseHandle)
where
    SqlxExecutor<DB>: lease_sqlx::Execute + for<'c> ExecuteOn<&'c mut DB::Connection>,
{
    let statements = store.statements();
    let checked = statements
        .fence_then_commit(lease.name(), lease.holder(), lease.fence())
        .expect("the dialect checks at the commit")
        .unwrap();
    counts(store, "the check with the commit", &checked).await;
    let after_check = statements
        .commit_after_check()
        .expect("the dialect has a commit after the check");
    counts(store, "the commit after a check", after_check).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    let held = Held::<Postgres>::new().await;
    let (store, lease): (_, &LeaseHandle) = (&held.store, held.guard.as_ref());
    text_messages(store, lease).await;

    let prepared = store
        .prepared_fence()
        .expect("statements prepared on the connection");
    let mut connection = store.executor().pool().acquire().await.unwrap();
    for statement in prepared.prepare() {
        sqlx::raw_sql(AssertSqlSafe(statement.clone()))
            .execute(&mut *connection)
            .await
            .unwrap();
    }
    drop(connection);
    let checked = store
        .statements()
        .prepared_fence_then_commit(lease.name(), lease.holder(), lease.fence())
        .unwrap()
        .unwrap();
    counts(store, "the prepared check with the commit", &checked).await;
    counts(
        store,
        "the commit after the prepared check",
        prepared.commit_after_check(),
    )
    .await;
    held.clean_up().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb() {
    let held = Held::<MySql>::new().await;
    text_messages(&held.store, held.guard.as_ref()).await;
    held.clean_up().await;
}

/// SQLite checks at the start and commits with a bare `COMMIT`, one statement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite() {
    let held = Held::<Sqlite>::new().await;
    assert!(held.store.statements().commit_after_check().is_none());
    assert_eq!(
        completed_before_a_failure(&held.store, "COMMIT").await,
        Some(1)
    );
    held.clean_up().await;
}
