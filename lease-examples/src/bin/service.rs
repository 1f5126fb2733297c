//! `lease-service`: the example service of [`lease_examples::service`].
//!
//! Environment: `DATABASE_URL` (required: `postgres://...`, `mysql://...` or `sqlite:...`),
//! `LEASE_TABLE` (default `leases`), `LISTEN` (default `127.0.0.1:8080`; port 0 picks one),
//! `NODE` (default the host name), `GRACE_SECS` (default 10), `NOTIFICATIONS` (`on`, the
//! default, or `off`: whether releases notify waiting instances, on PostgreSQL). Prints
//! `listening on <address>` once it serves, and on SIGTERM or Ctrl-C shuts down gracefully,
//! prints what the shutdown did, and exits 0 (1 when some lease could not be handed back). When
//! it cannot start, it prints the error with its causes and exits 1. What the library reports
//! as it goes (a renewal that failed, a lease lost, a lease not given back at the shutdown)
//! goes to standard error as log lines, at `RUST_LOG`'s level (default `warn`).

use std::process::ExitCode;
use std::time::Duration;

use lease_examples::service::{self, Config};

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    // The signals are caught from here on, before any lease is taken: a SIGTERM that came
    // before the first wait for it would otherwise end the process as a crash does.
    let stop = match Stop::listen() {
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
    let listening = |address| println!("listening on {address}");
    match service::run(config, listening, stop.requested()).await {
        Ok(report) => {
            println!(
                "shut down in {} ms: {} leases released, {} rounds let finish, {} stopped, {} leaderships given back, {} failed",
                report.elapsed.as_millis(),
                report.released,
                report.finished,
                report.cancelled,
                report.resigned,
                report.failed + report.unfinished
            );
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

    /// Completes on the first of them.
    async fn requested(self) {
        #[cfg(unix)]
        {
            let Self {
                mut term,
                mut interrupt,
            } = self;
            tokio::select! {
                _ = term.recv() => {}
                _ = interrupt.recv() => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
