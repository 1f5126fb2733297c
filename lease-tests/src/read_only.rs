//! A MariaDB server set read-only (`SET GLOBAL read_only = ON`), as a replica is or a primary a
//! switchover demoted: the store's account is refused every write, the connection that answered
//! the refusal is closed rather than given back to the pool, and once the server takes writes
//! again the same store works on, without being rebuilt. An account with `READ ONLY ADMIN` (on
//! MariaDB before 10.11: `SUPER`, which held it) writes through `read_only`, which is why the
//! store's account must not have it.
//!
//! Each case runs on any SQL store (lease-sql's [`SqlStore`] over a driver's [`Execute`]) on a
//! private server ([`MariaDbServer`](crate::server::MariaDbServer): it changes the server's
//! global state), and reaches the database only through the stores' executors, so every driver
//! runs the same cases. The caller gives a store on the server's `root` account, its URL, and how
//! to make a store on the same table with a pool of one connection at another URL: with one
//! connection, the connection a statement ran on is the one the next statement finds, unless the
//! executor closed it.
//!
//! [`demoted_sessions_cost_no_call`] needs no private server: it leaves the sessions of one
//! store's pool read-only on the shared server, as a demotion that keeps them open does, and
//! runs on PostgreSQL and MariaDB.

use std::time::{Duration, Instant};

use lease_core::runtime::Runtime;
use lease_core::{
    BoxError, Error, HolderId, LeaseClient, LeaseHandle, LeaseName, LeaseStore, Operation,
    StoreErrorKind, Ttl,
};
use lease_sql::{Dialect, Execute, Query, SqlStore};

/// Runs `case` on a throwaway MariaDB server, on a tokio runtime of its own, and panics with
/// its error: `case` gets a store on a fresh table as the server's `root` (made by `connect`
/// from the server's URL and the table's name), the URL, and the table's name, for the stores
/// of other accounts. Skips (or fails, under `LEASE_TEST_REQUIRE_ALL`) where no server starts.
///
/// # Panics
/// When the case fails, naming its error.
#[cfg(feature = "runtime-tokio")]
pub fn on_private_server<X, C, F>(connect: C, case: F)
where
    X: Execute,
    C: AsyncFnOnce(&str, &str) -> Result<SqlStore<X>, BoxError>,
    F: AsyncFnOnce(&SqlStore<X>, &str, &str) -> Result<(), BoxError>,
{
    let server = match crate::server::MariaDbServer::start() {
        Ok(server) => server,
        Err(error) => return crate::env::skip_or_fail("private mariadb", &error.to_string()),
    };
    let url = server.url();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let outcome = runtime.block_on(async {
        let table = crate::env::unique_table("read_only");
        let root = connect(&url, &table).await?;
        case(&root, &url, &table).await
    });
    // The stores' connections go with their runtime, before the server they lead to.
    drop(runtime);
    drop(server);
    if let Err(error) = outcome {
        panic!("mariadb: {error}");
    }
}

/// The password of the accounts the cases make.
const PASSWORD: &str = "lease-app-password";

/// The connections of the pool [`demoted_sessions_cost_no_call`] leaves read-only.
const DEMOTED_POOL: u32 = 4;

/// How long a closed connection may take to leave the server's process list.
const GONE_WITHIN: Duration = Duration::from_secs(10);

/// What an account the cases make may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rights {
    /// What the store needs: `SELECT, INSERT, UPDATE` on its table, and nothing global.
    Store,
    /// The store's rights and `READ ONLY ADMIN`, which writes through `read_only`.
    ReadOnlyAdmin,
}

/// `url` with `account` and the cases' password as its user.
///
/// # Errors
/// When `url` has no `scheme://`.
pub fn as_account(url: &str, account: &str) -> Result<String, BoxError> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("not a URL: {url}"))?;
    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    Ok(format!("{scheme}://{account}:{PASSWORD}@{host}"))
}

