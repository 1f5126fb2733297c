//! `leasectl`: list, show, watch and force-release the leases in a service's lease table, on
//! PostgreSQL, MariaDB or SQLite; check a table and print its migrations. What an operator
//! needs instead of querying `pg_locks` for advisory locks. See the README.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod args;
mod json;
mod migrations;
mod render;
mod store;
mod time;
mod watch;

use std::future::Future;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use lease_core::{DynLeaseStore, Error, ErrorChain, Fence, LeaseInfo, LeaseName};
use lease_sqlx::TableName;

use crate::args::{Cli, Command, Output};

/// Why the tool stopped without doing what it was asked.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The command line, the URL or a name was wrong: exit code 2.
    Usage(String),
    /// The database failed, the lease is unknown, it changed hands before its release, its
    /// release matched nothing while it is still held, or the table does not fit: exit code 1.
    Failed(String),
    /// As `Failed`, its message already printed (each round of `watch` says why it failed as
    /// it goes): exit code 1, nothing printed again.
    Reported,
}

fn main() -> ExitCode {
    // Help and version exit 0 on standard output, usage errors 2 on standard error.
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            say(&format!("cannot start: {error}"));
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(run(cli));
    // Not waiting for blocking work left behind: the host-name lookup of a connection given up
    // after its 5 s (DNS that does not answer) would hold the exit for as long as the resolver
    // tries, after the message that said it gave up.
    runtime.shutdown_background();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(message)) => {
            say(&message);
            ExitCode::from(2)
        }
        Err(Failure::Failed(message)) => {
            say(&message);
            ExitCode::FAILURE
        }
        Err(Failure::Reported) => ExitCode::FAILURE,
    }
}

async fn run(cli: Cli) -> Result<(), Failure> {
    // An empty name (`LEASE_TABLE=` passed on unset) names none: the default's.
    let table = match cli.target.table.as_str() {
        "" => args::DEFAULT_TABLE,
        table => table,
    };
    let table = TableName::new(table).map_err(|e| Failure::Usage(e.to_string()))?;
    if let Command::Migrations {
        dialect,
        layout,
        dir,
    } = &cli.command
    {
        return print(&migrations::run(&table, *dialect, *layout, dir.as_deref())?);
    }
    // An empty URL (`DATABASE_URL=` passed on unset, as docker-compose does) names none.
    let url = cli
        .target
        .database_url
        .as_deref()
        .filter(|url| !url.is_empty())
        .ok_or_else(|| {
            Failure::Usage(
                "no database: pass --database-url URL or set DATABASE_URL (see --help)".to_owned(),
            )
        })?;
    let opened = store::open(url, &table).await?;
    let store = opened.leases();
    let table = table.to_string();
    match cli.command {
        Command::List { output } => {
            let leases = answered(
                format!("cannot list the leases in table {table}"),
                store.list(),
            )
            .await?;
            print(&match output.output {
                Output::Text => render::list(&leases, &table),
                Output::Json => json::list(&leases, &table),
            })?;
        }
        Command::Show { name, output } => {
            let info = read_lease(store, &name, &table)
                .await?
                .ok_or_else(|| unknown(&name, &table))?;
            print(&match output.output {
                Output::Text => render::show(&info),
                Output::Json => json::show(&info, &table),
            })?;
        }
        Command::Release { name, fence, yes } => {
            let what = format!("cannot release lease {name:?} in table {table}");
            fits(&opened, &what).await?;
            let fence = fence.map(Fence::new);
            print(&release(store, &name, &table, fence, yes).await?)?;
        }
        Command::Watch {
            interval,
            count,
            output,
        } => watch::run(store, &table, interval, count, output.output).await?,
        Command::Prune { released_for } => {
            fits(
                &opened,
                &format!("cannot prune the leases in table {table}"),
            )
            .await?;
            // The statement may still be waiting on the server, and delete when it runs.
            let deleted = answered_or(
                format!("cannot prune the leases in table {table}"),
                "; the rows may still be deleted when the database gets to the statement",
                store.prune(released_for),
            )
            .await?;
            print(&format!(
                "deleted {deleted} lease row{} free for longer than {}\n",
                if deleted == 1 { "" } else { "s" },
                if released_for < Duration::from_secs(1) {
                    format!("{released_for:?}")
                } else {
                    time::span(released_for)
                }
            ))?;
        }
        Command::Check => {
            let what = format!("cannot check table {table}");
            match schema_mismatch(&opened, &what).await? {
                None => print(&format!("table {table} fits the store\n"))?,
                // The SQL on standard output, to save and run (`leasectl check > fix.sql`);
                // what differs on standard error, once.
                Some(Error::SchemaMismatch {
                    table,
                    mismatch,
                    upgrade: Some(sql),
                    other_kind,
                }) => {
                    print(&format!("{sql}\n"))?;
                    let differs = Error::SchemaMismatch {
                        table,
                        mismatch,
                        upgrade: None,
                        other_kind,
                    };
                    // PostgreSQL's upgrade bounds its lock waits with `SET LOCAL`, which holds
                    // only inside a transaction. SQLite's may rebuild the table: past a failed
                    // statement, which does not end a SQLite transaction, the rest would drop
                    // it, and the `sqlite3` shell goes on unless told to stop.
                    let how = match opened {
                        store::Store::Postgres(_) => {
                            " (run it as one transaction: psql --single-transaction -f FILE, or a \
                             migration)"
                        }
                        store::Store::Sqlite(_) => {
                            " (run it so that it stops at its first error: sqlite3 -bail DATABASE \
                             < FILE, or a migration)"
                        }
                        store::Store::MySql(_) => "",
                    };
                    return Err(Failure::Failed(format!(
                        "{differs}; the SQL that fixes it is on standard output{how}"
                    )));
                }
                Some(mismatch) => return Err(Failure::Failed(mismatch.to_string())),
            }
        }
        // Answered above, before connecting.
        Command::Migrations { .. } => {}
    }
    Ok(())
}

