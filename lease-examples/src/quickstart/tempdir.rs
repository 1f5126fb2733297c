//! [`TempDir`]: a directory of the demo's own, removed when dropped.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// A fresh directory under the system's temporary directory, removed with everything in it when
/// dropped (also when the demo fails).
#[derive(Debug)]
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn new(prefix: &str) -> io::Result<Self> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.subsec_nanos());
        let path = std::env::temp_dir().join(format!("{prefix}-{}-{nanos:09}", std::process::id()));
        std::fs::create_dir(&path)?;
        Ok(Self(path))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Nothing to do about a directory that cannot be removed but leave it.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
