//! [`Interruption`]: SIGINT and SIGTERM, caught so that an interrupted run still stops and
//! removes its private servers.
//!
//! Killed by a signal's default action, the program would skip every `Drop` and leave its
//! throwaway servers running with their data directories: SIGTERM reaches the program alone,
//! and of the SIGINT a terminal's Ctrl-C sends the whole process group, MariaDB ignores it.

use tokio::signal::unix::{Signal, SignalKind, signal};

/// The two signals that end a run early, listened to from [`listen`](Interruption::listen) on.
pub struct Interruption {
    interrupt: Signal,
    terminate: Signal,
}

impl Interruption {
    /// Starts listening: from now on neither signal ends the process by itself, and one that
    /// arrives before [`recv`](Interruption::recv) is polled is kept for it. Call it inside the
    /// runtime's context.
    ///
    /// # Errors
    /// When a handler cannot be installed.
    pub fn listen() -> std::io::Result<Self> {
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// Waits for the first of the two signals.
    ///
    /// # Cancel safety
    /// Cancel safe: a signal that arrives meanwhile is kept for the next call.
    pub async fn recv(&mut self) -> Caught {
        tokio::select! {
            _ = self.interrupt.recv() => Caught { name: "SIGINT", exit_code: 130 },
            _ = self.terminate.recv() => Caught { name: "SIGTERM", exit_code: 143 },
        }
    }
}

/// A signal [`Interruption::recv`] caught.
#[derive(Debug, Clone, Copy)]
pub struct Caught {
    /// `SIGINT` or `SIGTERM`.
    pub name: &'static str,
    /// What a process the signal killed reports to a shell: 128 and the signal's number.
    pub exit_code: u8,
}