/// Writes `message` to standard error as the tool's own (`leasectl: ...`). A standard error
/// that cannot be written (a reader gone, as in `leasectl watch 2>&1 | head -1`) loses the
/// message, not the exit code: `eprintln!` would panic, exiting 101.
pub(crate) fn say(message: &str) {
    use std::io::Write;

    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "leasectl: {message}").and_then(|()| err.flush());
}

/// Writes `text` to standard output. A reader that went away (`leasectl list | head -1`) is not
/// a failure of the command: the rest is dropped, as the reader asked; any other error writing
/// is.
fn print(text: &str) -> Result<(), Failure> {
    write_out(text).map(drop)
}

/// Writes `text` to standard output and answers whether a reader took it: `Ok(false)` when the
/// reader went away (a closed pipe), which ends the output without failing the command; a
/// failure for any other error writing (a full disk, a closed descriptor).
pub(crate) fn write_out(text: &str) -> Result<bool, Failure> {
    use std::io::Write;

    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(true),
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(error) => Err(Failure::Failed(format!(
            "cannot write to standard output: {error}"
        ))),
    }
}

/// `call`'s answer, or a failure that says `what` could not be done, with the store's error or
/// because no answer came within [`store::ANSWER_TIMEOUT`]: a lock held elsewhere (an
/// `ALTER TABLE` waiting, a transaction left open in a console) would otherwise keep the tool
/// waiting for good.
async fn answered<T>(
    what: String,
    call: impl Future<Output = Result<T, Error>>,
) -> Result<T, Failure> {
    answered_or(what, "", call).await
}

/// [`answered`], with `after_timeout` appended to the message when no answer came: for a
/// write, which the server may still run once the lock is freed.
async fn answered_or<T>(
    what: String,
    after_timeout: &str,
    call: impl Future<Output = Result<T, Error>>,
) -> Result<T, Failure> {
    match tokio::time::timeout(store::ANSWER_TIMEOUT, call).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(error)) => Err(Failure::Failed(format!("{what}: {}", ErrorChain(&error)))),
        Err(_) => Err(Failure::Failed(format!(
            "{}{after_timeout}",
            no_answer_text(&what)
        ))),
    }
}

/// The lease `name` in `table`, or a failure that names it once: the store's error names it,
/// and a failure to answer in time says which lease was read.
async fn read_lease(
    store: &DynLeaseStore,
    name: &LeaseName,
    table: &str,
) -> Result<Option<LeaseInfo>, Failure> {
    match tokio::time::timeout(store::ANSWER_TIMEOUT, store.inspect(name)).await {
        Ok(Ok(info)) => Ok(info),
        Ok(Err(error)) => Err(Failure::Failed(format!(
            "cannot read table {table}: {}",
            ErrorChain(&error)
        ))),
        Err(_) => Err(no_answer(&format!(
            "cannot read lease {name:?} in table {table}"
        ))),
    }
}

fn no_answer(what: &str) -> Failure {
    Failure::Failed(no_answer_text(what))
}

/// That `what` could not be done because no answer came within [`store::ANSWER_TIMEOUT`]. The
/// tool stops waiting; the server does not stop the statement, which a write must say.
fn no_answer_text(what: &str) -> String {
    format!(
        "{what}: the database did not answer within {} s (a lock held by another session?)",
        store::ANSWER_TIMEOUT.as_secs()
    )
}

/// The store's schema check, within the tool's answer time: `None` when the table fits, the
/// check's [`Error::SchemaMismatch`] when it does not; any other failure, or no answer, as
/// `what` failed.
async fn schema_mismatch(opened: &store::Store, what: &str) -> Result<Option<Error>, Failure> {
    match tokio::time::timeout(store::ANSWER_TIMEOUT, opened.verify()).await {
        Ok(Ok(())) => Ok(None),
        Ok(Err(mismatch @ Error::SchemaMismatch { .. })) => Ok(Some(mismatch)),
        Ok(Err(error)) => Err(Failure::Failed(format!("{what}: {}", ErrorChain(&error)))),
        Err(_) => Err(no_answer(what)),
    }
}

