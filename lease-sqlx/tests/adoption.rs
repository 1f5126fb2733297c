//! Adopting an existing table through sqlx, on SQLite (always), the local PostgreSQL and
//! MariaDB: the story's table with a live lease is refused by `setup` and `verify` with the SQL
//! that upgrades it, and `upgrade` keeps its live lease; rows with an older version's counter
//! fences need no migration and are overtaken by the next fences; a table of another kind is
//! refused without SQL; `verify` without a table names the DDL; MariaDB's port of the story's
//! table (`TEXT` holder, `TIMESTAMP` times) is upgraded in UTC; a name or holder declared too
//! short is widened; an upgrade gives up on a table another transaction holds rather than wait
//! for it; SQLite times in seconds are made milliseconds (`lease_tests::adoption`); a MariaDB
//! table that cannot grow answers a transient failure (`lease_tests::classified`).
//!
//! And here: upgrades run by two instances at once converge, the later one's SQL, made from the
//! shape before the earlier one's, resetting no fence; the printed upgrade runs as a sqlx
//! migration (inside sqlx's transaction); MariaDB's `latin1` names and holders are the same
//! leases after the upgrade; SQLite's rowid column is filled by SQLite; MariaDB and SQLite
//! match column names regardless of case.
#![cfg(all(feature = "postgres", feature = "mysql", feature = "sqlite"))]

mod common;

use std::sync::Mutex;

use common::TestDb;
use lease_core::runtime::TokioRuntime;
use lease_core::{BoxError, Error, Fence, HolderId, LeaseName, LeaseStore, StoreErrorKind, Ttl};
use lease_sql::{Dialect, Execute, LeaseRow, PoolState, Query, SqlStore};
use lease_sqlx::sqlx::migrate::{Migrate, Migrator};
use lease_sqlx::sqlx::{MySql, Postgres, Sqlite};
use lease_sqlx::{SqlxExecutor, SqlxStore};
use lease_tests::{adoption, classified, env};

/// Runs `case` on a store of a fresh table of `DB`, then drops the table.
async fn on_fresh_table<DB, F>(case: F)
where
    DB: TestDb,
    SqlxExecutor<DB>: lease_sqlx::Execute,
    F: AsyncFnOnce(&SqlxStore<DB>, &str) -> Result<(), BoxError>,
{
    let (pool, file) = match DB::connect(2).await {
        Ok(connected) => connected,
        Err(error) => return env::skip_or_fail(DB::LABEL, &error.to_string()),
    };
    let table = env::unique_table("adoption");
    let store = SqlxStore::<DB>::with_table(pool.clone(), &table).unwrap();
    let outcome = case(&store, &table).await;
    DB::execute(&pool, format!("DROP TABLE IF EXISTS {table}"))
        .await
        .unwrap();
    pool.close().await;
    common::remove_files(file.as_deref()).unwrap();
    if let Err(error) = outcome {
        panic!("{}: {error}", DB::LABEL);
    }
}

macro_rules! adoption_cases {
    ($($db:ident: $ty:ty),*) => {$(
        mod $db {
            use super::*;

            #[tokio::test]
            async fn story_table_is_refused_then_upgraded() {
                on_fresh_table::<$ty, _>(adoption::story_table_is_refused_then_upgraded).await;
            }

            #[tokio::test]
            async fn failed_upgrade_leaves_no_transaction_open() {
                on_fresh_table::<$ty, _>(adoption::failed_upgrade_leaves_no_transaction_open).await;
            }

            #[tokio::test]
            async fn counter_fences_are_overtaken() {
                on_fresh_table::<$ty, _>(adoption::counter_fences_are_overtaken).await;
            }

            #[tokio::test]
            async fn partial_key_on_name_is_refused() {
                on_fresh_table::<$ty, _>(adoption::partial_key_on_name_is_refused).await;
            }

            #[tokio::test]
            async fn nullable_expiry_is_filled_then_free() {
                on_fresh_table::<$ty, _>(adoption::nullable_expiry_is_filled_then_free).await;
            }

            #[tokio::test]
            async fn short_name_and_holder_are_refused_then_widened() {
                on_fresh_table::<$ty, _>(adoption::short_name_and_holder_are_refused_then_widened).await;
            }

            #[tokio::test]
            async fn unrelated_table_is_refused() {
                on_fresh_table::<$ty, _>(adoption::unrelated_table_is_refused).await;
            }

            #[tokio::test]
            async fn missing_table_is_permanent() {
                on_fresh_table::<$ty, _>(async |store, _| {
                    classified::missing_table_is_permanent(store, TokioRuntime).await
                })
                .await;
            }

            #[tokio::test]
            async fn an_upgrade_made_stale_by_another_finds_the_table_upgraded() {
                on_fresh_table::<$ty, _>(super::an_upgrade_made_stale_by_another_finds_the_table_upgraded).await;
            }

            #[tokio::test]
            async fn simultaneous_upgrades_converge() {
                on_fresh_table::<$ty, _>(adoption::simultaneous_upgrades_converge).await;
            }

            #[tokio::test]
            async fn printed_upgrade_runs_as_a_sqlx_migration() {
                on_fresh_table::<$ty, _>(super::printed_upgrade_runs_as_a_sqlx_migration).await;
            }

            #[tokio::test]
            async fn missing_table_is_refused_by_verify() {
                on_fresh_table::<$ty, _>(async |store, _| {
                    adoption::missing_table_is_refused_by_verify(store).await
                })
                .await;
            }
        }
    )*};
}

