//! [`Reaped`]: a child process killed and reaped when the test lets go of it.

use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

/// A worker process, killed and reaped when dropped: a test that panics while it runs, or
/// while it is stopped with `SIGSTOP` (`SIGKILL` ends a stopped process too), would otherwise
/// leave it behind holding its connections after the test binary has ended. A process already
/// reaped is left alone (`Child::kill` then sends nothing). Reach the [`Child`] through it
/// (`Deref`).
#[derive(Debug)]
pub struct Reaped(pub Child);

impl std::ops::Deref for Reaped {
    type Target = Child;

    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Reaped {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Reaped {
    /// Waits until `by` for the process to exit; kills it if it has not by then. Answers its
    /// exit status, or `None` when it had to be killed (`SIGKILL` ends a stopped process too).
    /// Blocks the calling thread, 20 ms at a time.
    ///
    /// # Panics
    /// When the process's status cannot be read.
    pub fn exit_by(&mut self, by: Instant) -> Option<ExitStatus> {
        loop {
            if let Some(status) = self.0.try_wait().expect("the worker's status") {
                return Some(status);
            }
            if Instant::now() >= by {
                let _ = self.0.kill();
                let _ = self.0.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_process_is_killed_and_reaped() {
        let child = std::process::Command::new("sleep")
            .arg("600")
            .spawn()
            .expect("sleep starts");
        let path = format!("/proc/{}", child.id());
        drop(Reaped(child));
        // Reaped, not a zombie: its /proc entry is gone.
        assert!(!std::path::Path::new(&path).exists());
    }

    #[test]
    fn a_process_that_does_not_exit_in_time_is_killed() {
        let mut exits = Reaped(
            std::process::Command::new("true")
                .spawn()
                .expect("true starts"),
        );
        let status = exits.exit_by(Instant::now() + Duration::from_secs(10));
        assert!(status.is_some_and(|status| status.success()), "{status:?}");
        let mut stays = Reaped(
            std::process::Command::new("sleep")
                .arg("600")
                .spawn()
                .expect("sleep starts"),
        );
        let started = Instant::now();
        assert_eq!(
            stays.exit_by(Instant::now() + Duration::from_millis(100)),
            None
        );
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
