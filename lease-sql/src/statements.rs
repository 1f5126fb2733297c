//! [`Statements`]: every statement of one dialect for one table, built once.

use std::borrow::Cow;
use std::time::Duration;

use lease_core::{Fence, HolderId, LeaseName, Ttl};

use crate::template::{DialectSql, Template};
use crate::{
    Dialect, Param, Query, RenewManyResult, TableName, min_hold_micros, mysql, postgres, sqlite,
    ttl_micros,
};

/// Every statement a lease store runs, for one dialect and one validated table name.
///
/// Build it once when the store is made; each method then hands out a [`Query`] (the text and
/// the parameters in binding order) without building any SQL, except renew-many on MariaDB and
/// SQLite for a batch of another size than the last full one.
///
/// What each statement returns:
///
/// | method | result |
/// |---|---|
/// | [`create_table`](Statements::create_table) | nothing; idempotent (`CREATE TABLE IF NOT EXISTS`) |
/// | [`try_acquire`](Statements::try_acquire) | zero or one row `(fence BIGINT, won BIGINT)`: taken iff `won` is 1 ([`acquired`](crate::acquired)) |
/// | [`renew`](Statements::renew), [`release`](Statements::release) | affected rows: 1 if the holder held it, else 0 |
/// | [`inspect`](Statements::inspect), [`list`](Statements::list) | rows of [`LeaseRow`](crate::LeaseRow) columns |
/// | [`renew_many`](Statements::renew_many) | see [`RenewManyResult`] |
///
/// ```
/// use lease_core::{Fence, HolderId, LeaseName, Ttl};
/// use lease_sql::{Dialect, Param, Statements, TableName};
///
/// let statements = Statements::new(Dialect::Postgres, &TableName::new("leases")?);
/// let name = LeaseName::new("sweep")?;
/// let holder = HolderId::generate();
/// let query = statements.renew(&name, &holder, Ttl::from_secs(120)?);
/// assert!(query.sql().starts_with("UPDATE \"leases\""));
/// assert_eq!(query.params()[0], Param::text("sweep"));
/// assert_eq!(query.params()[2], Param::Int(120_000_000));
/// # Ok::<(), lease_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Statements {
    dialect: Dialect,
    table: TableName,
    quoted: String,
    sql: DialectSql,
    /// Renew-many for a full batch (PostgreSQL: for any batch).
    renew_many_full: String,
    setup: String,
    /// PostgreSQL: the channel of release notifications and the release that sends them.
    notifying: Option<(String, Template)>,
    /// Whether [`release`](Statements::release) is the notifying one.
    notify_releases: bool,
}

impl Statements {
    /// The statements of `dialect` on `table`.
    pub fn new(dialect: Dialect, table: &TableName) -> Self {
        let quoted = table.quoted(dialect.quote());
        let sql = match dialect {
            Dialect::Postgres => postgres::sql(&quoted),
            Dialect::MySql => mysql::sql(&quoted),
            Dialect::Sqlite => sqlite::sql(&quoted),
        };
        let renew_many_full = renew_many_sql(dialect, &quoted, dialect.renew_many_batch());
        let setup = match dialect {
            Dialect::Postgres => postgres::setup(&sql.create_table),
            Dialect::MySql | Dialect::Sqlite => format!("{};", sql.create_table),
        };
        let notifying = (dialect == Dialect::Postgres).then(|| {
            let channel = postgres::release_channel(&table.to_string());
            // A validated table name is ASCII letters, digits, `_` and `.`: never a NUL.
            let literal = crate::postgres_literal(&channel).unwrap_or_default();
            let release = postgres::release_notifying(&sql.release, &literal);
            (channel, release)
        });
        Self {
            dialect,
            table: table.clone(),
            quoted,
            sql,
            renew_many_full,
            setup,
            notifying,
            notify_releases: false,
        }
    }

