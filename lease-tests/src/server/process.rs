//! What both servers need: a scratch directory, a free port, a binary, a user to run as, and a
//! wait until the server answers.

use std::collections::BTreeSet;
use std::io::{self, Read};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A directory under the system's temporary directory, removed when dropped.
#[derive(Debug)]
pub(crate) struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    /// A new, empty directory named after `kind`, owned by `owner` when given.
    pub(crate) fn new(kind: &str, owner: Option<&SystemUser>) -> io::Result<Self> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "lease-test-{kind}-{}-{}-{:08x}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            rand::random::<u32>()
        ));
        std::fs::create_dir(&path)?;
        let dir = Self { path };
        if let Some(owner) = owner {
            std::os::unix::fs::chown(&dir.path, Some(owner.uid), Some(owner.gid))?;
        }
        Ok(dir)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        // Nothing to do about a failure here but leave the directory for the system to clean.
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A system account to run a server as.
#[derive(Debug, Clone)]
pub(crate) struct SystemUser {
    pub(crate) name: String,
    uid: u32,
    gid: u32,
}

impl SystemUser {
    /// The account `name` from the password database, if it exists.
    pub(crate) fn lookup(name: &str) -> Option<Self> {
        let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
        passwd.lines().find_map(|line| {
            let mut fields = line.split(':');
            if fields.next()? != name {
                return None;
            }
            let (_password, uid, gid) = (fields.next()?, fields.next()?, fields.next()?);
            Some(Self {
                name: name.to_owned(),
                uid: uid.parse().ok()?,
                gid: gid.parse().ok()?,
            })
        })
    }
}

/// Writes `contents` to `path` (replacing it), owned by `owner` when given, so a server running
/// as that user may read and change it.
pub(crate) fn write_owned(
    path: &Path,
    contents: &str,
    owner: Option<&SystemUser>,
) -> io::Result<()> {
    std::fs::write(path, contents)?;
    match owner {
        Some(owner) => chown(path, owner),
        None => Ok(()),
    }
}

/// Gives `path` to `owner`.
pub(crate) fn chown(path: &Path, owner: &SystemUser) -> io::Result<()> {
    std::os::unix::fs::chown(path, Some(owner.uid), Some(owner.gid))
}

/// Whether this process runs as root, and so must run servers as another user.
pub(crate) fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0)
}

/// The lowest port [`free_port`] hands out: above the ports well-known services use.
const LOWEST_PORT: u16 = 15_000;

/// A port on 127.0.0.1 that nothing listened on a moment ago, that this process has not
/// handed out before, and that lies below the range the kernel gives to outgoing connections
/// and to a bind to port 0.
///
/// A server that is stopped and started again on its port (a restart, a demoted primary that
/// follows the new one) needs that port to stay free while it is down. A port from the
/// kernel's range need not: any connection another test opens in between may get it as its
/// own local port, and the server then cannot bind it. Below that range only this function
/// hands ports out, each once per process. When the range leaves too little room below it,
/// the kernel's choice is taken.
///
/// # Errors
/// The operating system's error when no port could be bound.
pub(crate) fn free_port() -> io::Result<u16> {
    static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let below = kernel_port_range_start();
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(PoisonError::into_inner);
    if below > LOWEST_PORT.saturating_add(1_000) {
        for _ in 0..200 {
            let port = rand::random_range(LOWEST_PORT..below);
            if handed_out.contains(&port) {
                continue;
            }
            if TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).is_ok() {
                handed_out.insert(port);
                return Ok(port);
            }
        }
    }
    let listener = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))?;
    let port = listener.local_addr()?.port();
    handed_out.insert(port);
    Ok(port)
}