/// Creates `account` on `root`'s server with `rights` on `table` (and `SELECT, INSERT` on each
/// of `more`), and answers its URL.
async fn account<X: Execute>(
    root: &SqlStore<X>,
    url: &str,
    account: &str,
    rights: Rights,
    more: &[&str],
) -> Result<String, BoxError> {
    let user = format!("'{account}'@'%'");
    let mut sql = vec![
        format!("CREATE USER {user} IDENTIFIED BY '{PASSWORD}'"),
        format!("GRANT SELECT, INSERT, UPDATE ON {} TO {user}", root.table()),
    ];
    for table in more {
        sql.push(format!("GRANT SELECT, INSERT ON {table} TO {user}"));
    }
    if rights == Rights::ReadOnlyAdmin {
        sql.push(format!("GRANT READ ONLY ADMIN ON *.* TO {user}"));
    }
    for statement in sql {
        root.executor().batch(&statement).await?;
    }
    as_account(url, account)
}

/// Sets the server's `read_only`.
async fn set_read_only<X: Execute>(root: &SqlStore<X>, on: bool) -> Result<(), BoxError> {
    let value = if on { "ON" } else { "OFF" };
    root.executor()
        .batch(&format!("SET GLOBAL read_only = {value}"))
        .await
}

/// The server's id of the connection `store`'s next statement runs on.
async fn connection_id<X: Execute>(store: &SqlStore<X>) -> Result<i64, BoxError> {
    let ids = store
        .executor()
        .ints(Query::new(
            "SELECT CAST(CONNECTION_ID() AS SIGNED)",
            Vec::new(),
        ))
        .await?;
    match ids[..] {
        [id] => Ok(id),
        _ => Err(format!("CONNECTION_ID() answered {ids:?}").into()),
    }
}

/// The server's ids of the connections `account` has open, read as `root`.
async fn connections_of<X: Execute>(
    root: &SqlStore<X>,
    account: &str,
) -> Result<Vec<i64>, BoxError> {
    root.executor()
        .ints(Query::new(
            format!(
                "SELECT CAST(ID AS SIGNED) FROM information_schema.PROCESSLIST \
                 WHERE USER = '{account}' ORDER BY ID"
            ),
            Vec::new(),
        ))
        .await
}

/// Waits, at most [`GONE_WITHIN`], until the server no longer lists connection `id` of
/// `account`: it was closed, not kept idle in a pool.
async fn closed<X: Execute>(
    root: &SqlStore<X>,
    account: &str,
    id: i64,
    runtime: &impl Runtime,
) -> Result<(), BoxError> {
    const PAUSE: Duration = Duration::from_millis(50);
    let started = Instant::now();
    let mut open = Vec::new();
    // At most one look per pause, for at most GONE_WITHIN.
    for _ in 0..=GONE_WITHIN.as_millis() / PAUSE.as_millis() {
        open = connections_of(root, account).await?;
        if !open.contains(&id) {
            return Ok(());
        }
        if started.elapsed() > GONE_WITHIN {
            break;
        }
        runtime.sleep(PAUSE).await;
    }
    Err(format!(
        "connection {id} of {account} is still open after {GONE_WITHIN:?} (open: {open:?})"
    )
    .into())
}

/// `answer` is a store error of `operation` and of kind `ReadOnly`.
fn refused_as_read_only<T: std::fmt::Debug>(
    what: &str,
    operation: Operation,
    answer: Result<T, Error>,
) -> Result<(), BoxError> {
    match answer {
        Err(
            error @ Error::Store {
                operation: failed, ..
            },
        ) if failed == operation && error.store_error_kind() == Some(StoreErrorKind::ReadOnly) => {
            Ok(())
        }
        other => Err(format!("{what} on a read-only server answered {other:?}").into()),
    }
}

fn name(name: &str) -> LeaseName {
    LeaseName::new(name).expect("a valid name")
}

