//! [`Contenders`]: worker processes in `mode=history` (see [`worker::history`](crate::worker::history))
//! contending for the same names, each through its own driver and URL, and the check of the
//! history they logged.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lease_tests::env;
use lease_tests::history::{self, Verdict};

use crate::Driver;
use crate::db::Db;
use crate::report::Counts;

/// What every contender does: the table, the names, its tasks, the TTL and how long.
#[derive(Debug, Clone)]
pub struct Contest {
    /// The database.
    pub db: Db,
    /// The lease table, set up beforehand.
    pub table: String,
    /// The names, comma-separated.
    pub names: String,
    /// Tasks per process.
    pub tasks: u32,
    /// The TTL.
    pub ttl_ms: u64,
    /// How long they contend.
    pub secs: u64,
}

/// Running contenders; killed and their logs removed when dropped.
#[derive(Debug)]
pub struct Contenders {
    children: Vec<Child>,
    logs: PathBuf,
}

/// What the contenders did, from their standard output and logs.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Acquisition attempts.
    pub attempts: u64,
    /// Attempts that failed with an error (not "not acquired").
    pub errors: u64,
    /// The checker's verdict over every process's sections.
    pub verdict: Verdict,
}

impl Contenders {
    /// Starts one process of `worker` (the worker program's path) per `(driver, url)`.
    ///
    /// # Errors
    /// When the log directory cannot be made or a process cannot start.
    pub fn start(
        worker: &Path,
        contest: &Contest,
        members: &[(Driver, String)],
    ) -> std::io::Result<Self> {
        let logs = std::env::temp_dir().join(env::unique_table("lease_contenders"));
        std::fs::create_dir(&logs)?;
        let mut contenders = Self {
            children: Vec::new(),
            logs,
        };
        for (i, (driver, url)) in members.iter().enumerate() {
            let child = Command::new(worker)
                .args([
                    "mode=history".to_owned(),
                    format!("db={}", contest.db),
                    format!("driver={}", driver.as_str()),
                    format!("url={url}"),
                    format!("table={}", contest.table),
                    format!("names={}", contest.names),
                    format!("tasks={}", contest.tasks),
                    format!("secs={}", contest.secs),
                    format!("ttl_ms={}", contest.ttl_ms),
                    format!("out={}", contenders.log(i).display()),
                    format!("worker=p{i}"),
                ])
                .stdout(Stdio::piped())
                .spawn()?;
            contenders.children.push(child);
        }
        Ok(contenders)
    }

    /// The process of member `i`, to signal (`SIGSTOP`, `SIGCONT`).
    ///
    /// # Panics
    /// When there is no member `i`.
    pub fn process(&self, i: usize) -> &Child {
        &self.children[i]
    }

    fn log(&self, i: usize) -> PathBuf {
        self.logs.join(format!("{i}.log"))
    }

    /// Waits for every process to end (each ends on its own after the contest's time; one
    /// still running `limit` after this call began is killed and counted as failed), records
    /// in `counts` a violation for each one that failed, for each broken rule of the history,
    /// and for sections logged but not reported; answers what they did.
    ///
    /// # Panics
    /// When a log cannot be read.
    pub fn finish(mut self, counts: &mut Counts, limit: Duration) -> Outcome {
        let deadline = Instant::now() + limit;
        let mut outcome = Outcome::default();
        let mut reported = 0;
        let children = std::mem::take(&mut self.children);
        let processes = children.len();
        for (i, mut child) in children.into_iter().enumerate() {
            let output = child.stdout.take();
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            if child.try_wait().ok().flatten().is_none() {
                counts.violation(format!("contender {i} was still running after {limit:?}"));
                let _ = child.kill();
            }
            let status = child.wait().expect("a contender to wait for");
            let mut stats = String::new();
            if let Some(mut stdout) = output {
                let _ = std::io::Read::read_to_string(&mut stdout, &mut stats);
            }
            counts.expect(status.success(), || {
                format!("contender {i} exited with {status}")
            });
            // `stats attempts=<n> sections=<n> errors=<n>`
            for field in stats.split_whitespace() {
                let number = |n: &str| n.parse::<u64>().unwrap_or(0);
                match field.split_once('=') {
                    Some(("attempts", n)) => outcome.attempts += number(n),
                    Some(("sections", n)) => reported += number(n),
                    Some(("errors", n)) => outcome.errors += number(n),
                    _ => {}
                }
            }
        }
        let mut sections = Vec::new();
        for i in 0..processes {
            let path = self.log(i);
            if path.exists() {
                sections.extend(history::read(&path).expect("a contender's log"));
            }
        }
        counts.expect(sections.len() as u64 == reported, || {
            format!(
                "the contenders reported {reported} sections, their logs hold {}",
                sections.len()
            )
        });
        outcome.verdict = history::check(&sections);
        for violation in &outcome.verdict.violations {
            counts.violation(violation.to_string());
        }
        outcome
    }
}

impl Drop for Contenders {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.logs);
    }
}
