//! Fenced writes through sqlx for the suite's fenced cases, and the broken checks those cases
//! must catch.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use lease_core::runtime::TokioRuntime;
use lease_core::{BoxError, Error, LeaseHandle, LeaseName, Operation, StoreErrorKind};
use lease_sqlx::sqlx::{self, AssertSqlSafe, Executor, IntoArguments};
use lease_sqlx::{Execute, ExecuteOn, SqlxDatabase, SqlxExecutor, SqlxStore};
use lease_tests::run::run_case;
use lease_tests::{CaseResult, Context, TestBackend, Verdict, env};

/// Which check a fenced transaction runs, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// The store's own: `SqlStore::fence`.
    Fenced,
    /// Broken: the same condition read by a `SELECT` in the transaction, which locks nothing.
    Unlocked,
    /// Broken: the store's statement without its expiry condition.
    IgnoresExpiry,
    /// Broken: the store's statement matching a row whose holder was cleared too (`holder IS
    /// NULL OR holder = ...`), the mistake of a hand-written check that lets a lease released
    /// by force be written under.
    IgnoresClearedHolder,
    /// Broken: the store's check, but on a connection of its own, before the transaction's
    /// write: a check in a separate statement, whose lock ends with it.
    Separate,
    /// The store's check at the commit, in the same round trip: `lease_sqlx::commit_fenced`.
    AtCommit,
    /// Broken: the commit first, then the store's check (on a connection of its own): the
    /// check comes too late to keep a stale holder's write out.
    CommitBeforeChecking,
    /// Broken: the check at the commit without its expiry condition.
    AtCommitIgnoresExpiry,
    /// Broken under a snapshot: the check at the commit without the guard that refuses it in a
    /// transaction reading from a snapshot (`lease_sql::SnapshotIsolation`).
    AtCommitUnguarded,
    /// Broken for what a check at the commit promises: the store's check at the start as well,
    /// whose row lock holds the holder's renewals back while the job works.
    AtCommitLockedFromStart,
    /// The whole transaction through `lease_sqlx::fenced`: at the commit on PostgreSQL (the
    /// prepared check) and MariaDB, at the start on SQLite.
    Function,
    /// The whole transaction through `lease_sqlx::fenced_with(.., CheckAt::Begin, ..)`: the
    /// check with the `BEGIN`, in one message (on PostgreSQL the prepared check).
    FunctionAtBegin,
}

impl Check {
    /// Whether the transaction is checked at its commit rather than at its start.
    fn at_commit(self) -> bool {
        matches!(
            self,
            Check::AtCommit
                | Check::CommitBeforeChecking
                | Check::AtCommitIgnoresExpiry
                | Check::AtCommitUnguarded
                | Check::AtCommitLockedFromStart
        )
    }
}

/// Where the check reads the lease's expiry: PostgreSQL's in `RETURNING`, after the row is
/// locked (`expires_at - interval '1 microsecond' > <the clock>`, the row having moved on by
/// the check's microsecond); the other dialects' in the `WHERE` (` AND expires_at > <the clock>`).
const EXPIRY_READ: [&str; 2] = [
    "expires_at - interval '1 microsecond' >",
    " AND expires_at >",
];

/// The span of the first expiry condition in `sql` (either of [`EXPIRY_READ`], the clock
/// included), and which one it is.
fn expiry_condition(sql: &str) -> Option<(std::ops::Range<usize>, usize)> {
    let (start, which) = EXPIRY_READ
        .iter()
        .enumerate()
        .find_map(|(which, read)| sql.find(read).map(|start| (start, which)))?;
    let rest = &sql[start + EXPIRY_READ[which].len()..];
    // The clock is an expression with parentheses: it ends where its first one closes.
    let mut depth = 0usize;
    let mut end = rest.len();
    for (at, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    end = at + 1;
                    break;
                }
            }
            _ => {}
        }
    }
    Some((start..start + EXPIRY_READ[which].len() + end, which))
}

