//! [`HolderId`]: who holds a lease, unique for every acquisition.

use std::fmt;
use std::sync::{Arc, OnceLock};

/// Who holds a lease: host name, process id and 64 random bits, as `host:pid:hex`.
///
/// A new id is made for every acquisition. The host name tells an operator where the holder
/// runs; the process id tells apart two instances on one host (a host name alone collides); the
/// random part tells apart two acquisitions in one process. So a late release or renewal from an
/// earlier acquisition can never touch a lease somebody took since.
///
/// ```
/// use lease_core::HolderId;
///
/// let a = HolderId::generate();
/// let b = HolderId::generate();
/// assert_ne!(a, b);
/// assert!(a.as_str().contains(&format!(":{}:", std::process::id())));
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HolderId(Arc<str>);

impl HolderId {
    /// The longest id [`generate`](HolderId::generate) makes, in bytes: a host name of at most
    /// 255 bytes (a longer one is cut), a process id of at most 10 digits and 16 hexadecimal
    /// digits, with two colons. What a store's holder column must take.
    pub const MAX_LEN: usize = HOST_MAX_LEN + 1 + 10 + 1 + 16;

    /// A fresh id for one acquisition.
    pub fn generate() -> Self {
        let nonce: u64 = rand::random();
        Self(Arc::from(format!(
            "{}:{}:{nonce:016x}",
            host(),
            std::process::id()
        )))
    }

    /// An id as a store reads it back. Ids made this way are for reporting: acquire with
    /// [`HolderId::generate`].
    pub fn from_stored(id: impl Into<Arc<str>>) -> Self {
        Self(id.into())
    }

    /// The id as text, as stores bind it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The longest host name in an id, in bytes.
const HOST_MAX_LEN: usize = 255;

/// The host name, read once: it does not change while the process runs, and every acquisition
/// needs it. Cut to [`HOST_MAX_LEN`] bytes (at a character's boundary): a name that is not
/// UTF-8 reads with a replacement character, three bytes, for each byte it could not read.
fn host() -> &'static str {
    static HOST: OnceLock<String> = OnceLock::new();
    HOST.get_or_init(|| {
        let host = gethostname::gethostname().to_string_lossy().into_owned();
        if host.is_empty() {
            return "unknown-host".to_owned();
        }
        let mut end = host.len().min(HOST_MAX_LEN);
        while !host.is_char_boundary(end) {
            end -= 1;
        }
        host[..end].to_owned()
    })
}

impl fmt::Debug for HolderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for HolderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for HolderId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn is_never_longer_than_its_maximum() {
        assert_eq!(HolderId::MAX_LEN, 283);
        assert!(HolderId::generate().as_str().len() <= HolderId::MAX_LEN);
        assert!(host().len() <= HOST_MAX_LEN);
    }

    #[test]
    fn has_host_pid_and_random_part() {
        let id = HolderId::generate();
        let parts: Vec<&str> = id.as_str().rsplitn(3, ':').collect();
        assert_eq!(parts.len(), 3, "{id}");
        assert_eq!(parts[0].len(), 16);
        assert!(u64::from_str_radix(parts[0], 16).is_ok());
        assert_eq!(parts[1], std::process::id().to_string());
        assert_eq!(parts[2], host());
    }

    #[test]
    fn every_acquisition_gets_a_new_id() {
        let ids: HashSet<HolderId> = (0..10_000).map(|_| HolderId::generate()).collect();
        assert_eq!(ids.len(), 10_000);
    }
}