    /// These statements with release notifications `on` or off (off by default). On,
    /// [`release`](Statements::release) also notifies
    /// [`release_channel`](Statements::release_channel) with the lease's name when it frees the
    /// lease (not when a minimum hold keeps it taken), so that waiters who `LISTEN` there take it
    /// at once instead of at their next poll. PostgreSQL only: elsewhere this changes nothing.
    ///
    /// The notification is sent when the release commits. Sending works through any pooler,
    /// PgBouncer's transaction mode included; listening needs a direct connection.
    #[must_use]
    pub fn with_release_notifications(mut self, on: bool) -> Self {
        self.notify_releases = on && self.notifying.is_some();
        self
    }

    /// Whether [`release`](Statements::release) notifies listeners.
    pub fn notifies_releases(&self) -> bool {
        self.notify_releases
    }

    /// The dialect.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The table.
    pub fn table(&self) -> &TableName {
        &self.table
    }

    /// The `COMMIT` of a fenced transaction whose check came at its start, where a plain one
    /// is not enough; `None` where it is (a driver may then commit through its own transaction
    /// object). On PostgreSQL a failed statement aborts the transaction, and a `COMMIT` alone
    /// then answers `ROLLBACK` without an error: work that swallowed such a failure would be
    /// told that writes committed which were thrown away; and a `COMMIT` or `ROLLBACK` the work
    /// sent itself ended the transaction, after which its writes committed on their own. So
    /// there the guard of [`TransactionEnded`](crate::TransactionEnded) goes first, in the same
    /// message, which fails in both, and the message stops at it. On
    /// MariaDB a statement can end the transaction inside the work (data definition,
    /// `TRUNCATE`, `LOCK TABLES` commit it first; a deadlock rolls it back), after which writes
    /// commit on their own and a `COMMIT` has nothing to do: a guard that fails when no
    /// transaction is open goes first ([`TransactionEnded`](crate::TransactionEnded)). SQLite:
    /// `None`.
    pub fn commit_after_check(&self) -> Option<&crate::CommitMessage> {
        self.sql.commit_after_check.as_ref()
    }

    /// A statement that tells, sent in a fenced transaction as a message of its own, whether
    /// the work had ended the transaction: for a refusal that says nothing of it (the lease
    /// lost before the commit, found gone by SQLite's check at the commit), so that the answer
    /// is not that nothing was committed where the work's later writes committed on their own.
    pub fn ended_probe(&self) -> &crate::EndedProbe {
        &self.sql.ended_probe
    }

    /// `CREATE TABLE IF NOT EXISTS` for the lease table. The same text, for the default table,
    /// ships as `sql/<dialect>.sql` for those who run their own migrations.
    pub fn create_table(&self) -> &str {
        &self.sql.create_table
    }

    /// What a store's setup runs: [`create_table`](Statements::create_table), on PostgreSQL
    /// under a transaction-level advisory lock, because two `CREATE TABLE IF NOT EXISTS` at the
    /// same moment can fail there on the catalog's unique index. Send it as one simple-protocol
    /// message (it may hold several statements, which then run as one implicit transaction);
    /// it has no parameters.
    pub fn setup(&self) -> &str {
        &self.setup
    }