/// `sql` with its holder condition loosened to match a row with no holder as well.
fn ignoring_cleared_holder(sql: &str) -> String {
    let start = sql.find("holder = ").expect("the check names the holder");
    let value = start + "holder = ".len();
    let end = sql[value..]
        .find(char::is_whitespace)
        .map_or(sql.len(), |end| value + end);
    format!(
        "{}(holder IS NULL OR holder = {}){}",
        &sql[..start],
        &sql[value..end],
        &sql[end..]
    )
}

/// `sql` with its expiry conditions gone: removed from a `WHERE`, read as `true` in a
/// `RETURNING`.
fn without_expiry(sql: &str) -> String {
    let mut sql = sql.to_owned();
    while let Some((span, which)) = expiry_condition(&sql) {
        let instead = if which == 0 { "true" } else { "" };
        sql.replace_range(span, instead);
    }
    sql
}

/// The check's condition as a `WHERE` clause of its own, the expiry included wherever the
/// check reads it.
fn condition(sql: &str) -> String {
    let start = sql.find("WHERE").unwrap_or(0);
    let end = sql[start..]
        .find("RETURNING")
        .map_or(sql.len(), |end| start + end);
    let mut condition = sql[start..end].trim_end().to_owned();
    if let Some((span, 0)) = expiry_condition(sql) {
        condition = format!("{condition} AND {}", &sql[span]);
    }
    condition
}

/// `message` without the statement of the snapshot guard (PostgreSQL's
/// `current_setting('transaction_isolation')` test).
fn without_guard(message: &str) -> String {
    message
        .split(";\n")
        .filter(|statement| !statement.contains("transaction_isolation"))
        .collect::<Vec<_>>()
        .join(";\n")
}

/// Writes to `{table}_notices` through transactions fenced by `check`.
pub struct FencedSql<DB: SqlxDatabase> {
    pub store: SqlxStore<DB>,
    pub notices: String,
    pub check: Check,
    /// The connections' transactions read from a snapshot (PostgreSQL `SERIALIZABLE`):
    /// `lease_sqlx::fenced` then checks with the `BEGIN`.
    pub snapshot: bool,
}

impl<DB> FencedSql<DB>
where
    DB: SqlxDatabase,
    SqlxExecutor<DB>: Execute,
{
    /// The store's fenced statement for `lease`.
    fn fence_sql(&self, lease: &LeaseHandle) -> String {
        self.store
            .statements()
            .fence(lease.name(), lease.holder(), lease.fence())
            .sql()
            .to_owned()
    }
    /// Sets `set` on the lease `name`'s row. The suite's lease names are plain words, written
    /// here as a literal. The statement may wait for the row lock of a fenced transaction; on
    /// connections that read from a snapshot it then fails with a serialization failure (the
    /// transaction changed the row), a conflict by the SQLSTATE classes lease-sql reads, and is
    /// tried again, at most three times.
    async fn change_row(&self, name: &LeaseName, set: &str) -> Result<(), BoxError>
    where
        for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    {
        let sql = format!(
            "UPDATE {} SET {set} WHERE name = '{}'",
            self.store.table(),
            name.as_str().replace('\'', "''")
        );
        for _ in 0..3 {
            match sqlx::raw_sql(AssertSqlSafe(sql.as_str()))
                .execute(self.store.executor().pool())
                .await
            {
                Err(sqlx::Error::Database(database))
                    if database.code().is_some_and(|code| {
                        lease_sql::postgres_error_kind(&code) == StoreErrorKind::Conflict
                    }) => {}
                done => return Ok(done.map(drop)?),
            }
        }
        Err(format!("`{sql}` failed with a serialization failure three times").into())
    }
}