adoption_cases!(postgres: Postgres, mariadb: MySql, sqlite: Sqlite);

#[tokio::test]
async fn mariadb_full_table_is_transient() {
    on_fresh_table::<MySql, _>(classified::mariadb_full_table_is_transient).await;
}

#[tokio::test]
async fn mariadb_port_is_refused_then_upgraded_in_utc() {
    on_fresh_table::<MySql, _>(adoption::mariadb_port_is_refused_then_upgraded_in_utc).await;
}

#[tokio::test]
async fn postgres_upgrade_gives_up_on_a_locked_table() {
    on_fresh_table::<Postgres, _>(async |store, table| {
        adoption::upgrade_gives_up_on_a_locked_table(store, table, TokioRuntime).await
    })
    .await;
}

#[tokio::test]
async fn mariadb_upgrade_gives_up_on_a_locked_table() {
    on_fresh_table::<MySql, _>(async |store, table| {
        adoption::upgrade_gives_up_on_a_locked_table(store, table, TokioRuntime).await
    })
    .await;
}

#[tokio::test]
async fn mariadb_upgrade_gives_up_on_a_written_row() {
    on_fresh_table::<MySql, _>(async |store, table| {
        adoption::mariadb_upgrade_gives_up_on_a_written_row(store, table, TokioRuntime).await
    })
    .await;
}

#[tokio::test]
async fn sqlite_times_in_seconds_are_refused_then_converted() {
    on_fresh_table::<Sqlite, _>(adoption::sqlite_times_in_seconds_are_refused_then_converted).await;
}

#[tokio::test]
async fn sqlite_times_finer_than_milliseconds_are_refused() {
    on_fresh_table::<Sqlite, _>(adoption::sqlite_times_finer_than_milliseconds_are_refused).await;
}

#[tokio::test]
async fn sqlite_real_times_are_read() {
    on_fresh_table::<Sqlite, _>(adoption::sqlite_real_times_are_read).await;
}

#[tokio::test]
async fn sqlite_collated_name_is_refused_then_rebuilt() {
    on_fresh_table::<Sqlite, _>(adoption::sqlite_collated_name_is_refused_then_rebuilt).await;
}

#[tokio::test]
async fn mariadb_times_set_on_update_are_refused_then_kept() {
    on_fresh_table::<MySql, _>(adoption::mariadb_times_set_on_update_are_refused_then_kept).await;
}

#[tokio::test]
async fn mariadb_unsigned_fence_is_refused_then_upgraded() {
    on_fresh_table::<MySql, _>(adoption::mariadb_unsigned_fence_is_refused_then_upgraded).await;
}

#[tokio::test]
async fn mariadb_wide_holder_keeps_its_width() {
    on_fresh_table::<MySql, _>(adoption::mariadb_wide_holder_keeps_its_width).await;
}

#[tokio::test]
async fn postgres_nondeterministic_name_is_refused_then_altered() {
    on_fresh_table::<Postgres, _>(adoption::postgres_nondeterministic_name_is_refused_then_altered)
        .await;
}