/// The store's account (only `SELECT, INSERT, UPDATE` on the table) takes a lease; the server is
/// set read-only; its renewal and an acquisition are refused with errors of kind `ReadOnly`,
/// and after each the connection that answered is gone: the store's next statement runs on
/// another connection, and the server no longer lists the old one. (The control: while the
/// server takes writes, the store's statements keep finding the same connection.) Once the
/// server takes writes again, the same store renews the lease it held and takes another.
///
/// `root` is a store on a fresh table of `url`'s server, as `root`; `connect` makes a store on
/// the same table with a pool of one connection at the URL it is given. The case creates the
/// table and an account, and leaves the server read-write.
///
/// # Errors
/// A description of the first thing that went otherwise.
///
/// # Cancel safety
/// Not cancel safe: dropped while the server is read-only, it leaves it so, refusing the writes of
/// every account without `READ ONLY ADMIN`, until something sets `read_only` back or the server
/// stops. The account it made stays, as after the case, and the lease it took lapses after its TTL
/// of a minute.
pub async fn read_only_refuses_the_store_and_closes_its_connection<X, C>(
    root: &SqlStore<X>,
    url: &str,
    connect: C,
    runtime: impl Runtime,
) -> Result<(), BoxError>
where
    X: Execute,
    C: AsyncFn(&str) -> Result<SqlStore<X>, BoxError>,
{
    root.setup().await?;
    let user = crate::env::unique_table("lease_app");
    let app = connect(&account(root, url, &user, Rights::Store, &[]).await?).await?;
    let ttl = Ttl::from_secs(60)?;
    let (held, other) = (name("nightly"), name("digest"));
    let holder = HolderId::generate();
    let fence = app
        .try_acquire(&held, &holder, ttl)
        .await?
        .ok_or("a fresh lease was not free")?;

    // The control: a connection that answered well stays in the pool.
    let first = connection_id(&app).await?;
    if connection_id(&app).await? != first || app.pool_state().size != 1 {
        return Err(format!(
            "the pool of one did not keep its connection {first}: {:?}",
            app.pool_state()
        )
        .into());
    }

    set_read_only(root, true).await?;
    let outcome = async {
        refused_as_read_only(
            "renew",
            Operation::Renew,
            app.renew(&held, &holder, ttl).await,
        )?;
        let second = connection_id(&app).await?;
        if second == first {
            return Err(format!("connection {first} answered read-only and was kept").into());
        }
        closed(root, &user, first, &runtime).await?;
        refused_as_read_only(
            "try_acquire",
            Operation::Acquire,
            app.try_acquire(&other, &HolderId::generate(), ttl).await,
        )?;
        let third = connection_id(&app).await?;
        if third == second {
            return Err(format!("connection {second} answered read-only and was kept").into());
        }
        closed(root, &user, second, &runtime).await
    }
    .await;
    set_read_only(root, false).await?;
    outcome?;

    // The same store, not rebuilt, works again.
    if !app.renew(&held, &holder, ttl).await? {
        return Err("the lease held through the read-only spell did not renew".into());
    }
    let row = app.inspect(&held).await?.ok_or("the held lease is gone")?;
    if row.holder != holder || row.fence != fence {
        return Err(format!("the held lease reads {row:?}").into());
    }
    if app
        .try_acquire(&other, &HolderId::generate(), ttl)
        .await?
        .is_none()
    {
        return Err("a free lease was not taken once the server took writes again".into());
    }
    Ok(())
}

/// The control of the read-only cases: with the server read-only, the store's account is refused
/// while an account with the same rights and `READ ONLY ADMIN` writes through it, takes and
/// renews a lease, and keeps its connection. The reason the store's account must not have that
/// privilege (nor, before MariaDB 10.11, `SUPER`): a store on a replica set read-only would take
/// leases there that the primary never sees.
///
/// The arguments are those of [`read_only_refuses_the_store_and_closes_its_connection`].
///
/// # Errors
/// A description of the first thing that went otherwise.
///
/// # Cancel safety
/// Not cancel safe, as [`read_only_refuses_the_store_and_closes_its_connection`]: dropped while the
/// server is read-only, it leaves it so. The two accounts it made stay, as after the case.
pub async fn read_only_admin_writes_through_read_only<X, C>(
    root: &SqlStore<X>,
    url: &str,
    connect: C,
) -> Result<(), BoxError>
where
    X: Execute,
    C: AsyncFn(&str) -> Result<SqlStore<X>, BoxError>,
{
    root.setup().await?;
    let plain = crate::env::unique_table("lease_app");
    let admin = crate::env::unique_table("lease_admin");
    let app = connect(&account(root, url, &plain, Rights::Store, &[]).await?).await?;
    let privileged =
        connect(&account(root, url, &admin, Rights::ReadOnlyAdmin, &[]).await?).await?;
    let ttl = Ttl::from_secs(60)?;
    let kept = connection_id(&privileged).await?;

    set_read_only(root, true).await?;
    let outcome = async {
        refused_as_read_only(
            "the store's account's try_acquire",
            Operation::Acquire,
            app.try_acquire(&name("nightly"), &HolderId::generate(), ttl)
                .await,
        )?;
        let holder = HolderId::generate();
        privileged
            .try_acquire(&name("nightly"), &holder, ttl)
            .await?
            .ok_or("READ ONLY ADMIN did not take a free lease on a read-only server")?;
        if !privileged.renew(&name("nightly"), &holder, ttl).await? {
            return Err("READ ONLY ADMIN did not renew on a read-only server".into());
        }
        let now = connection_id(&privileged).await?;
        if now != kept {
            return Err(
                format!("READ ONLY ADMIN's connection {kept} was replaced by {now}").into(),
            );
        }
        Ok(())
    }
    .await;
    set_read_only(root, false).await?;
    outcome
}

