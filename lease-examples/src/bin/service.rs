//! `lease-service`: the example service of [`lease_examples::service`].
//!
//! Environment: `DATABASE_URL` (required: `postgres://...`, `mysql://...` or `sqlite:...`),
//! `LEASE_TABLE` (default `leases`), `LISTEN` (default `127.0.0.1:8080`; port 0 picks one),
//! `NODE` (default the host name), `GRACE_SECS` (default 10), `NOTIFICATIONS` (`on`, the
//! default, or `off`: whether releases notify waiting instances, on PostgreSQL). Prints
//! `listening on <address>` once it serves, and on SIGTERM or Ctrl-C shuts down gracefully,
//! prints what the shutdown did, and exits 0 (1 when some lease could not be handed back); a
//! second signal during that shutdown ends it at once (exit 130 after Ctrl-C, 143 after
//! SIGTERM), its leases not handed back yet lapsing after their TTL. When
//! it cannot start, it prints the error with its causes and exits 1. What the library reports
//! as it goes (a renewal that failed, a lease lost, a lease not given back at the shutdown)
//! goes to standard error as log lines, at `RUST_LOG`'s level (default `warn`).

use std::process::ExitCode;
use std::time::Duration;

use lease_examples::service::{self, Config};

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("lease-service: cannot start: {error}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(serve());
    // Not waiting for blocking work left behind: a host-name lookup of a connection given up
    // (DNS that does not answer) would hold the exit for as long as the resolver tries.
    runtime.shutdown_background();
    code
}

async fn serve() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    // The signals are caught from here on, before any lease is taken: a SIGTERM that came
    // before the first wait for it would otherwise end the process as a crash does.
    let mut stop = match Stop::listen() {
        Ok(stop) => stop,
        Err(error) => {
            eprintln!("lease-service: cannot listen for SIGTERM: {error}");
            return ExitCode::FAILURE;
        }
    };
    let Ok(url) = std::env::var("DATABASE_URL") else {
        eprintln!("set DATABASE_URL to postgres://..., mysql://... or sqlite:...");
        return ExitCode::from(2);
    };
    let mut config = Config::new(url);
    if let Ok(table) = std::env::var("LEASE_TABLE") {
        config.table = table;
    }
    if let Ok(node) = std::env::var("NODE") {
        config.node = node;
    }
    match std::env::var("LISTEN").map(|listen| listen.parse()) {
        Ok(Ok(listen)) => config.listen = listen,
        Ok(Err(error)) => {
            eprintln!("LISTEN: {error}");
            return ExitCode::from(2);
        }
        Err(_) => {}
    }
    match std::env::var("NOTIFICATIONS").as_deref() {
        Ok("on") | Err(_) => {}
        Ok("off") => config.notifications = false,
        Ok(other) => {
            eprintln!("NOTIFICATIONS: `on` or `off`, not `{other}`");
            return ExitCode::from(2);
        }
    }
    match std::env::var("GRACE_SECS").map(|secs| secs.parse()) {
        Ok(Ok(secs)) => config.grace = Duration::from_secs(secs),
        Ok(Err(error)) => {
            eprintln!("GRACE_SECS: {error}");
            return ExitCode::from(2);
        }
        Err(_) => {}
    }
    let listening = |address| service::say(format_args!("listening on {address}"));
    let (asked, requested) = tokio::sync::oneshot::channel::<()>();
    let service = service::run(config, listening, async {
        let _ = requested.await;
    });
    // The first signal starts the graceful shutdown; a second one while it runs (an operator
    // pressing Ctrl-C again, a database that stopped answering) ends the process without it.
    let signals = async {
        stop.next().await;
        let _ = asked.send(());
        stop.next().await
    };
    let outcome = tokio::select! {
        outcome = service => outcome,
        second = signals => {
            eprintln!(
                "lease-service: a second signal during the shutdown: exiting without waiting for it; a lease not handed back yet lapses after its TTL"
            );
            return ExitCode::from(128 + second);
        }
    };
    match outcome {
        Ok(report) => {
            service::say(format_args!(
                "shut down in {} ms: {} leases released, {} rounds let finish, {} stopped, {} leaderships given back, {} failed",
                report.elapsed.as_millis(),
                report.released,
                report.finished,
                report.cancelled,
                report.resigned,
                report.failed + report.unfinished
            ));
            if report.is_clean() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(error) => {
            // The error and each of its causes, once: a store's error names the operation, its
            // cause says what the database answered.
            eprintln!("lease-service: {}", lease_core::ErrorChain(&*error));
            ExitCode::FAILURE
        }
    }
}

/// SIGTERM (what an orchestrator sends) and Ctrl-C, caught from the moment it is made.
struct Stop {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
}

impl Stop {
    /// Catches the signals from now on.
    fn listen() -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Self {
                term: signal(SignalKind::terminate())?,
                interrupt: signal(SignalKind::interrupt())?,
            })
        }
        #[cfg(not(unix))]
        {
            Ok(Self {})
        }
    }

    /// The number of the next of them to come (15 for SIGTERM, 2 for Ctrl-C).
    async fn next(&mut self) -> u8 {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.term.recv() => 15,
                _ = self.interrupt.recv() => 2,
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            2
        }
    }
}