#[tokio::test]
async fn postgres_coarse_times_are_refused_then_upgraded() {
    on_fresh_table::<Postgres, _>(adoption::postgres_coarse_times_are_refused_then_upgraded).await;
}

#[tokio::test]
async fn postgres_infinite_times_are_read() {
    on_fresh_table::<Postgres, _>(adoption::postgres_infinite_times_are_read).await;
}

#[tokio::test]
async fn postgres_unsafe_storage_is_refused() {
    on_fresh_table::<Postgres, _>(adoption::unsafe_storage_is_refused).await;
}

#[tokio::test]
async fn mariadb_unsafe_storage_is_refused() {
    on_fresh_table::<MySql, _>(adoption::unsafe_storage_is_refused).await;
}

/// `verify` needs no right but the store's own: an account with only `SELECT, INSERT, UPDATE`
/// on the table checks it, where `setup` is refused for want of the right to create.
async fn verify_with_the_stores_rights_only<DB: TestDb>(
    account_url: impl Fn(&str) -> String,
    create_account: impl Fn(&str, &str) -> Vec<String>,
    drop_account: impl Fn(&str, &str) -> Vec<String>,
) where
    SqlxExecutor<DB>: lease_sqlx::Execute,
{
    let (pool, _) = match DB::connect(2).await {
        Ok(connected) => connected,
        Err(error) => return env::skip_or_fail(DB::LABEL, &error.to_string()),
    };
    let table = env::unique_table("adoption");
    let account = env::unique_table("lease_app");
    let owner = SqlxStore::<DB>::with_table(pool.clone(), &table).unwrap();
    owner.setup().await.unwrap();
    for sql in create_account(&account, &table) {
        if let Err(error) = DB::execute(&pool, sql).await {
            for sql in drop_account(&account, &table) {
                let _ = DB::execute(&pool, sql).await;
            }
            DB::execute(&pool, format!("DROP TABLE {table}"))
                .await
                .unwrap();
            return env::skip_or_fail(
                DB::LABEL,
                &format!("the test account cannot make an account of its own: {error}"),
            );
        }
    }
    let outcome = async {
        let app_pool = lease_sqlx::sqlx::pool::PoolOptions::<DB>::new()
            .max_connections(1)
            .connect(&account_url(&account))
            .await?;
        let app = SqlxStore::<DB>::with_table(app_pool.clone(), &table)?;
        let verified = app.verify().await;
        let set_up = app.setup().await;
        app_pool.close().await;
        verified?;
        match set_up {
            Err(lease_core::Error::Store { .. }) => Ok::<(), BoxError>(()),
            other => Err(format!("setup without the right to create answered {other:?}").into()),
        }
    }
    .await;
    for sql in drop_account(&account, &table) {
        DB::execute(&pool, sql).await.unwrap();
    }
    DB::execute(&pool, format!("DROP TABLE {table}"))
        .await
        .unwrap();
    if let Err(error) = outcome {
        panic!("{}: {error}", DB::LABEL);
    }
}

/// `url` with `account` and its password as the user.
fn as_account(url: &str, account: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    format!("{scheme}://{account}:{PASSWORD}@{host}")
}

const PASSWORD: &str = "lease-app-password";

#[tokio::test]
async fn postgres_verify_needs_only_the_stores_rights() {
    let base = env::postgres_url();
    verify_with_the_stores_rights_only::<Postgres>(
        |account| as_account(&base, account),
        |account, table| {
            vec![
                format!("CREATE ROLE {account} LOGIN PASSWORD '{PASSWORD}'"),
                format!("GRANT SELECT, INSERT, UPDATE ON {table} TO {account}"),
            ]
        },
        // The grant is taken back by the table's owner: `DROP OWNED BY` would need membership
        // in the role, which an account with only CREATEROLE (scripts/test's fallback) lacks
        // before PostgreSQL 16.
        |account, table| {
            vec![
                format!("REVOKE ALL ON {table} FROM {account}"),
                format!("DROP ROLE IF EXISTS {account}"),
            ]
        },
    )
    .await;
}