    /// Try-acquire. Parameters: name, holder, TTL in microseconds (MariaDB: and the holder again,
    /// to tell the winner in `RETURNING`).
    ///
    /// The fence it hands out is a hybrid logical clock: the greater of the previous fence + 1
    /// and the database's clock in microseconds since the Unix epoch (SQLite: its milliseconds,
    /// times 1,000). So fences strictly increase per name as before, and also do not depend on
    /// the row surviving: a name whose row was [pruned](Statements::prune), or whose latest
    /// acquisitions a failover lost (an asynchronous standby that never received them), gets a
    /// fence above every fence handed out before, as long as the clock of the server that hands
    /// it out is ahead of the clock that stamped the lost one. A failover takes seconds and the
    /// servers' clocks are kept within milliseconds by NTP, so it is. A table whose fences were
    /// counters (before this scheme) needs no migration: its next fence jumps to the clock.
    pub fn try_acquire<'a>(
        &'a self,
        name: &'a LeaseName,
        holder: &'a HolderId,
        ttl: Ttl,
    ) -> Query<'a> {
        let template = &self.sql.try_acquire;
        Query {
            sql: Cow::Borrowed(&template.sql),
            params: template.params(name.as_str(), holder.as_str(), ttl_micros(ttl)),
        }
    }

    /// Renew. Parameters: name, holder, TTL in microseconds (MariaDB: the TTL first).
    pub fn renew<'a>(&'a self, name: &'a LeaseName, holder: &'a HolderId, ttl: Ttl) -> Query<'a> {
        let template = &self.sql.renew;
        Query {
            sql: Cow::Borrowed(&template.sql),
            params: template.params(name.as_str(), holder.as_str(), ttl_micros(ttl)),
        }
    }

    /// Release, keeping the lease until `min_hold` after it was taken when that is still ahead.
    /// Parameters: name, holder, minimum hold in microseconds (MariaDB: the hold first). With
    /// [release notifications](Statements::with_release_notifications) on, it also notifies
    /// (and returns a row per lease it released, which nobody needs to read: the affected rows
    /// count as without).
    pub fn release<'a>(
        &'a self,
        name: &'a LeaseName,
        holder: &'a HolderId,
        min_hold: Duration,
    ) -> Query<'a> {
        let template = match &self.notifying {
            Some((_, notifying)) if self.notify_releases => notifying,
            _ => &self.sql.release,
        };
        Query {
            sql: Cow::Borrowed(&template.sql),
            params: template.params(name.as_str(), holder.as_str(), min_hold_micros(min_hold)),
        }
    }

    /// The fenced check: inside the caller's transaction, one statement that succeeds only while
    /// the row still names `holder` and `fence` and has not expired by the database's clock (the
    /// time it holds the row's lock, which it may have waited for; never the transaction's start),
    /// locks the row until the transaction ends (a takeover or a forced release then waits for it),
    /// and writes it: on PostgreSQL and MariaDB it moves `expires_at` a microsecond later, so that
    /// the database sees a change (a certifying multi-primary cluster such as Galera sees the
    /// conflict); on SQLite it assigns `expires_at` its own value, which takes the write lock at
    /// once (a step of SQLite's millisecond per check would add up faster than the clock at a few
    /// thousand checks a second, as a renewal never moves an expiry back). Parameters: name,
    /// holder, fence. Answers with its affected rows: 1 while held, else 0. On PostgreSQL it
    /// matches the row on holder and fence and reads the expiry after locking it, so that under a
    /// snapshot it never reports a lease still held as gone (see
    /// [`SqlStore::fence`](crate::SqlStore::fence)): a row it matched past its expiry fails it with
    /// an error whose message carries [`NOT_HELD_MARKER`](crate::NOT_HELD_MARKER), and no row
    /// matched calls for [`unmatched_fence`](Statements::unmatched_fence).
    pub fn fence<'a>(
        &'a self,
        name: &'a LeaseName,
        holder: &'a HolderId,
        fence: Fence,
    ) -> Query<'a> {
        Query {
            sql: Cow::Borrowed(&self.sql.fence),
            params: vec![
                Param::text(name.as_str()),
                Param::text(holder.as_str()),
                fence_param(fence),
            ],
        }
    }

    /// Why [`fence`](Statements::fence) matched no row, asked in the same transaction: on
    /// PostgreSQL, a statement that fails with an error whose message carries
    /// [`SNAPSHOT_PREDATES_MARKER`](crate::SNAPSHOT_PREDATES_MARKER) and the isolation level when
    /// the transaction reads from a snapshot taken before the lease was acquired (the row it
    /// shows holds an older fence, or there is none), and answers otherwise: the lease is gone.
    /// Parameters: name, fence. `None` on MariaDB, whose `UPDATE` reads the latest row at every
    /// isolation level, and on SQLite, whose check takes the write lock first.
    pub fn unmatched_fence<'a>(&'a self, name: &'a LeaseName, fence: Fence) -> Option<Query<'a>> {
        let sql = self.sql.unmatched_fence.as_deref()?;
        Some(Query {
            sql: Cow::Borrowed(sql),
            params: vec![Param::text(name.as_str()), fence_param(fence)],
        })
    }

    /// Whether [`fence_then_commit`](Statements::fence_then_commit) has a message for this
    /// dialect (PostgreSQL and MariaDB; not SQLite): a fenced transaction then checks at its
    /// commit, in the same round trip, rather than at its start.
    pub fn checks_at_commit(&self) -> bool {
        self.sql.fence_raising.is_some()
    }

    /// The fenced check and `COMMIT`, for the end of the caller's transaction, as one
    /// self-contained text (parameters inline, as [`Query::inline_postgres`] and
    /// [`Query::inline_mysql`] write them) to send as one simple-protocol message: one round
    /// trip for both. The check is [`fence`](Statements::fence)'s statement, made to raise an
    /// error whose message carries [`NOT_HELD_MARKER`](crate::NOT_HELD_MARKER) when it matches
    /// no row; the server then skips the `COMMIT` and the transaction is left to roll back. On
    /// PostgreSQL a guard comes first, a statement that fails, naming
    /// [`TRANSACTION_ENDED_MARKER`](crate::TRANSACTION_ENDED_MARKER), when the message no longer
    /// runs in the transaction the work began in (the work sent a `COMMIT` or `ROLLBACK`:
    /// [`TransactionEnded`](crate::TransactionEnded)), and otherwise, naming
    /// [`SNAPSHOT_MARKER`](crate::SNAPSHOT_MARKER), in a transaction that reads from a snapshot,
    /// where any renewal since the snapshot would fail the check
    /// ([`SnapshotIsolation`](crate::SnapshotIsolation)). On MariaDB the check carries the first
    /// test itself.
    ///
    /// The transaction must have begun in an earlier message (a driver's `begin` waits for the
    /// `BEGIN`'s answer): on PostgreSQL the guard reads a transaction whose time is the message's
    /// own as one the work ended, and fails, so a `BEGIN` sent in the same message as this text
    /// never commits.
    ///
    /// `None` on SQLite, which runs in process: there [`fence`](Statements::fence) and a
    /// `COMMIT` cost no round trip.
    ///
    /// # Errors
    /// When a text parameter cannot be written as a literal (a NUL character, which a lease
    /// name never holds).
    pub fn fence_then_commit(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        fence: Fence,
    ) -> Option<Result<crate::CommitMessage, crate::InlineError>> {
        let guard = self.commit_guard();
        // The guard (where there is one), the check, the `COMMIT`.
        let statements = usize::from(self.sql.commit_guard.is_some()) + 2;
        self.raising(name, holder, fence).map(|check| {
            check.map(|check| {
                crate::CommitMessage::new(format!("{guard}{check};\nCOMMIT"), statements)
            })
        })
    }

    /// The message that begins a transaction to be checked with its commit through
    /// [`fence_then_commit`](Statements::fence_then_commit): `BEGIN`, and on PostgreSQL the
    /// guard of [`SnapshotIsolation`](crate::SnapshotIsolation), which fails before any work
    /// where the check with the commit could not run.
    pub fn begin_to_check_at_commit(&self) -> String {
        match self.sql.snapshot_guard.as_deref() {
            Some(guard) => format!("BEGIN;\n{guard}"),
            None => "BEGIN".to_owned(),
        }
    }

    /// The guard of [`TransactionEnded`](crate::TransactionEnded) and of
    /// [`SnapshotIsolation`](crate::SnapshotIsolation) as the first statement of a message that
    /// checks with the commit, or nothing where the dialect has none. It tests the first before
    /// the second: once the work ended the transaction, the message runs in one of its own, at
    /// the session's default isolation level, where the second would answer that nothing was
    /// committed.
    fn commit_guard(&self) -> String {
        self.sql
            .commit_guard
            .as_deref()
            .map(|guard| format!("{guard};\n"))
            .unwrap_or_default()
    }

    /// `BEGIN` and the fenced check, for the start of a transaction, as one self-contained text
    /// to send as one simple-protocol message: the check costs no round trip of its own, and
    /// raises an error (with [`NOT_HELD_MARKER`](crate::NOT_HELD_MARKER)) when the lease is
    /// gone, before any of the transaction's work. The check is
    /// [`fence_then_commit`](Statements::fence_then_commit)'s; on PostgreSQL see also
    /// [`prepared_begin_then_fence`](Statements::prepared_begin_then_fence). `None` on SQLite.
    ///
    /// # Errors
    /// As [`fence_then_commit`](Statements::fence_then_commit).
    pub fn begin_then_fence(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        fence: Fence,
    ) -> Option<Result<String, crate::InlineError>> {
        self.raising(name, holder, fence)
            .map(|check| check.map(|check| format!("BEGIN;\n{check}")))
    }

    /// [`begin_then_fence`](Statements::begin_then_fence) through
    /// [`prepared_fence`](Statements::prepared_fence): `BEGIN` and the `EXECUTE` of the check
    /// the connection prepared, which fails before any work where the connection lacks it.
    /// `None` where there is no prepared fence.
    ///
    /// # Errors
    /// As [`fence_then_commit`](Statements::fence_then_commit).
    pub fn prepared_begin_then_fence(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        fence: Fence,
    ) -> Option<Result<String, crate::InlineError>> {
        let prepared = self.sql.prepared_fence.as_ref()?;
        Some(prepared.begin_checked(&self.fence(name, holder, fence)))
    }

    /// The raising check with its parameters inline.
    fn raising(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        fence: Fence,
    ) -> Option<Result<String, crate::InlineError>> {
        let sql = self.sql.fence_raising.as_deref()?;
        let query = Query {
            sql: Cow::Borrowed(sql),
            params: self.fence(name, holder, fence).params,
        };
        Some(match self.dialect {
            Dialect::Postgres => query.inline_postgres(),
            Dialect::MySql => query.inline_mysql(),
            Dialect::Sqlite => return None,
        })
    }

    /// PostgreSQL's fenced commit as statements prepared once per connection (see
    /// [`PreparedFence`](crate::PreparedFence)): the check is then neither parsed nor planned
    /// at each commit. `None` on MariaDB and SQLite.
    pub fn prepared_fence(&self) -> Option<&crate::PreparedFence> {
        self.sql.prepared_fence.as_ref()
    }

    /// [`fence_then_commit`](Statements::fence_then_commit) through
    /// [`prepared_fence`](Statements::prepared_fence): the `EXECUTE` of the prepared check at the
    /// commit (which first fails when the work ended the transaction,
    /// [`TransactionEnded`](crate::TransactionEnded)) and `COMMIT`, parameters inline, for a transaction that began with
    /// [`PreparedFence::begin`](crate::PreparedFence::begin). `None` where there is no prepared
    /// fence.
    ///
    /// # Errors
    /// As [`fence_then_commit`](Statements::fence_then_commit).
    pub fn prepared_fence_then_commit(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        fence: Fence,
    ) -> Option<Result<crate::CommitMessage, crate::InlineError>> {
        let prepared = self.sql.prepared_fence.as_ref()?;
        Some(prepared.commit(&self.fence(name, holder, fence)))
    }

    /// Delete the rows free (released or expired) for longer than `released_for` by the
    /// database's clock: a row is free from its `expires_at` on, which a release sets to its own
    /// time (or to the end of a minimum hold). Parameter: `released_for` in microseconds,
    /// capped as a minimum hold is (about 1,000 years). Answers with its affected rows.
    ///
    /// A row whose fence is not below the clock in microseconds stays: the fence a name gets
    /// when its row is gone is the clock's ([`try_acquire`](Statements::try_acquire)), so
    /// deleting it would let fences go back (a table adopted from a service whose fences were
    /// nanoseconds, or a clock set back since).
    ///
    /// It reads the whole table (no index on `expires_at`): an operator's occasional statement,
    /// not one of the lease operations.
    pub fn prune(&self, released_for: Duration) -> Query<'_> {
        let template = &self.sql.prune;
        Query {
            sql: Cow::Borrowed(&template.sql),
            params: template.params("", "", min_hold_micros(released_for)),
        }
    }

    /// The channel a release notifies (see
    /// [`with_release_notifications`](Statements::with_release_notifications)), with the
    /// released lease's name as the payload: `lease:<table>` (shortened with a hash where that
    /// is longer than PostgreSQL's 63 bytes). `None` on dialects without notifications.
    pub fn release_channel(&self) -> Option<&str> {
        self.notifying.as_ref().map(|(channel, _)| channel.as_str())
    }

    /// Inspect one lease. Parameter: name.
    pub fn inspect<'a>(&'a self, name: &'a LeaseName) -> Query<'a> {
        let template = &self.sql.inspect;
        Query {
            sql: Cow::Borrowed(&template.sql),
            params: template.params(name.as_str(), "", 0),
        }
    }

    /// List every lease with a holder, expired or not (the rows read show which), ordered by name
    /// (bytewise). No parameters.
    pub fn list(&self) -> Query<'_> {
        Query {
            sql: Cow::Borrowed(&self.sql.list),
            params: Vec::new(),
        }
    }

    /// Renew-many for one batch of at most [`Dialect::renew_many_batch`] distinct pairs (see
    /// [`distinct_pairs`](crate::distinct_pairs)); what it returns is
    /// [`Dialect::renew_many_result`].
    ///
    /// Parameters: PostgreSQL `$1` the names and `$2` the holders, each a JSON array of texts
    /// (cast with `::jsonb`), `$3` the TTL in microseconds; MariaDB each name and holder in turn, then the TTL; SQLite `?1`
    /// the TTL, then each name and holder in turn.
    ///
    /// # Panics
    /// When `pairs` is empty or longer than a batch: split the call first.
    pub fn renew_many<'a>(&'a self, pairs: &[(&'a str, &'a str)], ttl: Ttl) -> Query<'a> {
        assert!(
            !pairs.is_empty() && pairs.len() <= self.dialect.renew_many_batch(),
            "a renew-many batch holds 1 to {} pairs, not {}",
            self.dialect.renew_many_batch(),
            pairs.len()
        );
        let micros = ttl_micros(ttl);
        let (sql, params) = match self.dialect {
            Dialect::Postgres => (
                Cow::Borrowed(self.renew_many_full.as_str()),
                postgres::renew_many_params(pairs, micros),
            ),
            Dialect::MySql | Dialect::Sqlite => {
                let sql = if pairs.len() == self.dialect.renew_many_batch() {
                    Cow::Borrowed(self.renew_many_full.as_str())
                } else {
                    Cow::Owned(renew_many_sql(self.dialect, &self.quoted, pairs.len()))
                };
                let params = match self.dialect {
                    Dialect::MySql => mysql::renew_many_params(pairs, micros),
                    _ => sqlite::renew_many_params(pairs, micros),
                };
                (sql, params)
            }
        };
        Query { sql, params }
    }

    /// What [`renew_many`](Statements::renew_many) returns.
    pub fn renew_many_result(&self) -> RenewManyResult {
        self.dialect.renew_many_result()
    }
}

