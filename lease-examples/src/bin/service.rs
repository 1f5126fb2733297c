//! `lease-service`: the example service of [`lease_examples::service`].
//!
//! Environment: `DATABASE_URL` (required: `postgres://...`, `mysql://...` or `sqlite:...`),
//! `LEASE_TABLE` (default `leases`), `LISTEN` (default `127.0.0.1:8080`; port 0 picks one),
//! `NODE` (default the host name), `GRACE_SECS` (default 10), `NOTIFICATIONS` (`on`, the
//! default, or `off`: whether releases notify waiting instances, on PostgreSQL). Prints
//! `listening on <address>` once it serves, and on SIGTERM or Ctrl-C shuts down gracefully,
//! prints what the shutdown did, and exits 0 (1 when some lease could not be handed back). When
//! it cannot start, it prints the error with its causes and exits 1.

use std::process::ExitCode;
use std::time::Duration;

use lease_examples::service::{self, Config};

#[tokio::main]
async fn main() -> ExitCode {
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
    match service::run(config, listening, terminated()).await {
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

/// Completes on SIGTERM (what an orchestrator sends) or Ctrl-C.
async fn terminated() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        else {
            let _ = ctrl_c.await;
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = ctrl_c => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