#[tokio::test]
async fn mariadb_verify_needs_only_the_stores_rights() {
    let base = env::mysql_url();
    verify_with_the_stores_rights_only::<MySql>(
        |account| as_account(&base, account),
        |account, table| {
            vec![
                format!("CREATE USER '{account}'@'%' IDENTIFIED BY '{PASSWORD}'"),
                format!("CREATE USER '{account}'@'localhost' IDENTIFIED BY '{PASSWORD}'"),
                format!("GRANT SELECT, INSERT, UPDATE ON {table} TO '{account}'@'%'"),
                format!("GRANT SELECT, INSERT, UPDATE ON {table} TO '{account}'@'localhost'"),
            ]
        },
        |account, _table| {
            vec![
                format!("DROP USER IF EXISTS '{account}'@'%'"),
                format!("DROP USER IF EXISTS '{account}'@'localhost'"),
            ]
        },
    )
    .await;
}

fn name(name: &str) -> LeaseName {
    LeaseName::new(name).expect("a valid name")
}

/// What the earlier instance did before the later one's upgrade ran: its upgrade's answer and
/// the lease its store then took.
type Overtaking = Result<(bool, HolderId, Fence), String>;

/// An executor on a sqlx pool that, before the first script it runs, lets `first` (another
/// instance's store on the same table) upgrade the table and take the lease `fresh`: the
/// script then runs on a table upgraded since the shape it was made from, as when two
/// instances upgrade at once and the database runs one upgrade after the other.
struct Overtaken<DB: TestDb> {
    inner: SqlxExecutor<DB>,
    first: Mutex<Option<SqlxStore<DB>>>,
    overtook: Mutex<Option<Overtaking>>,
}

impl<DB: TestDb> std::fmt::Debug for Overtaken<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Overtaken")
    }
}

impl<DB: TestDb> Overtaken<DB>
where
    SqlxExecutor<DB>: Execute,
{
    /// The earlier instance's upgrade, and the lease its store took after it.
    async fn overtake(first: &SqlxStore<DB>) -> Overtaking {
        let upgraded = first.upgrade().await.map_err(|e| e.to_string())?;
        let holder = HolderId::generate();
        let fence = first
            .try_acquire(&name("fresh"), &holder, Ttl::from_secs(300).unwrap())
            .await
            .map_err(|e| e.to_string())?
            .ok_or("the earlier instance did not take a free lease")?;
        Ok((upgraded, holder, fence))
    }
}

#[lease_core::async_trait]
impl<DB: TestDb> Execute for Overtaken<DB>
where
    SqlxExecutor<DB>: Execute,
{
    type Pool = <SqlxExecutor<DB> as Execute>::Pool;

    fn dialect(&self) -> Dialect {
        self.inner.dialect()
    }

    fn pool(&self) -> &Self::Pool {
        Execute::pool(&self.inner)
    }

    fn pool_state(&self) -> PoolState {
        self.inner.pool_state()
    }

    fn classify(&self, error: &(dyn std::error::Error + Send + Sync + 'static)) -> StoreErrorKind {
        self.inner.classify(error)
    }

    fn describe(&self, error: &(dyn std::error::Error + Send + Sync + 'static)) -> Option<String> {
        self.inner.describe(error)
    }

    fn database_message<'e>(
        &self,
        error: &'e (dyn std::error::Error + Send + Sync + 'static),
    ) -> Option<&'e str> {
        self.inner.database_message(error)
    }

    async fn int_pairs(&self, query: Query<'_>) -> Result<Vec<(i64, i64)>, BoxError> {
        self.inner.int_pairs(query).await
    }

    async fn ints(&self, query: Query<'_>) -> Result<Vec<i64>, BoxError> {
        self.inner.ints(query).await
    }

    async fn text_pairs(&self, query: Query<'_>) -> Result<Vec<(String, String)>, BoxError> {
        self.inner.text_pairs(query).await
    }

    async fn lease_rows(&self, query: Query<'_>) -> Result<Vec<LeaseRow>, BoxError> {
        self.inner.lease_rows(query).await
    }

    async fn affected(&self, query: Query<'_>) -> Result<u64, BoxError> {
        self.inner.affected(query).await
    }

    async fn batch(&self, sql: &str) -> Result<(), BoxError> {
        let first = self.first.lock().unwrap().take();
        if let Some(first) = first {
            let overtook = Self::overtake(&first).await;
            *self.overtook.lock().unwrap() = Some(overtook);
        }
        self.inner.batch(sql).await
    }
}