/// The driver's fenced function on a read-only server: a fenced transaction whose commit (and
/// its check) the server refuses fails with a store error of [`Operation::Fence`] and kind
/// `ReadOnly`, nothing is committed, and its connection is closed, not given back to the pool;
/// once the server takes writes again the same store's fenced writes commit. The control: a
/// fenced transaction refused because the lease expired by the database's clock
/// ([`Error::NotHeld`], the server's answer but not a read-only one) gives its connection back.
///
/// The work of the refused transaction reads (a `SELECT`): a write of its own would be refused
/// first, as the work's own error. `write` runs one fenced transaction through the driver's
/// fenced function, on the store, under the lease, with work that runs the statement it is
/// given (no parameters, no rows read), taking its connection from the store's pool and giving
/// it back (or closing it) before it answers. The leases come
/// from a client on `root` (whose renewals the server's `read_only` does not stop), made on
/// `runtime`. The other arguments are those of
/// [`read_only_refuses_the_store_and_closes_its_connection`].
///
/// # Errors
/// A description of the first thing that went otherwise.
///
/// # Cancel safety
/// Not cancel safe, as [`read_only_refuses_the_store_and_closes_its_connection`]: dropped while the
/// server is read-only, it leaves it so. The guards of its client on `root` are released in the
/// background, and a fenced write cut off before its commit commits nothing, as the driver rolls
/// back the dropped transaction; the notes table and the account stay, as after the case.
pub async fn fenced_commit_on_read_only_closes_its_connection<X, C, W, R>(
    root: &SqlStore<X>,
    url: &str,
    connect: C,
    write: W,
    runtime: R,
) -> Result<(), BoxError>
where
    X: Execute + Clone,
    C: AsyncFn(&str) -> Result<SqlStore<X>, BoxError>,
    W: AsyncFn(&SqlStore<X>, &LeaseHandle, &str) -> Result<(), BoxError>,
    R: Runtime + Clone,
{
    root.setup().await?;
    let notes = format!("{}_notes", root.table().table());
    root.executor()
        .batch(&format!("CREATE TABLE {notes} (n BIGINT NOT NULL)"))
        .await?;
    let user = crate::env::unique_table("lease_app");
    let app = connect(&account(root, url, &user, Rights::Store, &[&notes]).await?).await?;
    let client = LeaseClient::new(root.clone(), runtime.clone());
    let guard = client
        .try_acquire("ledger")
        .await?
        .ok_or("a fresh lease was not free")?;
    let insert = format!("INSERT INTO {notes} (n) VALUES (1)");
    let read = format!("SELECT n FROM {notes}");
    let notes_written = async || -> Result<usize, BoxError> {
        let rows = root
            .executor()
            .ints(Query::new(format!("SELECT n FROM {notes}"), Vec::new()))
            .await?;
        Ok(rows.len())
    };

    // A fenced write that commits gives its connection back.
    let first = connection_id(&app).await?;
    write(&app, &guard.handle(), &insert).await?;
    if connection_id(&app).await? != first || notes_written().await? != 1 {
        return Err("a committed fenced write did not give its connection back".into());
    }

    // The control: a refusal by the lease's row, not by the server, keeps the connection.
    let expired = client
        .try_acquire("expired")
        .await?
        .ok_or("a fresh lease was not free")?;
    root.executor()
        .batch(&format!(
            "UPDATE {} SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND \
             WHERE name = 'expired'",
            root.table()
        ))
        .await?;
    match write(&app, &expired.handle(), &read).await {
        Err(error) if matches!(error.downcast_ref(), Some(Error::NotHeld { .. })) => {}
        other => {
            return Err(format!("a fenced write under an expired lease answered {other:?}").into());
        }
    }
    if connection_id(&app).await? != first {
        return Err("a fenced write refused by the lease's row closed its connection".into());
    }

    set_read_only(root, true).await?;
    let outcome = async {
        match write(&app, &guard.handle(), &read).await {
            Err(error)
                if matches!(
                    error.downcast_ref(),
                    Some(error @ Error::Store { operation: Operation::Fence, .. })
                        if error.store_error_kind() == Some(StoreErrorKind::ReadOnly)
                ) => {}
            other => {
                return Err(
                    format!("a fenced write on a read-only server answered {other:?}").into(),
                );
            }
        }
        let next = connection_id(&app).await?;
        if next == first {
            return Err(format!(
                "connection {first} answered the fenced commit read-only and was kept"
            )
            .into());
        }
        closed(root, &user, first, &runtime).await
    }
    .await;
    set_read_only(root, false).await?;
    outcome?;

    write(&app, &guard.handle(), &insert).await?;
    if notes_written().await? != 2 {
        return Err("the fenced writes after the read-only spell did not commit once".into());
    }
    guard.release().await?;
    drop(expired);
    client.shutdown(Duration::from_secs(5)).await;
    Ok(())
}