#[lease_core::async_trait]
impl<DB> lease_tests::FencedWrites for FencedSql<DB>
where
    DB: SqlxDatabase,
    SqlxExecutor<DB>: Execute + for<'c> ExecuteOn<&'c mut DB::Connection>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    (i64,): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    async fn write(
        &self,
        lease: &LeaseHandle,
        value: i64,
        hold: BoxFuture<'_, ()>,
    ) -> Result<(), Error> {
        let failed = |e: sqlx::Error| Error::store(Operation::Fence, Some(lease.name()), e);
        let insert = format!("INSERT INTO {} (value) VALUES ({value})", self.notices);
        let at = match self.check {
            Check::Function => Some(lease_sqlx::CheckAt::Commit),
            Check::FunctionAtBegin => Some(lease_sqlx::CheckAt::Begin),
            _ => None,
        };
        if let Some(at) = at {
            return lease_sqlx::fenced_with(&self.store, lease, at, async |conn| {
                hold.await;
                sqlx::raw_sql(AssertSqlSafe(insert))
                    .execute(&mut *conn)
                    .await
                    .map_err(failed)?;
                Ok::<_, Error>(())
            })
            .await;
        }
        let pool = self.store.executor().pool();
        let mut tx = pool.begin().await.map_err(failed)?;
        let fence = i64::try_from(lease.fence().get()).unwrap_or(i64::MAX);
        let (name, holder) = (lease.name().as_str(), lease.holder().as_str());
        // Broken: the store's check loosened by `loosen`; whether it matched.
        let loosened = async |tx: &mut DB::Connection, loosen: fn(&str) -> String| {
            let check = loosen(&self.fence_sql(lease));
            let done = sqlx::query(AssertSqlSafe(check))
                .bind(name)
                .bind(holder)
                .bind(fence)
                .execute(&mut *tx)
                .await
                .map_err(failed)?;
            Ok::<_, Error>(DB::rows_affected(&done) > 0)
        };
        let held = match self.check {
            Check::Fenced | Check::AtCommitLockedFromStart => {
                match self.store.fence(&mut *tx, lease).await {
                    // Under a snapshot, the holder's own renewal in flight as the check began
                    // (a serialization failure): what the docs advise, the transaction again,
                    // nothing of the job's having run yet.
                    Err(error) if error.store_error_kind() == Some(StoreErrorKind::Conflict) => {
                        tx.rollback().await.map_err(failed)?;
                        tx = pool.begin().await.map_err(failed)?;
                        self.store.fence(&mut *tx, lease).await.map(|_| true)?
                    }
                    checked => checked.map(|_| true)?,
                }
            }
            Check::Function | Check::FunctionAtBegin => {
                unreachable!("written through `lease_sqlx::fenced_with` above")
            }
            Check::Separate => {
                let mut own = pool.acquire().await.map_err(failed)?;
                self.store.fence(&mut *own, lease).await.map(|_| true)?
            }
            Check::IgnoresExpiry => loosened(&mut *tx, without_expiry).await?,
            Check::IgnoresClearedHolder => loosened(&mut *tx, ignoring_cleared_holder).await?,
            Check::Unlocked => {
                let condition = condition(&self.fence_sql(lease));
                let sql = format!("SELECT count(*) FROM {} {condition}", self.store.table());
                let (count,): (i64,) = sqlx::query_as(AssertSqlSafe(sql))
                    .bind(name)
                    .bind(holder)
                    .bind(fence)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(failed)?;
                count > 0
            }
            Check::AtCommit | Check::CommitBeforeChecking | Check::AtCommitIgnoresExpiry => true,
            Check::AtCommitUnguarded => {
                // The job's first read, before its work: under a snapshot, the transaction's
                // snapshot is taken here, as `fenced`'s begin took it before the guard.
                sqlx::raw_sql(AssertSqlSafe("SELECT 1"))
                    .execute(&mut *tx)
                    .await
                    .map_err(failed)?;
                true
            }
        };
        if !held {
            return Err(lease.mark_not_held());
        }
        // The job's work between the check and its write.
        hold.await;
        sqlx::raw_sql(AssertSqlSafe(insert))
            .execute(&mut *tx)
            .await
            .map_err(failed)?;
        match self.check {
            Check::AtCommit | Check::AtCommitLockedFromStart => {
                lease_sqlx::commit_fenced(&self.store, tx, lease).await?;
            }
            Check::CommitBeforeChecking => {
                tx.commit().await.map_err(failed)?;
                let mut own = pool.acquire().await.map_err(failed)?;
                self.store.fence(&mut *own, lease).await?;
            }
            Check::AtCommitIgnoresExpiry | Check::AtCommitUnguarded => {
                let statements = self.store.statements();
                let message =
                    match statements.fence_then_commit(lease.name(), lease.holder(), lease.fence())
                    {
                        Some(message) => {
                            let message = message.map_err(|e| {
                                Error::store(Operation::Fence, Some(lease.name()), e)
                            })?;
                            if self.check == Check::AtCommitUnguarded {
                                without_guard(message.sql())
                            } else {
                                without_expiry(message.sql())
                            }
                        }
                        None => {
                            if !loosened(&mut *tx, without_expiry).await? {
                                return Err(lease.mark_not_held());
                            }
                            "COMMIT".to_owned()
                        }
                    };
                let sent = sqlx::raw_sql(AssertSqlSafe(format!("{message};\nBEGIN")))
                    .execute(&mut *tx)
                    .await;
                match sent {
                    Err(sqlx::Error::Database(database))
                        if lease_sql::is_not_held(database.message()) =>
                    {
                        return Err(lease.mark_not_held());
                    }
                    other => other.map_err(failed)?,
                };
            }
            _ => tx.commit().await.map_err(failed)?,
        }
        Ok(())
    }

    fn checks_at_commit(&self) -> bool {
        match self.check {
            Check::Function => !self.snapshot && self.store.statements().checks_at_commit(),
            Check::FunctionAtBegin => false,
            check => check.at_commit(),
        }
    }

    async fn written(&self) -> Result<Vec<i64>, BoxError> {
        let select = format!("SELECT value FROM {}", self.notices);
        let rows: Vec<(i64,)> = sqlx::query_as(AssertSqlSafe(select))
            .fetch_all(self.store.executor().pool())
            .await?;
        Ok(rows.into_iter().map(|(value,)| value).collect())
    }

    async fn expire(&self, name: &LeaseName) -> Result<(), BoxError> {
        self.change_row(name, "expires_at = taken_at").await
    }

    async fn free(&self, name: &LeaseName) -> Result<(), BoxError> {
        self.change_row(name, "holder = NULL").await
    }
}