/// Two instances upgrade the story's table at once, and the database runs the later one's SQL,
/// made from the table's shape before, after the earlier one's committed and its store handed
/// out a fence: the later upgrade answers `Ok(false)` (the table fits), and the fence and the
/// story's live lease are as they were. Without the fix, PostgreSQL's and MariaDB's later
/// upgrade failed on its `ADD COLUMN fence` (a duplicate column), and SQLite's rebuild copied
/// every fence as 0.
async fn an_upgrade_made_stale_by_another_finds_the_table_upgraded<DB: TestDb>(
    store: &SqlxStore<DB>,
    table: &str,
) -> Result<(), BoxError>
where
    SqlxExecutor<DB>: Execute<Pool = lease_sqlx::sqlx::Pool<DB>>,
{
    adoption::create_story_table(store, table).await?;
    let first = SqlxStore::<DB>::with_table(store.pool().clone(), table)?;
    let later = SqlStore::<Overtaken<DB>>::with_table(
        Overtaken {
            inner: SqlxExecutor::new(store.pool().clone()),
            first: Mutex::new(Some(first)),
            overtook: Mutex::new(None),
        },
        table,
    )?;
    let upgraded = later.upgrade().await;
    let overtook = later
        .executor()
        .overtook
        .lock()
        .unwrap()
        .take()
        .ok_or("the later upgrade ran no script")?;
    let (first_upgraded, holder, fence) =
        overtook.map_err(|e| format!("the earlier instance: {e}"))?;
    if !first_upgraded {
        return Err("the earlier instance's upgrade changed nothing".into());
    }
    let fresh = store
        .inspect(&name("fresh"))
        .await?
        .ok_or("the earlier instance's lease is gone")?;
    if fresh.holder != holder || fresh.fence != fence {
        return Err(format!(
            "the earlier instance's lease, held by {holder} with fence {fence}, reads {fresh:?}"
        )
        .into());
    }
    match upgraded {
        Ok(false) => {}
        other => return Err(format!("the later upgrade answered {other:?}").into()),
    }
    store.verify().await?;
    adoption::story_lease_still_held(store).await
}

/// The SQL `verify` prints for the story's table, put in a migration of its own as the docs say
/// and applied by sqlx's `Migrator` (which runs each migration in a transaction): it runs,
/// and the table fits with the story's live lease still held. Without the fix, SQLite's
/// upgrade began a transaction of its own (`BEGIN IMMEDIATE`), which fails inside sqlx's.
async fn printed_upgrade_runs_as_a_sqlx_migration<DB: TestDb>(
    store: &SqlxStore<DB>,
    table: &str,
) -> Result<(), BoxError>
where
    SqlxExecutor<DB>: Execute<Pool = lease_sqlx::sqlx::Pool<DB>>,
    DB::Connection: Migrate,
{
    let sql = adoption::story_upgrade(store, table).await?;
    let dir = std::env::temp_dir().join(format!("{table}_upgrade_migrations"));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("20270101000000_upgrade_leases.sql"), &sql)?;
    let bookkeeping = format!("_sqlx_migrations_{table}");
    let ran = async {
        let mut migrator = Migrator::new(dir.as_path()).await?;
        migrator.dangerous_set_table_name(bookkeeping.clone());
        migrator.run(store.pool()).await?;
        Ok::<(), BoxError>(())
    }
    .await;
    DB::execute(store.pool(), format!("DROP TABLE IF EXISTS {bookkeeping}")).await?;
    std::fs::remove_dir_all(&dir)?;
    ran.map_err(|e| format!("the printed upgrade as a migration: {e}\n{sql}"))?;
    store.verify().await?;
    adoption::story_lease_still_held(store).await
}