/// The statements that leave one session refusing writes for the rest of its life, as the
/// sessions a demotion left open to a primary it set read-only do, and then hold its connection
/// for a moment, so that sessions made read-only at once are distinct connections; `None` on
/// SQLite, which has no primary to demote (and on a dialect this version does not know).
fn read_only_session(dialect: Dialect) -> Option<ReadOnlySession> {
    match dialect {
        Dialect::Postgres => Some(ReadOnlySession {
            set: "SET default_transaction_read_only = on; SELECT pg_sleep(0.3)",
            probe: "SELECT CAST(CASE WHEN current_setting('transaction_read_only') = 'on' \
                    THEN 1 ELSE 0 END AS int8) FROM pg_sleep(0.3)",
        }),
        Dialect::MySql => Some(ReadOnlySession {
            set: "SET SESSION TRANSACTION READ ONLY; DO SLEEP(0.3)",
            probe: "SELECT CAST(@@session.tx_read_only AS SIGNED) FROM (SELECT SLEEP(0.3)) AS s",
        }),
        // SQLite, in process, has no session to demote, and a dialect this version does not
        // know no statements to make a session read-only.
        _ => None,
    }
}

/// How [`demoted_sessions_cost_no_call`] leaves a session read-only, and reads back whether it
/// is (one row, `1` if so), each holding its connection for a moment.
struct ReadOnlySession {
    set: &'static str,
    probe: &'static str,
}

