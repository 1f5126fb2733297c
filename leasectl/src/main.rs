//! `leasectl`: list, show and force-release the leases in a service's lease table, on
//! PostgreSQL, MariaDB or SQLite. What an operator needs instead of querying `pg_locks` for
//! advisory locks. See the README.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod args;
mod render;
mod store;
mod time;

use std::process::ExitCode;
use std::time::Duration;

use lease_core::{DynLeaseStore, LeaseName};

use crate::args::{Args, Command, Parsed, USAGE};
use crate::store::Chain;

/// Why the tool stopped without doing what it was asked.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The command line, the URL or a name was wrong: exit code 2.
    Usage(String),
    /// The database failed, the lease is unknown, or nothing was released: exit code 1.
    Failed(String),
}

fn main() -> ExitCode {
    let args = match args::parse(std::env::args().skip(1)) {
        Ok(Parsed::Run(args)) => args,
        Ok(Parsed::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            eprintln!("leasectl: {error}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
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
    match runtime.block_on(run(args)) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(Failure::Usage(message)) => {
            eprintln!("leasectl: {message}");
            ExitCode::from(2)
        }
        Err(Failure::Failed(message)) => {
            eprintln!("leasectl: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<String, Failure> {
    let store = store::open(&args.url, args.table.as_deref()).await?;
    let table = args.table.as_deref().unwrap_or("leases");
    let failed = |what: String| {
        move |error: lease_core::Error| Failure::Failed(format!("{what}: {}", Chain(&error)))
    };
    match args.command {
        Command::List => {
            let leases = store
                .list()
                .await
                .map_err(failed(format!("cannot list the leases in table {table}")))?;
            Ok(render::list(&leases, table))
        }
        Command::Show(name) => {
            let name = lease_name(&name)?;
            let info = store
                .inspect(&name)
                .await
                .map_err(failed(format!("cannot read lease {name:?}")))?
                .ok_or_else(|| unknown(&name, table))?;
            Ok(render::show(&info))
        }
        Command::Release { name, yes } => release(&*store, &lease_name(&name)?, table, yes).await,
    }
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
    let read = |error: lease_core::Error| {
        Failure::Failed(format!("cannot read lease {name:?}: {}", Chain(&error)))
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
            Failure::Failed(format!("cannot release lease {name:?}: {}", Chain(&error)))
        })?;
    if released {
        return Ok(format!(
            "released {name} (holder {}, fence {}); its holder finds out at its next renewal and \
             stops, and the next instance may take it now\n",
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