/// MariaDB: an earlier lease table of `latin1` names and holders (a server or table whose
/// default character set is `latin1`), with `café` held by `service-ü` for another hour: stored
/// as the bytes `E9` and `FC`, where the store sends UTF-8 (`C3 A9`). After the upgrade the
/// store reads the lease as held by that holder, and another holder cannot take it. Without the
/// fix the upgrade kept the `latin1` bytes: the store's `café` was another row, taken by a
/// second holder.
#[tokio::test]
async fn mariadb_latin1_names_are_the_same_leases_after_upgrade() {
    on_fresh_table::<MySql, _>(async |store, table| {
        store
            .executor()
            .batch(&format!(
                "CREATE TABLE {table} (name varchar(255) CHARACTER SET latin1 PRIMARY KEY, \
                 holder varchar(255) CHARACTER SET latin1 NOT NULL, fence BIGINT NOT NULL DEFAULT 0, \
                 taken_at datetime(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), \
                 expires_at datetime(6) NOT NULL) DEFAULT CHARSET=latin1;\n\
                 INSERT INTO {table} (name, holder, fence, expires_at) \
                 VALUES ('café', 'service-ü', 7, UTC_TIMESTAMP(6) + INTERVAL 1 HOUR);"
            ))
            .await?;
        let refused = store.verify().await;
        if !store.upgrade().await? {
            return Err("the upgrade changed nothing".into());
        }
        store.verify().await?;
        let cafe = name("café");
        let held = store
            .inspect(&cafe)
            .await?
            .ok_or("the lease held before the upgrade is not found by its name")?;
        if held.holder.as_str() != "service-ü" || held.fence.get() != 7 {
            return Err(format!("the lease held before the upgrade reads {held:?}").into());
        }
        if let Some(fence) = store
            .try_acquire(&cafe, &HolderId::generate(), Ttl::from_secs(30)?)
            .await?
        {
            return Err(format!("a second holder took café with fence {fence}").into());
        }
        let all = store.list().await?;
        if all.len() != 1 {
            return Err(format!("one lease became {all:?}").into());
        }
        match refused {
            Err(Error::SchemaMismatch { mismatch, .. })
                if mismatch.contains("column name holds latin1 text") =>
            {
                Ok(())
            }
            other => Err(format!("verify of a latin1 table answered {other:?}").into()),
        }
    })
    .await;
}

/// SQLite: a lease table with a rowid column of its own (`id INTEGER PRIMARY KEY NOT NULL`),
/// which SQLite fills on every insert, fits: leases are taken, released and taken again. A
/// column that is no rowid (`WITHOUT ROWID`, or not the primary key) and `NOT NULL` without a
/// default is still refused, as the store's inserts would fail on it. Without the fix, the
/// rowid column was refused as `NOT NULL` without a default.
#[tokio::test]
async fn sqlite_rowid_column_is_filled_by_sqlite() {
    on_fresh_table::<Sqlite, _>(async |store, table| {
        let columns = "name TEXT NOT NULL UNIQUE, holder TEXT, fence INTEGER NOT NULL DEFAULT 0, \
                       taken_at INTEGER NOT NULL, expires_at INTEGER NOT NULL";
        let run = |sql: String| async move { store.executor().batch(&sql).await };
        for (id, fits) in [
            ("id INTEGER PRIMARY KEY NOT NULL", true),
            ("id integer primary key", true),
            ("id INTEGER NOT NULL", false),
            ("id INT PRIMARY KEY NOT NULL", false),
        ] {
            run(format!("DROP TABLE IF EXISTS {table}")).await?;
            run(format!("CREATE TABLE {table} ({id}, {columns})")).await?;
            check_rowid_table(store, id, fits).await?;
        }
        run(format!("DROP TABLE {table}")).await?;
        run(format!(
            "CREATE TABLE {table} (id INTEGER PRIMARY KEY NOT NULL, {columns}) WITHOUT ROWID"
        ))
        .await?;
        check_rowid_table(store, "WITHOUT ROWID", false).await
    })
    .await;
}

/// Whether the table with the column `id` fits, as `fits` says; when it does, leases are taken
/// on it, released and taken again.
async fn check_rowid_table<X: Execute>(
    store: &SqlStore<X>,
    id: &str,
    fits: bool,
) -> Result<(), BoxError> {
    match (store.verify().await, fits) {
        (Ok(()), true) => {}
        (Err(Error::SchemaMismatch { mismatch, .. }), false)
            if mismatch.contains("column id is NOT NULL without a default") => {}
        (other, _) => return Err(format!("{id}: verify answered {other:?}").into()),
    }
    if !fits {
        return Ok(());
    }
    let ttl = Ttl::from_secs(30)?;
    let me = HolderId::generate();
    for lease in ["one", "two"] {
        store
            .try_acquire(&name(lease), &me, ttl)
            .await?
            .ok_or(format!("{id}: {lease} was not taken"))?;
    }
    if !store
        .release(&name("one"), &me, std::time::Duration::ZERO)
        .await?
    {
        return Err(format!("{id}: one was not released").into());
    }
    store
        .try_acquire(&name("one"), &HolderId::generate(), ttl)
        .await?
        .ok_or(format!("{id}: one was not taken again"))?;
    Ok(())
}