fn renew_many_sql(dialect: Dialect, quoted: &str, pairs: usize) -> String {
    match dialect {
        Dialect::Postgres => postgres::renew_many_sql(quoted),
        Dialect::MySql => mysql::renew_many_sql(quoted, pairs),
        Dialect::Sqlite => sqlite::renew_many_sql(quoted, pairs),
    }
}

/// A fence as the `BIGINT` parameter the statements compare it with. Fences are at most
/// `i64::MAX`: they are read from a `BIGINT` column.
fn fence_param(fence: Fence) -> Param<'static> {
    Param::Int(i64::try_from(fence.get()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Param;

    const DIALECTS: [Dialect; 3] = [Dialect::Postgres, Dialect::MySql, Dialect::Sqlite];

    /// How many parameters the text of a statement asks for.
    fn placeholders(dialect: Dialect, sql: &str) -> usize {
        match dialect {
            Dialect::MySql => sql.matches('?').count(),
            Dialect::Postgres | Dialect::Sqlite => {
                let marker = if dialect == Dialect::Postgres {
                    '$'
                } else {
                    '?'
                };
                sql.match_indices(marker)
                    .filter_map(|(at, _)| {
                        let digits: String = sql[at + 1..]
                            .chars()
                            .take_while(char::is_ascii_digit)
                            .collect();
                        digits.parse::<usize>().ok()
                    })
                    .max()
                    .unwrap_or(0)
            }
        }
    }

    #[test]
    fn every_statement_gets_as_many_parameters_as_it_has_placeholders() {
        let name = LeaseName::new("a").unwrap();
        let holder = HolderId::generate();
        let ttl = Ttl::from_secs(1).unwrap();
        let pairs: Vec<(&str, &str)> = vec![("a", "h"); 3];
        for dialect in DIALECTS {
            let s = Statements::new(dialect, &TableName::default());
            let full: Vec<(&str, &str)> = vec![("a", "h"); dialect.renew_many_batch()];
            for query in [
                s.try_acquire(&name, &holder, ttl),
                s.renew(&name, &holder, ttl),
                s.release(&name, &holder, Duration::from_secs(1)),
                s.inspect(&name),
                s.list(),
                s.fence(&name, &holder, Fence::new(3)),
                s.renew_many(&pairs, ttl),
                s.renew_many(&full, ttl),
            ]
            .into_iter()
            .chain(s.unmatched_fence(&name, Fence::new(3)))
            {
                assert_eq!(
                    placeholders(dialect, query.sql()),
                    query.params().len(),
                    "{dialect:?}: {}",
                    query.sql()
                );
            }
        }
    }

    #[test]
    fn every_placeholder_piece_names_a_parameter_and_each_parameter_is_used() {
        let name = LeaseName::new("a").unwrap();
        let holder = HolderId::generate();
        let ttl = Ttl::from_secs(1).unwrap();
        let pairs: Vec<(&str, &str)> = vec![("a", "h"), ("b", "g")];
        for dialect in DIALECTS {
            let s =
                Statements::new(dialect, &TableName::default()).with_release_notifications(true);
            for query in [
                s.try_acquire(&name, &holder, ttl),
                s.renew(&name, &holder, ttl),
                s.release(&name, &holder, Duration::from_secs(1)),
                s.inspect(&name),
                s.list(),
                s.fence(&name, &holder, Fence::new(3)),
                s.renew_many(&pairs, ttl),
            ]
            .into_iter()
            .chain(s.unmatched_fence(&name, Fence::new(3)))
            {
                let mut used = vec![false; query.params().len()];
                for piece in query.pieces() {
                    match piece {
                        crate::Piece::Param(index) => used[index] = true,
                        crate::Piece::Sql(sql) => {
                            assert!(!sql.contains('$') || sql.contains("'"), "{sql}");
                        }
                    }
                }
                assert!(used.iter().all(|&u| u), "{dialect:?}: {}", query.sql());
            }
        }
    }

    #[test]
    fn the_table_name_is_quoted_everywhere() {
        let table = TableName::new("jobs.Order").unwrap();
        let pg = Statements::new(Dialect::Postgres, &table);
        assert!(
            pg.create_table()
                .starts_with("CREATE TABLE IF NOT EXISTS \"jobs\".\"Order\" (")
        );
        assert!(pg.list().sql().contains("FROM \"jobs\".\"Order\" WHERE"));
        let my = Statements::new(Dialect::MySql, &table);
        assert!(my.create_table().contains("`jobs`.`Order`"));
    }

    #[test]
    fn setup_is_the_ddl_and_on_postgres_runs_under_a_transaction_lock() {
        for dialect in DIALECTS {
            let s = Statements::new(dialect, &TableName::default());
            assert!(s.setup().contains(s.create_table()), "{dialect:?}");
            assert_eq!(
                s.setup().contains("pg_advisory_xact_lock"),
                dialect == Dialect::Postgres,
                "{dialect:?}"
            );
        }
    }

    #[test]
    fn only_postgres_notifies_releases_on_a_channel_of_its_table() {
        let name = LeaseName::new("a").unwrap();
        let holder = HolderId::generate();
        let pg = Statements::new(Dialect::Postgres, &TableName::new("jobs.leases").unwrap());
        assert_eq!(pg.release_channel(), Some("lease:jobs.leases"));
        let release = pg.release(&name, &holder, Duration::ZERO);
        assert!(!release.sql().contains("pg_notify"));
        let release = release.clone();
        let pg = pg.clone().with_release_notifications(true);
        assert!(pg.notifies_releases());
        let notifying = pg.release(&name, &holder, Duration::ZERO);
        assert!(notifying.sql().starts_with(release.sql()));
        assert!(
            notifying
                .sql()
                .contains("pg_notify(E'lease:jobs.leases', name)")
        );
        assert_eq!(notifying.params(), release.params());
        assert_eq!(
            crate::postgres_listen(pg.release_channel().unwrap()),
            r#"LISTEN "lease:jobs.leases""#
        );
        assert_eq!(crate::postgres_listen(r#"a"b"#), r#"LISTEN "a""b""#);
        for dialect in [Dialect::MySql, Dialect::Sqlite] {
            let s =
                Statements::new(dialect, &TableName::default()).with_release_notifications(true);
            assert_eq!(s.release_channel(), None);
            assert!(!s.notifies_releases());
            let release = s.release(&name, &holder, Duration::ZERO);
            assert!(!release.sql().contains("notify"), "{dialect:?}");
        }
    }

    #[test]
    fn long_table_names_get_a_channel_within_the_limit() {
        let long = format!("{}.{}", "s".repeat(63), "t".repeat(63));
        let other = format!("{}.{}u", "s".repeat(63), "t".repeat(62));
        let channel = |table: &str| {
            Statements::new(Dialect::Postgres, &TableName::new(table).unwrap())
                .release_channel()
                .unwrap()
                .to_owned()
        };
        assert!(channel(&long).len() <= 63, "{}", channel(&long));
        assert_ne!(channel(&long), channel(&other));
        // The same in every process and every version (the listener's and the notifier's,
        // one of them perhaps upgraded already): a fixed hash.
        assert_eq!(
            channel(&long),
            "lease:ssssssssssssssssssssssssssssssssssssssss~e733295fe547d82e"
        );
    }

    #[test]
    fn mariadb_binds_each_placeholder_in_text_order() {
        let s = Statements::new(Dialect::MySql, &TableName::default());
        let name = LeaseName::new("n").unwrap();
        let holder = HolderId::from_stored("h");
        let ttl = Ttl::from_millis(2).unwrap();
        assert_eq!(
            s.try_acquire(&name, &holder, ttl).params(),
            [
                Param::text("n"),
                Param::text("h"),
                Param::Int(2000),
                Param::text("h")
            ]
        );
        assert_eq!(
            s.renew(&name, &holder, ttl).params(),
            [Param::Int(2000), Param::text("n"), Param::text("h")]
        );
        assert_eq!(
            s.renew_many(&[("n", "h"), ("m", "g")], ttl).params(),
            [
                Param::text("n"),
                Param::text("h"),
                Param::text("m"),
                Param::text("g"),
                Param::Int(2000)
            ]
        );
    }

    #[test]
    fn the_expiry_is_assigned_last_in_the_mariadb_upsert() {
        let s = Statements::new(Dialect::MySql, &TableName::default());
        let (name, holder) = (LeaseName::new("n").unwrap(), HolderId::generate());
        let sql = s.try_acquire(&name, &holder, Ttl::MIN).sql;
        let update = &sql[sql.find("ON DUPLICATE KEY UPDATE").unwrap()..];
        let position = |column: &str| update.find(&format!("{column} = IF(")).unwrap();
        assert!(position("fence") < position("taken_at"));
        assert!(position("taken_at") < position("holder"));
        assert!(position("holder") < position("expires_at"));
    }

    #[test]
    #[should_panic(expected = "a renew-many batch holds")]
    fn an_oversized_renew_many_batch_is_refused() {
        let s = Statements::new(Dialect::Sqlite, &TableName::default());
        let pairs = vec![("a", "h"); Dialect::Sqlite.renew_many_batch() + 1];
        let _ = s.renew_many(&pairs, Ttl::MIN);
    }
}
