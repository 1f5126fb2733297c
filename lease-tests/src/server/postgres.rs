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
///
/// The same helper makes the servers of a replicated topology (see
/// [`PostgresReplication`](super::PostgresReplication)): a primary with settings of its own
/// ([`start_with`](Self::start_with)), a streaming standby copied from it
/// ([`standby_of`](Self::standby_of)), and the role changes ([`promote`](Self::promote),
/// [`follow`](Self::follow), [`crash`](Self::crash)).
#[derive(Debug)]
pub struct PostgresServer {
    bindir: PathBuf,
    user: Option<SystemUser>,
    port: u16,
    running: bool,
    /// `-c name=value` settings given after the defaults, so they win.
    settings: Vec<String>,
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
        Self::start_with(&[])
    }

    /// Like [`start`](Self::start), with server `settings` (`("synchronous_commit", "on")`)
    /// on top of the helper's own, kept over restarts. The cluster's default
    /// authentication (trust) already lets a standby on 127.0.0.1 replicate from it.
    ///
    /// # Errors
    /// [`io::ErrorKind::InvalidInput`] when a setting's name or value holds anything but
    /// letters, digits and `_ * , . -`; otherwise as [`start`](Self::start).
    pub fn start_with(settings: &[(&str, &str)]) -> io::Result<Self> {
        let mut server = Self::unstarted(settings)?;
        let data = server.data();
        process::run(
            process::command(&server.bindir.join("initdb"), server.user.as_ref())
                .arg("-D")
                .arg(&data)
                .args(["-U", "postgres", "-A", "trust", "-E", "UTF8"])
                .args(["--locale=C", "--no-sync"]),
            "initdb",
        )?;
        process::start_on_free_port(|port| {
            server.port = port;
            server.restart()
        })?;
        Ok(server)
    }

    /// A streaming standby of the primary reachable on `upstream_port` of 127.0.0.1 (the
    /// primary's own port, or a proxy's in front of it, so the stream can be cut): a copy made
    /// by `pg_basebackup -R`, which keeps following the primary through that port, started on
    /// a free port with `settings` as in [`start_with`](Self::start_with). Returns once it
    /// accepts (read-only) connections.
    ///
    /// # Errors
    /// When the binaries are missing, the copy fails, or the standby does not start.
    pub fn standby_of(upstream_port: u16, settings: &[(&str, &str)]) -> io::Result<Self> {
        let mut server = Self::unstarted(settings)?;
        let data = server.data();
        process::run_bounded(
            process::command(&server.bindir.join("pg_basebackup"), server.user.as_ref())
                .args(["-h", "127.0.0.1", "-p", &upstream_port.to_string()])
                .args(["-U", "postgres", "-w", "-D"])
                .arg(&data)
                .args(["-R", "-X", "stream", "-c", "fast", "--no-sync"]),
            "pg_basebackup",
            START_LIMIT,
        )?;
        process::start_on_free_port(|port| {
            server.port = port;
            server.restart()
        })?;
        Ok(server)
    }

    /// The helper without a cluster yet: binaries, user, directory and settings.
    fn unstarted(settings: &[(&str, &str)]) -> io::Result<Self> {
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
        let plain = |text: &str| {
            !text.is_empty()
                && text
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_*,.-".contains(c))
        };
        let settings = settings
            .iter()
            .map(|&(name, value)| {
                if plain(name) && plain(value) {
                    Ok(format!("-c {name}={value}"))
                } else {
                    Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("unsupported PostgreSQL setting {name:?} = {value:?}"),
                    ))
                }
            })
            .collect::<io::Result<_>>()?;
        let dir = ScratchDir::new("postgres", user.as_ref())?;
        Ok(Self {
            bindir,
            user,
            port: 0,
            running: false,
            settings,
            dir,
        })
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
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

    /// From now on accepts TCP connections over TLS only, with a self-signed certificate for
    /// 127.0.0.1 made here by `openssl` (the key and certificate in its data directory,
    /// `ssl = on`, and a `pg_hba.conf` of `hostssl` lines and the local socket): a client that
    /// does not speak TLS is refused ("no encryption"). Restarts it.
    ///
    /// # Errors
    /// When `openssl` is missing or fails, a file cannot be written, or the server does not
    /// start again.
    pub fn require_tls(&mut self) -> io::Result<()> {
        self.stop()?;
        let data = self.data();
        let (key, certificate) = (data.join("server.key"), data.join("server.crt"));
        process::run(
            std::process::Command::new("openssl")
                .args([
                    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                ])
                .args(["-subj", "/CN=127.0.0.1", "-keyout"])
                .arg(&key)
                .arg("-out")
                .arg(&certificate),
            "openssl req",
        )?;
        // The server refuses a key others may read.
        std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
        if let Some(user) = &self.user {
            process::chown(&key, user)?;
            process::chown(&certificate, user)?;
        }
        process::write_owned(
            &data.join("pg_hba.conf"),
            "local all all trust\n\
             hostssl all all 127.0.0.1/32 trust\n\
             hostssl replication all 127.0.0.1/32 trust\n",
            self.user.as_ref(),
        )?;
        self.settings.push("-c ssl=on".to_owned());
        self.restart()
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

    /// Kills the server as a power cut would (`pg_ctl stop -m immediate`): no shutdown
    /// checkpoint, and nothing more is sent to its standbys. The data stays, and a
    /// [`restart`](Self::restart) recovers it.
    ///
    /// # Errors
    /// When `pg_ctl` fails.
    pub fn crash(&mut self) -> io::Result<()> {
        self.pg_ctl_stop("immediate")
    }

    /// Whether the server is a standby in recovery (`standby.signal` is in its data), as far
    /// as this helper made it one.
    pub fn is_standby(&self) -> bool {
        self.data().join("standby.signal").exists()
    }

    /// Promotes the running standby to a primary (`pg_ctl promote -w`): it ends recovery with
    /// what it has replayed so far and accepts writes once this returns.
    ///
    /// # Errors
    /// When it is not running, or `pg_ctl` fails (also when it is not a standby).
    pub fn promote(&mut self) -> io::Result<()> {
        if !self.running {
            return Err(io::Error::other("a stopped server cannot be promoted"));
        }
        process::run(
            process::command(&self.pg_ctl(), self.user.as_ref())
                .arg("-D")
                .arg(self.data())
                .args(["-w", "-t", &START_LIMIT.as_secs().to_string(), "promote"]),
            "pg_ctl promote",
        )?;
        Ok(())
    }

    /// Makes the server a standby of the primary on `upstream_port` of 127.0.0.1: stops it
    /// (fast) when it runs, writes `standby.signal` and the connection to the primary, and
    /// starts it again. Only a server that was shut down cleanly after its last write, as in
    /// a planned switchover, can follow the primary that replaced it without a rewind.
    ///
    /// # Errors
    /// When it does not stop or start, or the files cannot be written.
    pub fn follow(&mut self, upstream_port: u16) -> io::Result<()> {
        self.stop()?;
        let data = self.data();
        process::write_owned(&data.join("standby.signal"), "", self.user.as_ref())?;
        let auto = data.join("postgresql.auto.conf");
        let mut conf = std::fs::read_to_string(&auto).unwrap_or_default();
        // The last setting of a name in the file wins.
        conf.push_str(&format!(
            "primary_conninfo = 'host=127.0.0.1 port={upstream_port} user=postgres'\n"
        ));
        process::write_owned(&auto, &conf, self.user.as_ref())?;
        self.restart()
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
        let mut options = format!(
            "-p {port} -k {socket_dir} -c listen_addresses=127.0.0.1 -c fsync=off \
             -c synchronous_commit=off -c full_page_writes=off",
            port = self.port,
            socket_dir = dir.display()
        );
        for setting in &self.settings {
            options.push(' ');
            options.push_str(setting);
        }
        let log = dir.join("server.log");
        let started = process::run(
            process::command(&self.pg_ctl(), self.user.as_ref())
                .arg("-D")
                .arg(self.data())
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

    fn pg_ctl(&self) -> PathBuf {
        self.bindir.join("pg_ctl")
    }

    fn pg_ctl_stop(&mut self, mode: &str) -> io::Result<()> {
        if !self.running {
            return Ok(());
        }
        process::run(
            process::command(&self.pg_ctl(), self.user.as_ref())
                .arg("-D")
                .arg(self.data())
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