/// MariaDB and SQLite compare column names regardless of case: a lease table declared with
/// `NAME`, `HOLDER`, ... fits and serves leases, and an earlier one (no fence, a holder that
/// cannot be `NULL`) is upgraded. PostgreSQL compares quoted names exactly, and refuses such a
/// table. Without the fix, MariaDB and SQLite refused it as missing every column.
async fn capital_column_names_match_where_the_database_ignores_case<DB: TestDb>(
    store: &SqlxStore<DB>,
    table: &str,
) -> Result<(), BoxError>
where
    SqlxExecutor<DB>: Execute,
{
    let dialect = store.statements().dialect();
    let (text, key, fence, time, quote) = match dialect {
        Dialect::MySql => (
            "VARBINARY(255)",
            "VARBINARY(1024)",
            "BIGINT",
            "DATETIME(6)",
            '`',
        ),
        Dialect::Sqlite => ("TEXT", "TEXT", "INTEGER", "INTEGER", '"'),
        _ => ("text COLLATE \"C\"", "text", "bigint", "timestamptz", '"'),
    };
    let q = |column: &str| format!("{quote}{column}{quote}");
    let ours = format!(
        "CREATE TABLE {table} ({} {text} NOT NULL PRIMARY KEY, {} {key}, {} {fence} NOT NULL, \
         {} {time} NOT NULL, {} {time} NOT NULL)",
        q("NAME"),
        q("HOLDER"),
        q("FENCE"),
        q("Taken_At"),
        q("EXPIRES_AT")
    );
    store.executor().batch(&ours).await?;
    if dialect == Dialect::Postgres {
        return match store.verify().await {
            Err(Error::SchemaMismatch { mismatch, .. })
                if mismatch.contains("column name is missing") =>
            {
                Ok(())
            }
            other => Err(format!("PostgreSQL's \"NAME\" table: verify answered {other:?}").into()),
        };
    }
    store.verify().await?;
    let ttl = Ttl::from_secs(30)?;
    let me = HolderId::generate();
    store
        .try_acquire(&name("report"), &me, ttl)
        .await?
        .ok_or("a lease was not taken")?;
    if !store.renew(&name("report"), &me, ttl).await? {
        return Err("a lease was not renewed".into());
    }
    // An earlier lease table in capitals is upgraded.
    store
        .executor()
        .batch(&format!("DROP TABLE {table}"))
        .await?;
    let story = adoption::story_table(dialect, table)
        .replace("name ", "NAME ")
        .replace("holder ", "HOLDER ")
        .replace("taken_at ", "TAKEN_AT ")
        .replace("expires_at ", "EXPIRES_AT ");
    store.executor().batch(&story).await?;
    for row in adoption::story_rows(dialect, table) {
        store.executor().batch(&row).await?;
    }
    match store.verify().await {
        Err(Error::SchemaMismatch {
            mismatch,
            upgrade: Some(_),
            ..
        }) if mismatch.contains("column fence is missing")
            && mismatch.matches("is missing").count() == 1 => {}
        other => {
            return Err(format!("the story's table in capitals: verify answered {other:?}").into());
        }
    }
    if !store.upgrade().await? {
        return Err("the upgrade changed nothing".into());
    }
    store.verify().await?;
    adoption::story_lease_still_held(store).await
}

#[tokio::test]
async fn mariadb_capital_column_names_match() {
    on_fresh_table::<MySql, _>(capital_column_names_match_where_the_database_ignores_case).await;
}

#[tokio::test]
async fn sqlite_capital_column_names_match() {
    on_fresh_table::<Sqlite, _>(capital_column_names_match_where_the_database_ignores_case).await;
}

#[tokio::test]
async fn postgres_capital_column_names_are_other_columns() {
    on_fresh_table::<Postgres, _>(capital_column_names_match_where_the_database_ignores_case).await;
}