/// What a fenced case must do against a backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Pass: the check is one of the store's own.
    Pass,
    /// Fail: the check is broken, and the case must catch it for the rule it breaks, with a
    /// failure whose message holds this text (not with any error on the way).
    Catch(&'static str),
}

/// Runs `case` against `backend` and fails the test unless it did as `expect` says.
pub async fn expect<B, F, Fut>(backend: B, expect: Expect, case: F)
where
    B: TestBackend,
    F: FnOnce(Arc<Context<B>>) -> Fut,
    Fut: Future<Output = CaseResult>,
{
    let name = backend.name().to_owned();
    if let Err(why) = backend.available().await {
        return env::skip_or_fail(&name, &why.to_string());
    }
    match (run_case(backend, TokioRuntime, case).await, expect) {
        (Ok(Verdict::Passed), Expect::Pass) => {}
        (Err(failure), Expect::Catch(rule)) => {
            let failure = failure.to_string();
            assert!(
                failure.contains(rule),
                "{name}: the case failed, but not for its rule ({rule:?}): {failure}"
            );
            eprintln!("{name}: caught: {failure}");
        }
        (Ok(Verdict::Passed), Expect::Catch(_)) => {
            panic!("{name}: the case passed against a broken check")
        }
        (Err(failure), Expect::Pass) => panic!("{name}: {failure}"),
        (Ok(other), _) => panic!("{name}: the case gave {other:?}"),
    }
}