/// Refuses `what`, a change to the table, unless the table fits the store. On a table that
/// does not (an earlier service's, a table of another kind) the store's statements may read
/// the rows wrong: times in Unix seconds, for one, read as milliseconds, are decades past, so
/// a prune would delete every row, leases held now among them, and a release would call a
/// held lease expired. `check` says what differs and prints the SQL that fixes it.
async fn fits(opened: &store::Store, what: &str) -> Result<(), Failure> {
    match schema_mismatch(opened, what).await? {
        None => Ok(()),
        Some(Error::SchemaMismatch {
            table,
            mismatch,
            other_kind,
            ..
        }) => {
            // Without the SQL, which `check` prints on its own.
            let differs = Error::SchemaMismatch {
                table,
                mismatch,
                upgrade: None,
                other_kind,
            };
            Err(Failure::Failed(format!(
                "{what}: {differs}; nothing was changed (`leasectl check` says more)"
            )))
        }
        Some(error) => Err(Failure::Failed(format!("{what}: {}", ErrorChain(&error)))),
    }
}

fn unknown(name: &LeaseName, table: &str) -> Failure {
    Failure::Failed(format!(
        "no lease named {name:?} in table {table} (never taken, or released)"
    ))
}

/// Releases `name` on behalf of the holder it has now, so the release can never touch a lease
/// that changed hands since it was read: the store releases only for the holder it is given.
/// With `fence`, only while that fence holds it: a confirmation given in a later run than the
/// one that showed the lease releases what was shown, or nothing.
async fn release(
    store: &DynLeaseStore,
    name: &LeaseName,
    table: &str,
    fence: Option<Fence>,
    yes: bool,
) -> Result<String, Failure> {
    // A name or holder is printed with its control characters escaped, as `list` prints it.
    let shown = render::printable(name.as_str());
    let info = read_lease(store, name, table)
        .await?
        .ok_or_else(|| unknown(name, table))?;
    if info.is_expired() {
        return Ok(format!(
            "{shown} expired at {} ({}): nothing to release, any instance may take it\n",
            time::rfc3339(info.expires_at),
            render::WHY_EXPIRED
        ));
    }
    if let Some(fence) = fence.filter(|fence| *fence != info.fence) {
        return Err(Failure::Failed(format!(
            "not released: {shown} is no longer held with fence {fence} (now {} with fence {}); \
             nothing was released, run `show` and then release the fence it shows",
            render::printable(info.holder.as_str()),
            info.fence
        )));
    }
    if !yes {
        return Err(Failure::Usage(format!(
            "not released: add --yes to release this lease (and --fence {}, to release it only \
             if it has not been taken again since)\n{}",
            info.fence,
            render::show(&info)
        )));
    }
    let released = match tokio::time::timeout(
        store::ANSWER_TIMEOUT,
        store.release(name, &info.holder, Duration::ZERO),
    )
    .await
    {
        Ok(released) => released.map_err(|error| {
            let cause = ErrorChain(&error).to_string();
            Failure::Failed(render::release_failed(error.store_error_kind(), &cause))
        })?,
        Err(_) => {
            return Err(Failure::Failed(format!(
                "no answer to the release of lease {name:?} within {} s: it may or may not have \
                 taken effect, and may still take effect when the database gets to it (a lock \
                 held by another session?); see `leasectl show {shown}`",
                store::ANSWER_TIMEOUT.as_secs()
            )));
        }
    };
    if released {
        return Ok(format!(
            "released {shown} (holder {}, fence {}); its holder finds out at its next renewal and \
             stops, and the next instance may take it now (a lease kept only for a minimum hold \
             after its work ended may now run again within its period)\n",
            render::printable(info.holder.as_str()),
            info.fence
        ));
    }
    // The lease changed between the read and the release: say what it is now.
    match read_lease(store, name, table).await? {
        None => Ok(format!(
            "{shown} was released by its holder in the meantime: nothing left to release\n"
        )),
        Some(now) if now.holder == info.holder && now.is_expired() => Ok(format!(
            "{shown} expired in the meantime: nothing to release, any instance may take it\n"
        )),
        // Still held by the same holder, yet the release matched no row: whatever kept it
        // (a trigger, a read from a replica behind the primary), the lease is not free.
        Some(now) if now.holder == info.holder => Err(Failure::Failed(format!(
            "not released: the release of {shown} matched no row, yet {} still holds it (fence \
             {}, expires at {}); nothing was released, see `leasectl show {shown}`",
            render::printable(now.holder.as_str()),
            now.fence,
            time::rfc3339(now.expires_at)
        ))),
        Some(now) => Err(Failure::Failed(format!(
            "not released: {shown} changed hands after it was read (was {} with fence {}, now {} \
             with fence {}); {}",
            render::printable(info.holder.as_str()),
            info.fence,
            render::printable(now.holder.as_str()),
            now.fence,
            match fence {
                // The holding asked for is gone: nothing of the new one is to be released.
                Some(_) => "nothing was released".to_owned(),
                None => format!(
                    "to release the new holder's lease, run the command again with --fence {}",
                    now.fence
                ),
            }
        ))),
    }
}
