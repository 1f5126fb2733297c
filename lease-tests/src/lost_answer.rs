//! A fenced commit whose answer is lost: the commit reaches the server, which commits, and the
//! connection breaks before the answer reaches the client. The store must not report it as a
//! failure that committed nothing (a transient error a retry loop runs the work again for, the
//! second run of a job that does damage twice): its error is of the kind
//! [`OutcomeUnknown`](StoreErrorKind::OutcomeUnknown), and not transient. The lease stays held
//! and the store works on.
//!
//! The case runs on any SQL store over a network (lease-sql's [`SqlStore`] over a driver's
//! [`Execute`]): the store's connections go through a [`FaultProxy`] that lets the commit
//! through and holds its answer ([`FaultProxy::hold_answers`]) until the commit shows from
//! another connection, then cuts them. [`judge`] is its verdict on what the write answered,
//! a function of its own so that its negative controls (an answer that reads as "nothing
//! committed" fails it) run without a server.
//!
//! Not for SQLite: it runs in the process, with no connection whose answer could be lost or
//! that a server could kill; the drivers' test files run the cases on PostgreSQL and MariaDB
//! only, and say so.

use std::time::{Duration, Instant};

use lease_core::runtime::Runtime;
use lease_core::{
    BoxError, Error, HolderId, LeaseClient, LeaseHandle, LeaseName, LeaseStore, Operation,
    StoreErrorKind, Ttl,
};
use lease_sql::{CheckAt, Execute, Query, SqlStore};

use crate::proxy::FaultProxy;

/// How long the held commit may take to show from another connection.
const COMMITTED_WITHIN: Duration = Duration::from_secs(10);

/// How often the other connection looks.
const POLL: Duration = Duration::from_millis(10);

/// The case, on the server at `url`, once for each place of the check ([`CheckAt::Commit`]:
/// the check and the `COMMIT` in one message; [`CheckAt::Begin`]: the `COMMIT` after the check
/// with the `BEGIN`, in one message with what goes before it where the dialect needs it).
/// `connect` makes a store on a table (the URL and the table's name; a pool of one connection
/// keeps the case simple) and is called twice a place: for the store the
/// lease and the checks use, at `url`, and for the store the writes go through, at the proxy's
/// URL. `write` runs `sql` (an insert) in a fenced transaction checked where it is told,
/// through the store it is given, under the lease, and calls its last argument once the insert
/// ran, before the commit: the case then holds the answers.
///
/// # Errors
/// A description of the first thing that went otherwise, naming the place of the check.
///
/// # Cancel safety
/// Not cancel safe: dropped while the proxy holds the commit's answer, the proxy goes with it
/// and the write answers with an error; the lease is released in the background and the notes
/// table stays.
pub async fn fenced_commit_whose_answer_is_lost<X, C, W, R>(
    url: &str,
    connect: C,
    write: W,
    runtime: R,
) -> Result<(), BoxError>
where
    X: Execute + Clone,
    C: AsyncFn(&str, &str) -> Result<SqlStore<X>, BoxError>,
    W: AsyncFn(
        CheckAt,
        &SqlStore<X>,
        &LeaseHandle,
        &str,
        &(dyn Fn() + Sync),
    ) -> Result<(), BoxError>,
    R: Runtime + Clone,
{
    for at in [CheckAt::Commit, CheckAt::Begin] {
        lost_at(at, url, &connect, &write, runtime.clone())
            .await
            .map_err(|error| format!("the check at {at:?}: {error}"))?;
    }
    Ok(())
}

