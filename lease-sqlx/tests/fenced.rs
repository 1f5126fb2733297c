//! The fenced check inside the caller's own transaction, on every database: the holder's fenced
//! write commits; a stale holder's fails and commits nothing; an expired lease fails the check;
//! the guard learns of the loss at once; a takeover waits for an open fenced transaction and
//! then gets a greater fence. Each case also runs the same steps without the check (the negative
//! control), which lets the stale write through.

use std::str::FromStr;
use std::time::{Duration, Instant};

use lease_core::runtime::TokioRuntime;
use lease_core::{Error, LeaseClient, LeaseGuard, LossReason, Ttl};
use lease_sqlx::sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use lease_sqlx::sqlx::{self, AssertSqlSafe, Executor, IntoArguments, Pool};
use lease_sqlx::{Execute, ExecuteOn, SqlxDatabase, SqlxExecutor, SqlxStore};
use lease_tests::env;

/// A store on a fresh table and a protected table of its own, and a client on it.
struct Fixture<DB: SqlxDatabase> {
    store: SqlxStore<DB>,
    protected: String,
}

impl<DB> Fixture<DB>
where
    DB: SqlxDatabase,
    SqlxExecutor<DB>: Execute + for<'c> ExecuteOn<&'c mut DB::Connection>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    (i64,): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    async fn new(pool: Pool<DB>) -> Self {
        let table = env::unique_table("lease_sqlx_fenced");
        let store = SqlxStore::with_table(pool, &table).unwrap();
        store.setup().await.unwrap();
        let protected = format!("{table}_notices");
        self_execute(
            &store,
            &format!("CREATE TABLE {protected} (fence BIGINT NOT NULL)"),
        )
        .await;
        Self { store, protected }
    }

    fn client(&self, ttl: Duration) -> LeaseClient {
        LeaseClient::builder(self.store.clone(), TokioRuntime)
            .ttl(Ttl::new(ttl).unwrap())
            .renew_every(ttl / 4)
            .store_timeout(ttl / 5)
            .build()
            .unwrap()
    }

    /// Writes the guard's fence into the protected table in a transaction that begins with the
    /// fenced check, when `checked`; otherwise the same write without the check.
    async fn write(&self, guard: &LeaseGuard, checked: bool) -> Result<(), Error> {
        let pool = self.store.executor().pool();
        let mut tx = pool.begin().await.unwrap();
        if checked {
            self.store.fence(&mut *tx, guard).await?;
        }
        let insert = format!(
            "INSERT INTO {} (fence) VALUES ({})",
            self.protected,
            guard.fence()
        );
        sqlx::raw_sql(AssertSqlSafe(insert))
            .execute(&mut *tx)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        Ok(())
    }

    /// The fences written, in the order they were committed.
    async fn written(&self) -> Vec<i64> {
        let select = format!("SELECT fence FROM {}", self.protected);
        let rows: Vec<(i64,)> = sqlx::query_as(AssertSqlSafe(select))
            .fetch_all(self.store.executor().pool())
            .await
            .unwrap();
        rows.into_iter().map(|(fence,)| fence).collect()
    }

    /// Makes the lease expire now, by the database's clock, as a paused holder's would.
    async fn expire(&self, guard: &LeaseGuard) {
        let sql = format!(
            "UPDATE {} SET expires_at = taken_at WHERE fence = {}",
            self.store.statements().table(),
            guard.fence()
        );
        self_execute(&self.store, &sql).await;
    }
}

async fn self_execute<DB: SqlxDatabase>(store: &SqlxStore<DB>, sql: &str)
where
    SqlxExecutor<DB>: Execute,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
        .execute(store.executor().pool())
        .await
        .unwrap();
}

