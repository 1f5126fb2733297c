//! `lease-bench`: the lease stores measured beside the bare statements they send and beside
//! session advisory locks, on every backend, in six scenarios. It prints a table per scenario
//! and backend; every comparison is a ratio measured in the same run, every figure a median
//! over repetitions. Run it with `cargo run --release -p lease-bench -- --help`.
//!
//! It measures; it asserts nothing about speed. Its `--smoke` mode runs every scenario for a
//! few seconds so CI notices when the program stops working.

#![forbid(unsafe_code)]

mod args;
mod backend;
mod chart;
mod counting;
mod interruption;
mod machine;
mod prepared;
mod protected;
mod raw;
mod report;
mod rotation;
mod scenario;
mod servers;
mod stats;
mod tasks;
mod url;
mod wal;

use std::process::ExitCode;

use args::{Command, Options};
use interruption::{Caught, Interruption};
use report::Report;
use scenario::{Context, Scenario};
use servers::Servers;

fn main() -> ExitCode {
    let options = match args::parse(std::env::args().skip(1)) {
        Ok(Command::Run(options)) => options,
        Ok(Command::Help) => {
            print!("{}", args::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            eprintln!("lease-bench: {error}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("lease-bench: no runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    // Listening before the servers start, so that a signal while they start ends the run
    // once they have, through their `Drop`, rather than the process with them left running.
    let listening = {
        let _context = runtime.enter();
        Interruption::listen()
    };
    let mut interruption = match listening {
        Ok(interruption) => interruption,
        Err(error) => {
            eprintln!("lease-bench: cannot listen for SIGINT and SIGTERM: {error}");
            return ExitCode::FAILURE;
        }
    };
    // Private servers start outside the runtime's tasks: their helpers block.
    let servers = match Servers::start(&options) {
        Ok(servers) => servers,
        Err(error) => {
            eprintln!("lease-bench: {error}");
            return ExitCode::FAILURE;
        }
    };
    let ended = runtime.block_on(async {
        tokio::select! {
            failures = run(&options, &servers) => Ended::Ran(failures),
            caught = interruption.recv() => Ended::Interrupted(caught),
        }
    });
    // Every pool is closed (or, interrupted, dropped with the runtime's tasks); nothing left
    // should keep the servers busy while they stop.
    drop(runtime);
    drop(servers);
    match ended {
        Ended::Ran(0) => ExitCode::SUCCESS,
        Ended::Ran(failures) => {
            eprintln!("lease-bench: {failures} measurement(s) failed");
            ExitCode::FAILURE
        }
        Ended::Interrupted(caught) => {
            eprintln!("lease-bench: interrupted by {}", caught.name);
            ExitCode::from(caught.exit_code)
        }
    }
}

/// How a run ended.
enum Ended {
    /// Every scenario ran; how many measurements failed.
    Ran(usize),
    /// A signal ended it early.
    Interrupted(Caught),
}

/// Runs every scenario on every backend; returns how many failed.
async fn run(options: &Options, servers: &Servers) -> usize {
    let context = Context { options, servers };
    let mut report = Report::default();
    let mut failures = 0;
    if let Err(error) = servers.make_durable().await {
        eprintln!("lease-bench: cannot restore the private MariaDB's durability: {error}");
        return 1;
    }
    println!("{}", machine::describe(options, servers));
    for &scenario in &options.scenarios {
        for &backend in &options.backends {
            let started = std::time::Instant::now();
            let result = match scenario {
                Scenario::Cycles => scenario::cycles::run(&context, backend, &mut report).await,
                Scenario::Contended => {
                    scenario::contended::run(&context, backend, &mut report).await
                }
                Scenario::Many => scenario::many::run(&context, backend, &mut report).await,
                Scenario::Handover => scenario::handover::run(&context, backend, &mut report).await,
                Scenario::Fenced => scenario::fenced::run(&context, backend, &mut report).await,
                Scenario::Growth => scenario::growth::run(&context, backend, &mut report).await,
            };
            match result {
                Ok(()) => eprintln!(
                    "lease-bench: {} on {} took {:.1} s",
                    scenario.key(),
                    backend.key(),
                    started.elapsed().as_secs_f64()
                ),
                Err(error) => {
                    failures += 1;
                    eprintln!(
                        "lease-bench: FAILED {} on {}: {error}",
                        scenario.key(),
                        backend.key()
                    );
                }
            }
        }
    }
    if let Some(path) = &options.chart {
        match std::fs::write(path, chart::svg(&report.chart)) {
            Ok(()) => eprintln!("lease-bench: chart written to {path}"),
            Err(error) => {
                failures += 1;
                eprintln!("lease-bench: cannot write {path}: {error}");
            }
        }
    }
    if let Some(path) = &options.markdown {
        let mut text = machine::describe(options, servers);
        for table in &report.tables {
            text.push('\n');
            text.push_str(&table.markdown());
        }
        match std::fs::write(path, text) {
            Ok(()) => eprintln!("lease-bench: tables written to {path}"),
            Err(error) => {
                failures += 1;
                eprintln!("lease-bench: cannot write {path}: {error}");
            }
        }
    }
    failures
}