/// The first port of the range the kernel chooses local ports from
/// (`net.ipv4.ip_local_port_range`), or Linux's default when it cannot be read.
fn kernel_port_range_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// Runs `start` with a free port, up to three times: a port can be taken between finding it and
/// the server binding it, and then another one is tried.
pub(crate) fn start_on_free_port(mut start: impl FnMut(u16) -> io::Result<()>) -> io::Result<()> {
    let mut last_error = None;
    for _ in 0..3 {
        match start(free_port()?) {
            Ok(()) => return Ok(()),
            Err(error) => last_error = Some(error),
        }
    }
    Err(last_error.expect("three attempts were made"))
}

/// The first of `names` found in `dirs` or on `PATH`.
pub(crate) fn find_binary(names: &[&str], dirs: &[PathBuf]) -> Option<PathBuf> {
    let path_dirs = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default();
    let standard =
        ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"].map(PathBuf::from);
    for name in names {
        for dir in dirs.iter().chain(&path_dirs).chain(&standard) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    None
}

/// A command for `program`, run as `user` (through `runuser`) when one is given.
pub(crate) fn command(program: &Path, user: Option<&SystemUser>) -> Command {
    match user {
        Some(user) => {
            let mut command = Command::new("runuser");
            command.args(["-u", &user.name, "--"]).arg(program);
            command
        }
        None => Command::new(program),
    }
}

/// Runs `command` to completion; an error carries its output when it fails.
pub(crate) fn run(command: &mut Command, what: &str) -> io::Result<Output> {
    let output = command.output().map_err(|error| {
        io::Error::new(
            error.kind(),
            format!("{what}: could not run {command:?}: {error}"),
        )
    })?;
    succeeded(output, what)
}

/// `output` when its command succeeded; otherwise an error naming `what` with everything the
/// command printed.
fn succeeded(output: Output, what: &str) -> io::Result<Output> {
    if output.status.success() {
        Ok(output)
    } else {
        Err(io::Error::other(format!(
            "{what} failed ({}): {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )))
    }
}

/// Like [`run`], but kills the command and fails when it has not ended within `limit`.
pub(crate) fn run_bounded(
    command: &mut Command,
    what: &str,
    limit: Duration,
) -> io::Result<Output> {
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|error| {
            io::Error::new(
                error.kind(),
                format!("{what}: could not run {command:?}: {error}"),
            )
        })?;
    let started = Instant::now();
    while child.try_wait()?.is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("{what} did not finish within {limit:?}"),
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output()?;
    succeeded(output, what)
}

/// Waits until something accepts connections on `port` and sends at least one byte (a MySQL
/// server greets first, and only once it is ready), or `limit` passes.
pub(crate) fn wait_for_greeting(port: u16, limit: Duration) -> io::Result<()> {
    let started = Instant::now();
    let address = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port).into();
    loop {
        let attempt = TcpStream::connect_timeout(&address, Duration::from_millis(500)).and_then(
            |mut stream| {
                stream.set_read_timeout(Some(Duration::from_secs(2)))?;
                let mut first = [0_u8; 1];
                stream.read_exact(&mut first)
            },
        );
        match attempt {
            Ok(()) => return Ok(()),
            Err(error) if started.elapsed() > limit => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("nothing answered on port {port} within {limit:?}: {error}"),
                ));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Whether anything accepts connections on `port` right now.
pub(crate) fn accepts(port: u16) -> bool {
    let address = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port).into();
    TcpStream::connect_timeout(&address, Duration::from_millis(500)).is_ok()
}

/// The last lines of a server's log, for an error message.
pub(crate) fn log_tail(path: &Path) -> String {
    let log = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_lie_below_the_kernels_range_and_are_handed_out_once() {
        let below = kernel_port_range_start();
        assert!(
            below > LOWEST_PORT + 1_000,
            "this machine's local port range starts at {below}: nothing to test here"
        );
        let ports: Vec<u16> = (0..50).map(|_| free_port().unwrap()).collect();
        for port in &ports {
            assert!(
                (LOWEST_PORT..below).contains(port),
                "port {port} is outside {LOWEST_PORT}..{below}"
            );
        }
        let distinct: BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len(), "a port was handed out twice");
    }
}