/// The case with the check at `at`.
async fn lost_at<X, C, W, R>(
    at: CheckAt,
    url: &str,
    connect: &C,
    write: &W,
    runtime: R,
) -> Result<(), BoxError>
where
    X: Execute + Clone,
    C: AsyncFn(&str, &str) -> Result<SqlStore<X>, BoxError>,
    W: AsyncFn(
        CheckAt,
        &SqlStore<X>,
        &LeaseHandle,
        &str,
        &(dyn Fn() + Sync),
    ) -> Result<(), BoxError>,
    R: Runtime + Clone,
{
    let table = crate::env::unique_table("lost_answer");
    let direct = connect(url, &table).await?;
    direct.setup().await?;
    let notes = format!("{table}_notes");
    direct
        .executor()
        .batch(&format!("CREATE TABLE {notes} (n BIGINT NOT NULL)"))
        .await?;
    let proxy = FaultProxy::in_front_of(url)?;
    let proxied = connect(&proxy.rewrite_url(url), &table).await?;
    let client = LeaseClient::new(direct.clone(), runtime.clone());
    let guard = client
        .try_acquire("notice")
        .await?
        .ok_or("a fresh lease was not free")?;
    let handle = guard.handle();
    let insert = format!("INSERT INTO {notes} (n) VALUES (1)");
    let written = async || -> Result<usize, BoxError> {
        let rows = direct
            .executor()
            .ints(Query::new(format!("SELECT n FROM {notes}"), Vec::new()))
            .await?;
        Ok(rows.len())
    };

    // The control: with the answers passing, the write commits and says so.
    write(at, &proxied, &handle, &insert, &|| {}).await?;
    if written().await? != 1 {
        return Err("a fenced write that answered Ok did not commit".into());
    }

    // The commit goes through, its answer is held until the commit shows, then cut.
    let hold = || proxy.hold_answers();
    let cut_once_committed = async {
        let deadline = Instant::now() + COMMITTED_WITHIN;
        let committed = loop {
            if written().await? == 2 {
                break true;
            }
            if Instant::now() > deadline {
                break false;
            }
            runtime.sleep(POLL).await;
        };
        proxy.cut();
        Ok::<_, BoxError>(committed)
    };
    let (answer, committed) = futures::join!(
        write(at, &proxied, &handle, &insert, &hold),
        cut_once_committed
    );
    proxy.pass();
    if !committed? {
        return Err(format!(
            "the commit whose answer was held did not show within {COMMITTED_WITHIN:?}"
        )
        .into());
    }
    if answer.is_ok() {
        return Err(
            "the fenced write answered Ok while its answer was held: its connection \
             does not go through the proxy (a driver that moves to the server's Unix socket?)"
                .into(),
        );
    }
    judge(&answer)?;
    if !guard.is_held() {
        return Err("a fenced commit whose answer was lost marked the lease lost".into());
    }
    // The client counts a check whose answer was lost with the commit's as unknown; a check
    // made before the commit passed.
    let checks = client.stats().fenced_checks;
    let counted = (checks.passed, checks.unknown);
    let expected = match at {
        CheckAt::Commit => (1, 1),
        _ => (2, 0),
    };
    if counted != expected {
        return Err(format!(
            "the client counted {checks:?} after a fenced write and a lost answer, \
             not (passed, unknown) = {expected:?}"
        )
        .into());
    }

    // The lease is still held, and the store's pool opens a new connection for the next write.
    write(at, &proxied, &handle, &insert, &|| {}).await?;
    if written().await? != 3 {
        return Err("the fenced write after the lost answer did not commit".into());
    }
    guard.release().await?;
    direct
        .executor()
        .batch(&format!("DROP TABLE {notes}"))
        .await?;
    Ok(())
}

/// How long the killed statement would sleep if nobody killed it.
const SLEEP_SECONDS: u32 = 30;

