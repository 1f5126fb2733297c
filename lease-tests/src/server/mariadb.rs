//! [`MariaDbServer`]: a private MariaDB for one test.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::process::{self, ScratchDir, SystemUser};

/// How long a start may take before the helper gives up.
const START_LIMIT: Duration = Duration::from_secs(60);
/// How long a graceful shutdown may take before the server is killed.
const STOP_LIMIT: Duration = Duration::from_secs(30);

/// A private MariaDB server: a fresh data directory from the local installation's
/// `mariadb-install-db`, served by `mariadbd` on a free port of 127.0.0.1, with `root` and an
/// empty password and a `test` database, in a temporary directory. Dropping it kills the server
/// and removes the directory.
///
/// ```no_run
/// use lease_tests::server::MariaDbServer;
///
/// let mut server = MariaDbServer::start()?;
/// let url = server.url(); // mysql://root@127.0.0.1:<port>/test
/// server.stop()?;
/// server.restart()?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct MariaDbServer {
    mariadbd: PathBuf,
    user: Option<SystemUser>,
    port: u16,
    /// Server options given after the helper's own.
    options: Vec<String>,
    child: Option<Child>,
    // Dropped last: the server must be stopped before its directory goes.
    dir: ScratchDir,
}

impl MariaDbServer {
    /// Creates a data directory and starts the server; returns once it greets clients.
    ///
    /// # Errors
    /// When the binaries are missing, or the install or the server fail; the message says which
    /// and includes their output.
    pub fn start() -> io::Result<Self> {
        let mut server = Self::unstarted(true, Vec::new())?;
        process::start_on_free_port(|port| server.start_on(port))?;
        Ok(server)
    }