/// Every case on one database.
async fn cases<DB>(pool: Pool<DB>)
where
    DB: SqlxDatabase,
    SqlxExecutor<DB>: Execute + for<'c> ExecuteOn<&'c mut DB::Connection>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    (i64,): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    let fixture = Fixture::new(pool).await;
    let client = fixture.client(Duration::from_secs(60));
    let other = fixture.client(Duration::from_secs(60));

    // The holder's fenced write commits.
    let first = client.try_acquire("notify").await.unwrap().unwrap();
    fixture.write(&first, true).await.unwrap();
    assert_eq!(fixture.written().await, [first.fence().get() as i64]);

    // Expired but not yet taken over: the check fails, the guard learns at once.
    fixture.expire(&first).await;
    assert!(first.is_held(), "locally the holder does not know yet");
    let refused = fixture.write(&first, true).await.unwrap_err();
    assert!(
        matches!(refused, Error::NotHeld { fence, .. } if fence == first.fence()),
        "{refused}"
    );
    assert!(!first.is_held());
    assert_eq!(first.lost().await, LossReason::NotHeld);

    // After a takeover the stale holder's fenced write fails and commits nothing...
    let second = other.try_acquire("notify").await.unwrap().unwrap();
    assert!(second.fence() > first.fence());
    assert!(fixture.write(&first, true).await.is_err());
    assert_eq!(fixture.written().await, [first.fence().get() as i64]);
    // ...while the same write without the check (the negative control) goes through.
    fixture.write(&first, false).await.unwrap();
    assert_eq!(
        fixture.written().await.len(),
        2,
        "the unchecked stale write committed"
    );
    let _ = first.release().await;
    second.release().await.unwrap();

    // A takeover attempted while a fenced transaction is open waits for it, then gets a
    // greater fence: the holder's write commits before the new holder's first statement.
    let short = fixture.client(Duration::from_millis(1_500));
    // A wait rather than one try: it rides out a statement a loaded machine makes outlast the
    // short lease's store timeout.
    let holder = short
        .acquire("sweep", Duration::from_secs(10))
        .await
        .unwrap();
    let pool = fixture.store.executor().pool().clone();
    let mut tx = pool.begin().await.unwrap();
    fixture.store.fence(&mut *tx, &holder).await.unwrap();
    let contender = fixture.client(Duration::from_secs(60));
    let taking = tokio::spawn(async move {
        let guard = contender
            .acquire("sweep", Duration::from_secs(20))
            .await
            .unwrap();
        (Instant::now(), guard.fence())
    });
    // Past the lease's TTL by the database's clock, with the row still locked.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert!(
        !taking.is_finished(),
        "the takeover did not wait for the transaction"
    );
    let insert = format!(
        "INSERT INTO {} (fence) VALUES ({})",
        fixture.protected,
        holder.fence()
    );
    sqlx::raw_sql(AssertSqlSafe(insert))
        .execute(&mut *tx)
        .await
        .unwrap();
    // Taken before the commit is sent: the server may answer the waiting takeover before the
    // commit's own answer reaches this task.
    let committing = Instant::now();
    tx.commit().await.unwrap();
    let (taken, fence) = tokio::time::timeout(Duration::from_secs(20), taking)
        .await
        .expect("the takeover went on after the commit")
        .unwrap();
    assert!(taken >= committing);
    assert!(fence > holder.fence());
    assert!(
        fixture
            .written()
            .await
            .contains(&(holder.fence().get() as i64))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    let pool = match sqlx::PgPool::connect(&env::postgres_url()).await {
        Ok(pool) => pool,
        Err(e) => return env::skip_or_fail("postgres", &e.to_string()),
    };
    cases::<sqlx::Postgres>(pool).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb() {
    let pool = match sqlx::MySqlPool::connect(&env::mysql_url()).await {
        Ok(pool) => pool,
        Err(e) => return env::skip_or_fail("mariadb", &e.to_string()),
    };
    cases::<sqlx::MySql>(pool).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite() {
    let dir = std::env::temp_dir().join(env::unique_table("lease_sqlx_fenced"));
    std::fs::create_dir_all(&dir).unwrap();
    let options = SqliteConnectOptions::from_str("sqlite://fenced.db?mode=rwc")
        .unwrap()
        .filename(dir.join("fenced.db"));
    let pool = SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(lease_sqlx::sqlite_connect_options(options))
        .await
        .unwrap();
    cases::<sqlx::Sqlite>(pool).await;
    let _ = std::fs::remove_dir_all(dir);
}