/// A statement whose connection the server kills while it runs (MariaDB's `KILL`,
/// PostgreSQL's `pg_terminate_backend`, what an operator or a failover tool does) fails with an
/// error the store's executor reads as [`Transient`](StoreErrorKind::Transient) (the next
/// connection may work), whose answer is lost ([`Execute::answer_lost`]: had it been a
/// commit, it might have committed). `connect` makes a store on a table at `url` with a pool
/// of one connection, so that the statements of one store share its connection; it is called
/// twice, for the store whose connection is killed and for the one that kills it; `runtime`
/// paces the wait for the statement to run.
///
/// # Errors
/// A description of the first thing that went otherwise.
///
/// # Cancel safety
/// Cancel safe: dropped half-way, the sleeping statement ends by itself within
/// 30 s, and nothing is left behind.
pub async fn killed_under_a_statement<X, C, R>(
    url: &str,
    connect: C,
    runtime: R,
) -> Result<(), BoxError>
where
    X: Execute + Clone,
    C: AsyncFn(&str, &str) -> Result<SqlStore<X>, BoxError>,
    R: Runtime,
{
    let table = crate::env::unique_table("killed");
    let victim = connect(url, &table).await?;
    let killer = connect(url, &table).await?;
    let (who, sleep, busy, kill): (&str, String, &str, &str) = match victim.executor().dialect() {
        lease_sql::Dialect::Postgres => (
            "SELECT pg_backend_pid()::int8",
            format!("SELECT pg_sleep({SLEEP_SECONDS})"),
            "SELECT count(*)::int8 FROM pg_stat_activity WHERE pid = {id} AND state = 'active'",
            "SELECT pg_terminate_backend({id})",
        ),
        lease_sql::Dialect::MySql => (
            "SELECT CAST(CONNECTION_ID() AS SIGNED)",
            format!("SELECT SLEEP({SLEEP_SECONDS})"),
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = {id} AND COMMAND = 'Query'",
            "KILL {id}",
        ),
        other => {
            return Err(format!("{other:?} has no connection to kill").into());
        }
    };
    let id = victim
        .executor()
        .ints(Query::new(who.to_owned(), Vec::new()))
        .await?
        .first()
        .copied()
        .ok_or("no connection id")?;
    let killing = async {
        let deadline = Instant::now() + COMMITTED_WITHIN;
        loop {
            let running = killer
                .executor()
                .ints(Query::new(
                    busy.replace("{id}", &id.to_string()),
                    Vec::new(),
                ))
                .await?;
            if running.first() == Some(&1) {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("connection {id} never ran the sleep").into());
            }
            runtime.sleep(POLL).await;
        }
        killer
            .executor()
            .batch(&kill.replace("{id}", &id.to_string()))
            .await?;
        Ok::<_, BoxError>(())
    };
    let (slept, killed) = futures::join!(victim.executor().batch(&sleep), killing);
    killed?;
    let error = match slept {
        Ok(()) => return Err(format!("the sleep of connection {id} outlived its killing").into()),
        Err(error) => error,
    };
    let kind = victim.executor().classify(&*error);
    if kind != StoreErrorKind::Transient {
        return Err(format!(
            "a statement whose connection was killed failed with {error:?} ({error}), \
             read as {kind:?}, not as transient"
        )
        .into());
    }
    if !victim.executor().answer_lost(&*error) {
        return Err(format!(
            "a statement whose connection was killed failed with {error:?} ({error}), \
             read as answered"
        )
        .into());
    }
    Ok(())
}

/// How long the proxy delays each chunk in [`acquire_whose_answer_is_lost`]: long enough to
/// see the acquisition's row before its answer comes back.
const ANSWER_DELAY: Duration = Duration::from_millis(700);