    /// The helper with its directory ready but no server running: the system tables
    /// installed when `install`, else an empty data directory (for a Galera node that will
    /// receive its data from the cluster). `options` are given to `mariadbd` after the
    /// helper's own, at every start.
    pub(crate) fn unstarted(install: bool, options: Vec<String>) -> io::Result<Self> {
        let missing = |what: &str| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no {what} found: install the mariadb-server package"),
            )
        };
        let install_db = process::find_binary(&["mariadb-install-db", "mysql_install_db"], &[])
            .ok_or_else(|| missing("mariadb-install-db"))?;
        let mariadbd = process::find_binary(&["mariadbd", "mysqld"], &[])
            .ok_or_else(|| missing("mariadbd"))?;
        let user = if process::is_root() {
            Some(SystemUser::lookup("mysql").ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    "running as root, but there is no mysql user to run MariaDB as",
                )
            })?)
        } else {
            None
        };
        let dir = ScratchDir::new("mariadb", user.as_ref())?;
        // A temporary directory of its own, for the install too: a server starting (the
        // install's bootstrap is one) removes every `#sql*` file of its temporary directory, so
        // in the system's it removed the files of the temporary tables that the machine's own
        // server, running as the same user, had open (a query of that server then failed with
        // "Error on delete of '/tmp/#sql-temptable-...'").
        let tmp = dir.path().join("tmp");
        std::fs::create_dir(&tmp)?;
        if let Some(user) = &user {
            process::chown(&tmp, user)?;
        }
        let data = dir.path().join("data");
        if install {
            Self::install(&install_db, &data, &tmp, user.as_ref())?;
        } else {
            std::fs::create_dir(&data)?;
            if let Some(user) = &user {
                process::chown(&data, user)?;
            }
        }
        let init = dir.path().join("init.sql");
        std::fs::write(&init, "CREATE DATABASE IF NOT EXISTS test;\n")?;
        Ok(Self {
            mariadbd,
            user,
            port: 0,
            options,
            child: None,
            dir,
        })
    }

    fn install(
        install_db: &Path,
        data: &Path,
        tmp: &Path,
        user: Option<&SystemUser>,
    ) -> io::Result<()> {
        let mut install = Command::new(install_db);
        install
            .arg("--no-defaults")
            .arg("--auth-root-authentication-method=normal")
            .arg(format!("--datadir={}", data.display()))
            // Passed on to the bootstrap server (see `unstarted`).
            .arg(format!("--tmpdir={}", tmp.display()))
            .args(["--skip-test-db", "--skip-name-resolve"]);
        if let Some(user) = user {
            install.arg(format!("--user={}", user.name));
        }
        // On a busy machine the install now and then fails to write its system tables; a
        // second try on an empty directory goes through.
        let mut installed = process::run(&mut install, "mariadb-install-db").map(drop);
        for _ in 0..2 {
            if installed.is_ok() {
                break;
            }
            let _ = std::fs::remove_dir_all(data);
            std::thread::sleep(Duration::from_millis(500));
            installed = process::run(&mut install, "mariadb-install-db").map(drop);
        }
        installed
    }

    /// Starts the server on `port` of 127.0.0.1; returns once it greets clients.
    pub(crate) fn start_on(&mut self, port: u16) -> io::Result<()> {
        self.port = port;
        self.restart()
    }

    /// The temporary directory that holds its data, socket and log; gone once it is dropped.
    pub fn directory(&self) -> &Path {
        self.dir.path()
    }

    /// The port it listens on, on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A URL for `root`, without password, to the `test` database.
    pub fn url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}/test", self.port)
    }

    /// Whether it is running (as far as this helper started and stopped it).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Shuts the server down gracefully (killing it if that takes too long), ending every
    /// connection. The data stays.
    ///
    /// # Errors
    /// When the server cannot be signalled or waited for.
    pub fn stop(&mut self) -> io::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let signalled = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + STOP_LIMIT;
        if signalled.is_ok_and(|status| status.success()) {
            while Instant::now() < deadline {
                if child.try_wait()?.is_some() {
                    return Ok(());
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        child.kill()?;
        child.wait()?;
        Ok(())
    }

    /// Starts the stopped server again, on the same port with the same data; returns once it
    /// greets clients. Does nothing when it runs.
    ///
    /// # Errors
    /// When the server does not start; the message includes the end of its log.
    pub fn restart(&mut self) -> io::Result<()> {
        if self.child.is_some() {
            return Ok(());
        }
        let dir = self.dir.path();
        let log = dir.join("error.log");
        let mut command = Command::new(&self.mariadbd);
        command
            .arg("--no-defaults")
            .arg(format!("--datadir={}", dir.join("data").display()))
            .arg(format!("--port={}", self.port))
            .arg(format!("--socket={}", dir.join("mysqld.sock").display()))
            .arg(format!("--tmpdir={}", dir.join("tmp").display()))
            .arg(format!("--pid-file={}", dir.join("mysqld.pid").display()))
            .arg(format!("--log-error={}", log.display()))
            .arg(format!("--init-file={}", dir.join("init.sql").display()))
            .args(["--bind-address=127.0.0.1", "--skip-networking=0"])
            .args(["--skip-name-resolve", "--skip-log-bin"])
            .args([
                "--innodb-buffer-pool-size=32M",
                "--innodb-flush-log-at-trx-commit=0",
            ])
            .args(&self.options)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(user) = &self.user {
            command.arg(format!("--user={}", user.name));
        }
        let mut child = command.spawn().map_err(|error| {
            io::Error::new(error.kind(), format!("could not run {command:?}: {error}"))
        })?;
        let started = Instant::now();
        loop {
            if let Some(status) = child.try_wait()? {
                return Err(io::Error::other(format!(
                    "mariadbd exited with {status} while starting; its log:\n{}",
                    process::log_tail(&log)
                )));
            }
            let remaining = START_LIMIT.saturating_sub(started.elapsed());
            match process::wait_for_greeting(self.port, remaining.min(Duration::from_millis(500))) {
                Ok(()) => break,
                Err(_) if !remaining.is_zero() => continue,
                Err(error) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(io::Error::other(format!(
                        "{error}; mariadbd log:\n{}",
                        process::log_tail(&log)
                    )));
                }
            }
        }
        self.child = Some(child);
        Ok(())
    }
}

impl Drop for MariaDbServer {
    fn drop(&mut self) {
        // Killed, not shut down: nothing of a throwaway server's data needs to survive.
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
