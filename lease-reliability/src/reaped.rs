//! [`Reaped`]: a child process killed and reaped when the test lets go of it.

use std::process::Child;

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
}