/// A demotion that leaves the old primary's sessions open (a failover tool's
/// `SET GLOBAL read_only = ON`, a reloaded `default_transaction_read_only`): every connection
/// of a store's pool refuses writes, while the connections the pool opens from then on reach a
/// primary that takes them. Made here on the shared server by setting each of the pool's
/// sessions read-only (all four of its pool, at once), which is what such a
/// demotion leaves behind, with no server to demote.
///
/// A renewal of a lease held before goes through in one call: each connection that refused it
/// was closed, and the statement sent again on the next, then on a new one. Before, each stale
/// connection failed a call of its own (a holder's renewal a quarter period apart, so that a
/// pool of ten cost a lease its validity). Then four acquisitions at once all succeed:
/// no stale connection is left in the pool.
///
/// # Errors
/// A [`CaseFailure`](crate::CaseFailure) when the sessions cannot be made read-only, the pool
/// does not then hold four connections that all read as read-only (so that the
/// renewal can only go through by sending its statement again), the renewal fails or answers
/// that the lease is not held, the holder or fence of the row changed, or an acquisition
/// afterwards fails.
///
/// It runs on a store of `ctx`'s backend over a pool of four connections.
///
/// # Cancel safety
/// Not cancel safe: dropped, it leaves the pool's sessions read-only (the store's next calls
/// close them one by one, as here) and its lease to lapse after its TTL of a minute.
pub async fn demoted_sessions_cost_no_call<B, X>(ctx: &crate::Context<B>) -> crate::CaseResult
where
    B: crate::TestBackend<Store = SqlStore<X>>,
    X: Execute,
{
    let Some(pooled) = ctx.pooled(DEMOTED_POOL).await? else {
        return Ok(crate::Verdict::NotApplicable(format!(
            "{} has no pool",
            ctx.backend().name()
        )));
    };
    let (store, connections) = (&**pooled.store(), DEMOTED_POOL);
    let dialect = store.executor().dialect();
    let Some(session) = read_only_session(dialect) else {
        return Ok(crate::Verdict::NotApplicable(format!(
            "{dialect:?} has no primary to demote"
        )));
    };
    let ttl = Ttl::from_secs(60)?;
    let (held, holder) = (name("nightly"), HolderId::generate());
    let fence = store
        .try_acquire(&held, &holder, ttl)
        .await?
        .ok_or_else(|| crate::CaseFailure::new("a fresh lease was not free"))?;

    let sessions = (0..connections).map(|_| store.executor().batch(session.set));
    for made in futures::future::join_all(sessions).await {
        made?;
    }
    // Every connection of the pool refuses writes now, or the renewal below could find one that
    // does not and pass without sending anything again: asked at once, each probe holds a
    // connection of its own.
    let probes =
        (0..connections).map(|_| store.executor().ints(Query::new(session.probe, Vec::new())));
    let mut read_only = 0;
    for answer in futures::future::join_all(probes).await {
        if answer? == [1] {
            read_only += 1;
        }
    }
    let stale = store.pool_state().size;
    if read_only != connections || stale != connections {
        return Err(crate::CaseFailure::new(format!(
            "{read_only} of {connections} sessions read as read-only, the pool holding {stale}: \
             the case needs every connection of the pool refusing writes"
        )));
    }
    // Idle in the pool, as a demotion leaves them: a driver gives a connection back in the
    // background (sqlx), so the probes' may not all be back yet.
    let limit = Instant::now() + GONE_WITHIN;
    while store.pool_state().idle < connections {
        if Instant::now() > limit {
            return Err(crate::CaseFailure::new(format!(
                "the pool's connections did not all come back idle within {GONE_WITHIN:?}: {:?}",
                store.pool_state()
            )));
        }
        ctx.sleep(Duration::from_millis(10)).await;
    }

    match store.renew(&held, &holder, ttl).await {
        Ok(true) => {}
        other => {
            return Err(crate::CaseFailure::new(format!(
                "with {stale} connections of the pool refusing writes, the renewal answered \
                 {other:?}: each refusal failed the call instead of closing its connection and \
                 sending the statement on the next"
            )));
        }
    }
    let row = store.inspect(&held).await?;
    if !row
        .as_ref()
        .is_some_and(|row| row.holder == holder && row.fence == fence)
    {
        return Err(crate::CaseFailure::new(format!(
            "the renewed lease reads {row:?}"
        )));
    }
    let names: Vec<LeaseName> = (0..connections)
        .map(|n| name(&format!("after-{n}")))
        .collect();
    let taken = names
        .iter()
        .map(|lease| store.try_acquire(lease, &holder, ttl));
    for (lease, answer) in names.iter().zip(futures::future::join_all(taken).await) {
        if !matches!(answer, Ok(Some(_))) {
            return Err(crate::CaseFailure::new(format!(
                "acquiring {lease} once the renewal went through answered {answer:?}: a \
                 connection refusing writes was left in the pool"
            )));
        }
    }
    Ok(crate::Verdict::Passed)
}
