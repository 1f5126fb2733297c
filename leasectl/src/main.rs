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

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use lease_core::{DynLeaseStore, Error, ErrorChain, LeaseName};
use lease_sqlx::TableName;

use crate::args::{Cli, Command, Output};

/// Why the tool stopped without doing what it was asked.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The command line, the URL or a name was wrong: exit code 2.
    Usage(String),
    /// The database failed, the lease is unknown, nothing was released, or the table does not
    /// fit: exit code 1.
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
            eprintln!("leasectl: cannot start: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(message)) => {
            eprintln!("leasectl: {message}");
            ExitCode::from(2)
        }
        Err(Failure::Failed(message)) => {
            eprintln!("leasectl: {message}");
            ExitCode::FAILURE
        }
        Err(Failure::Reported) => ExitCode::FAILURE,
    }
}

async fn run(cli: Cli) -> Result<(), Failure> {
    let table = TableName::new(&cli.target.table).map_err(|e| Failure::Usage(e.to_string()))?;
    if let Command::Migrations {
        dialect,
        layout,
        dir,
    } = &cli.command
    {
        print!(
            "{}",
            migrations::run(&table, *dialect, *layout, dir.as_deref())?
        );
        return Ok(());
    }
    let url = cli.target.database_url.as_deref().ok_or_else(|| {
        Failure::Usage(
            "no database: pass --database-url URL or set DATABASE_URL (see --help)".to_owned(),
        )
    })?;
    let opened = store::open(url, &table).await?;
    let store = opened.leases();
    let table = table.to_string();
    let failed = |what: String| {
        move |error: Error| Failure::Failed(format!("{what}: {}", ErrorChain(&error)))
    };
    match cli.command {
        Command::List { output } => {
            let leases = store
                .list()
                .await
                .map_err(failed(format!("cannot list the leases in table {table}")))?;
            print!(
                "{}",
                match output.output {
                    Output::Text => render::list(&leases, &table),
                    Output::Json => json::list(&leases, &table),
                }
            );
        }
        Command::Show { name, output } => {
            let name = lease_name(&name)?;
            let info = store
                .inspect(&name)
                .await
                .map_err(failed(format!("cannot read lease {name:?}")))?
                .ok_or_else(|| unknown(&name, &table))?;
            print!(
                "{}",
                match output.output {
                    Output::Text => render::show(&info),
                    Output::Json => json::show(&info, &table),
                }
            );
        }
        Command::Release { name, yes } => {
            print!(
                "{}",
                release(store, &lease_name(&name)?, &table, yes).await?
            );
        }
        Command::Watch {
            interval,
            count,
            output,
        } => watch::run(store, &table, interval, count, output.output).await?,
        Command::Prune { released_for } => {
            let deleted = store
                .prune(released_for)
                .await
                .map_err(failed(format!("cannot prune the leases in table {table}")))?;
            println!(
                "deleted {deleted} lease row{} free for longer than {}",
                if deleted == 1 { "" } else { "s" },
                if released_for < Duration::from_secs(1) {
                    format!("{released_for:?}")
                } else {
                    time::span(released_for)
                }
            );
        }
        Command::Check => match opened.verify().await {
            Ok(()) => println!("table {table} fits the store"),
            Err(error @ Error::SchemaMismatch { .. }) => {
                return Err(Failure::Failed(error.to_string()));
            }
            Err(error) => return Err(failed(format!("cannot check table {table}"))(error)),
        },
        // Answered above, before connecting.
        Command::Migrations { .. } => {}
    }
    Ok(())
}

fn lease_name(name: &str) -> Result<LeaseName, Failure> {
    LeaseName::new(name).map_err(|e| Failure::Usage(e.to_string()))
}

fn unknown(name: &LeaseName, table: &str) -> Failure {
    Failure::Failed(format!(
        "no lease named {name:?} in table {table} (never taken, or released)"
    ))
}

/// Releases `name` on behalf of the holder it has now, so the release can never touch a lease
/// that changed hands since it was read: the store releases only for the holder it is given.
async fn release(
    store: &DynLeaseStore,
    name: &LeaseName,
    table: &str,
    yes: bool,
) -> Result<String, Failure> {
    let read = |error: Error| {
        Failure::Failed(format!(
            "cannot read lease {name:?}: {}",
            ErrorChain(&error)
        ))
    };
    let info = store
        .inspect(name)
        .await
        .map_err(read)?
        .ok_or_else(|| unknown(name, table))?;
    if info.is_expired() {
        return Ok(format!(
            "{name} expired at {} without a release: nothing to release, any instance may take it\n",
            time::rfc3339(info.expires_at)
        ));
    }
    if !yes {
        return Err(Failure::Usage(format!(
            "not released: add --yes to release this lease\n{}",
            render::show(&info)
        )));
    }
    let released = store
        .release(name, &info.holder, Duration::ZERO)
        .await
        .map_err(|error| {
            Failure::Failed(format!(
                "cannot release lease {name:?}: {}",
                ErrorChain(&error)
            ))
        })?;
    if released {
        return Ok(format!(
            "released {name} (holder {}, fence {}); its holder finds out at its next renewal and \
             stops, and the next instance may take it now (a lease kept only for a minimum hold \
             after its work ended may now run again within its period)\n",
            info.holder, info.fence
        ));
    }
    // The lease changed between the read and the release: say what it is now.
    match store.inspect(name).await.map_err(read)? {
        None => Ok(format!(
            "{name} was released by its holder in the meantime: nothing left to release\n"
        )),
        Some(now) if now.holder == info.holder => Ok(format!(
            "{name} expired in the meantime: nothing to release, any instance may take it\n"
        )),
        Some(now) => Err(Failure::Failed(format!(
            "not released: {name} changed hands after it was read (was {} with fence {}, now {} \
             with fence {}); run the command again to release the new holder's lease",
            info.holder, info.fence, now.holder, now.fence
        ))),
    }
}
