//! [`PostgresServer`]: a private PostgreSQL for one test.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::process::{self, ScratchDir, SystemUser};

/// How long a start may take before the helper gives up.
const START_LIMIT: Duration = Duration::from_secs(60);

/// A private PostgreSQL server: a fresh cluster from the local installation's `initdb`, run by
/// `pg_ctl` on a free port of 127.0.0.1 with trust authentication, in a temporary directory
/// (which also holds its Unix socket). Dropping it stops the server at once and removes the
/// directory.
///
/// The binaries are looked up in `LEASE_TEST_PG_BINDIR`, then `pg_config --bindir`, then on
/// `PATH`, then in the newest `/usr/lib/postgresql/*/bin`.
///
/// ```no_run
/// use lease_tests::server::PostgresServer;
///
/// let mut server = PostgresServer::start()?;
/// let url = server.url(); // postgres://postgres@127.0.0.1:<port>/postgres
/// server.stop()?;         // connections now fail
/// server.restart()?;      // same port, same data
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct PostgresServer {
    pg_ctl: PathBuf,
    user: Option<SystemUser>,
    port: u16,
    running: bool,
    // Dropped last: the server must be stopped before its directory goes.
    dir: ScratchDir,
}

impl PostgresServer {
    /// Creates a cluster and starts it; returns once it accepts connections.
    ///
    /// # Errors
    /// When the binaries are missing, or `initdb` or the server fail; the message says which
    /// and includes their output.
    pub fn start() -> io::Result<Self> {
        let bindir = bindir().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "no PostgreSQL server binaries (initdb, pg_ctl) found: install the \
                 postgresql package or set LEASE_TEST_PG_BINDIR",
            )
        })?;
        let user = if process::is_root() {
            Some(SystemUser::lookup("postgres").ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    "running as root, but there is no postgres user to run PostgreSQL as",
                )
            })?)
        } else {
            None
        };
        let dir = ScratchDir::new("postgres", user.as_ref())?;
        let data = dir.path().join("data");
        process::run(
            process::command(&bindir.join("initdb"), user.as_ref())
                .arg("-D")
                .arg(&data)
                .args(["-U", "postgres", "-A", "trust", "-E", "UTF8"])
                .args(["--locale=C", "--no-sync"]),
            "initdb",
        )?;
        let mut server = Self {
            pg_ctl: bindir.join("pg_ctl"),
            user,
            port: 0,
            running: false,
            dir,
        };
        process::start_on_free_port(|port| {
            server.port = port;
            server.restart()
        })?;
        Ok(server)
    }

    /// The temporary directory that holds its data, socket and log; gone once it is dropped.
    pub fn directory(&self) -> &Path {
        self.dir.path()
    }

    /// The port it listens on, on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A URL for the superuser `postgres`, without password, to the `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Whether it is running (as far as this helper started and stopped it).
    pub fn is_running(&self) -> bool {
        self.running
    }

    /// Stops the server, ending every connection (`pg_ctl stop -m fast`). The data stays.
    ///
    /// # Errors
    /// When `pg_ctl` fails.
    pub fn stop(&mut self) -> io::Result<()> {
        self.pg_ctl_stop("fast")
    }

    /// Starts the stopped server again, on the same port with the same data; returns once it
    /// accepts connections. Does nothing when it runs.
    ///
    /// # Errors
    /// When the server does not start; the message includes the end of its log.
    pub fn restart(&mut self) -> io::Result<()> {
        if self.running {
            return Ok(());
        }
        let dir = self.dir.path();
        let options = format!(
            "-p {port} -k {socket_dir} -c listen_addresses=127.0.0.1 -c fsync=off \
             -c synchronous_commit=off -c full_page_writes=off",
            port = self.port,
            socket_dir = dir.display()
        );
        let log = dir.join("server.log");
        let started = process::run(
            process::command(&self.pg_ctl, self.user.as_ref())
                .arg("-D")
                .arg(dir.join("data"))
                .arg("-l")
                .arg(&log)
                .args([
                    "-w",
                    "-t",
                    &START_LIMIT.as_secs().to_string(),
                    "-o",
                    &options,
                ])
                .arg("start"),
            "pg_ctl start",
        );
        if let Err(error) = started {
            return Err(io::Error::other(format!(
                "{error}\nserver log:\n{}",
                process::log_tail(&log)
            )));
        }
        self.running = true;
        if !process::accepts(self.port) {
            return Err(io::Error::other(format!(
                "PostgreSQL started but does not accept connections on port {}",
                self.port
            )));
        }
        Ok(())
    }

    fn pg_ctl_stop(&mut self, mode: &str) -> io::Result<()> {
        if !self.running {
            return Ok(());
        }
        process::run(
            process::command(&self.pg_ctl, self.user.as_ref())
                .arg("-D")
                .arg(self.dir.path().join("data"))
                .args(["-m", mode, "-w", "stop"]),
            "pg_ctl stop",
        )?;
        self.running = false;
        Ok(())
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        // Immediate: nothing of a throwaway server's data needs to survive.
        let _ = self.pg_ctl_stop("immediate");
    }
}

/// The directory holding `initdb` and `pg_ctl`.
fn bindir() -> Option<PathBuf> {
    let has_tools = |dir: &PathBuf| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    if let Some(dir) = std::env::var_os("LEASE_TEST_PG_BINDIR").map(PathBuf::from) {
        return has_tools(&dir).then_some(dir);
    }
    let from_pg_config = std::process::Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()));
    if let Some(dir) = from_pg_config.filter(has_tools) {
        return Some(dir);
    }
    if let Some(initdb) = process::find_binary(&["initdb"], &[]) {
        let dir = initdb.canonicalize().ok()?.parent()?.to_path_buf();
        if has_tools(&dir) {
            return Some(dir);
        }
    }
    // Debian and Ubuntu keep the server binaries off PATH, one directory per major version.
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version = entry.file_name().to_str()?.parse().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .filter(|(_, dir)| has_tools(dir))
        .collect();
    versions.sort();
    versions.pop().map(|(_, dir)| dir)
}