/// An acquisition whose statement took the lease and whose answer was lost (the connection
/// broke on its way back) answers an error of the kind
/// [`OutcomeUnknown`](StoreErrorKind::OutcomeUnknown): the lease may be taken for a holder
/// nobody renews, which a client gives back rather than leave everybody out for a TTL (a
/// transient error would leave it taken). `connect` makes a store on a table (a pool of one
/// connection) and is called twice: at `url`, to watch the row, and at a proxy's URL that
/// delays every chunk, for the acquisition, whose connection the proxy cuts once the row
/// shows the acquisition's holder. `runtime` paces the watch.
///
/// # Errors
/// A description of the first thing that went otherwise.
///
/// # Cancel safety
/// Not cancel safe: dropped half-way, the proxy goes with its connections and the lease taken
/// lapses after its TTL (an hour); the table stays.
pub async fn acquire_whose_answer_is_lost<X, C, R>(
    url: &str,
    connect: C,
    runtime: R,
) -> Result<(), BoxError>
where
    X: Execute + Clone,
    C: AsyncFn(&str, &str) -> Result<SqlStore<X>, BoxError>,
    R: Runtime,
{
    let table = crate::env::unique_table("lost_acquire");
    let direct = connect(url, &table).await?;
    direct.setup().await?;
    let proxy = FaultProxy::in_front_of(url)?;
    let proxied = connect(&proxy.rewrite_url(url), &table).await?;
    let name = LeaseName::new("notice")?;
    let holder = HolderId::generate();
    let ttl = Ttl::from_secs(3_600)?;
    // The proxied pool's connection opened first (a connection's handshake is many round
    // trips), then every chunk delayed both ways (a pool's check-out ping as well), so that
    // the row shows before the acquisition's answer is back; then cut.
    proxied.inspect(&name).await?;
    proxy.delay(ANSWER_DELAY);
    let cut_once_taken = async {
        let deadline = Instant::now() + COMMITTED_WITHIN;
        loop {
            let row = direct.inspect(&name).await?;
            if row.is_some_and(|row| row.holder == holder) {
                proxy.cut();
                return Ok::<_, BoxError>(());
            }
            if Instant::now() > deadline {
                proxy.cut();
                return Err(
                    format!("the acquisition did not show within {COMMITTED_WITHIN:?}").into(),
                );
            }
            runtime.sleep(POLL).await;
        }
    };
    let (answer, taken) = futures::join!(proxied.try_acquire(&name, &holder, ttl), cut_once_taken);
    proxy.pass();
    taken?;
    let verdict = match answer {
        Err(
            ref error @ Error::Store {
                operation: Operation::Acquire,
                kind: StoreErrorKind::OutcomeUnknown,
                ..
            },
        ) if !error.is_transient() => Ok(()),
        Err(error) => Err(format!(
            "an acquisition that took the lease and whose answer was lost answered {error:?} \
             ({error}), not an acquire error of the kind OutcomeUnknown"
        )),
        Ok(fence) => Err(format!(
            "an acquisition whose answer was cut answered {fence:?}: its connection does not \
             go through the proxy"
        )),
    };
    direct.release(&name, &holder, Duration::ZERO).await?;
    Ok(verdict?)
}

/// The verdict on what a fenced write answered when its commit committed and the answer was
/// lost: an error of [`Operation::Fence`] of the kind
/// [`OutcomeUnknown`](StoreErrorKind::OutcomeUnknown), which is not transient. Anything else
/// (`Ok`, which no answer can say; a transient error, which invites running the work again;
/// [`Error::NotHeld`], which says nothing committed) fails it.
///
/// # Errors
/// What the write answered, and why that is wrong.
pub fn judge(answer: &Result<(), BoxError>) -> Result<(), String> {
    let error = match answer {
        Ok(()) => return Err("a fenced commit whose answer was lost answered Ok".to_owned()),
        Err(error) => error,
    };
    match error.downcast_ref::<Error>() {
        Some(
            error @ Error::Store {
                operation: Operation::Fence,
                kind: StoreErrorKind::OutcomeUnknown,
                ..
            },
        ) if !error.is_transient() => Ok(()),
        _ => Err(format!(
            "a fenced commit that committed and whose answer was lost answered {error:?} \
             ({error}), not a fence error of the kind OutcomeUnknown"
        )),
    }
}

#[cfg(test)]
mod tests {
    use lease_core::{Fence, LeaseName};

    use super::*;

    fn store_error(operation: Operation, kind: StoreErrorKind) -> Result<(), BoxError> {
        let name = LeaseName::new("notice").unwrap();
        Err(Error::store_of_kind(operation, Some(&name), kind, "connection reset").into())
    }

    #[test]
    fn an_unknown_outcome_passes() {
        judge(&store_error(
            Operation::Fence,
            StoreErrorKind::OutcomeUnknown,
        ))
        .unwrap();
    }

    /// The negative controls: every answer that says or suggests that nothing committed.
    #[test]
    fn answers_that_hide_the_commit_fail() {
        for kind in [
            StoreErrorKind::Transient,
            StoreErrorKind::Conflict,
            StoreErrorKind::ReadOnly,
            StoreErrorKind::Permanent,
        ] {
            assert!(
                judge(&store_error(Operation::Fence, kind)).is_err(),
                "{kind:?}"
            );
        }
        assert!(
            judge(&store_error(
                Operation::Renew,
                StoreErrorKind::OutcomeUnknown
            ))
            .is_err()
        );
        assert!(judge(&Ok(())).is_err());
        let not_held = Error::NotHeld {
            name: LeaseName::new("notice").unwrap(),
            fence: Fence::new(1),
        };
        assert!(judge(&Err(not_held.into())).is_err());
    }
}
