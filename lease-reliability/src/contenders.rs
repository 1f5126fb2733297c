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
use crate::reaped::Reaped;
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
    children: Vec<Reaped>,
    drivers: Vec<Driver>,
    logs: PathBuf,
}

/// What one contender did, from its standard output and its log.
#[derive(Debug, Clone)]
pub struct Member {
    /// Its driver.
    pub driver: Driver,
    /// Acquisition attempts.
    pub attempts: u64,
    /// Attempts that failed with an error (not "not acquired").
    pub errors: u64,
    /// Critical sections in its log.
    pub sections: usize,
}

/// What the contenders did, from their standard output and logs.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Acquisition attempts.
    pub attempts: u64,
    /// Attempts that failed with an error (not "not acquired").
    pub errors: u64,
    /// Each contender's share, in the order of the members.
    pub members: Vec<Member>,
    /// The checker's verdict over every process's sections.
    pub verdict: Verdict,
}

impl Outcome {
    /// Records in `counts` a violation for each contender that logged fewer than `sections`
    /// critical sections, or whose attempts failed with an error more often than they did not:
    /// a history to which one process or driver added next to nothing proves little about it,
    /// however clean, and a driver whose every call fails must not pass for a quiet one. Faults
    /// make calls fail, but every fault is healed within a few seconds and the scenarios leave
    /// a contender most of its time fault-free.
    pub fn expect_each(&self, counts: &mut Counts, sections: usize) {
        for (i, member) in self.members.iter().enumerate() {
            let driver = member.driver.as_str();
            counts.expect(member.sections >= sections, || {
                format!(
                    "contender {i} ({driver}) logged {} critical sections, fewer than {sections}",
                    member.sections
                )
            });
            counts.expect(member.errors * 2 <= member.attempts, || {
                format!(
                    "contender {i} ({driver}): {} of its {} acquisition attempts failed",
                    member.errors, member.attempts
                )
            });
        }
    }
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
            drivers: members.iter().map(|(driver, _)| *driver).collect(),
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
            contenders.children.push(Reaped(child));
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
    /// and for each process whose log holds other than the sections it reported; answers what
    /// they did (see [`Outcome::expect_each`] for what each must have done).
    ///
    /// # Panics
    /// When a log cannot be read.
    pub fn finish(mut self, counts: &mut Counts, limit: Duration) -> Outcome {
        let deadline = Instant::now() + limit;
        let mut outcome = Outcome::default();
        let mut sections = Vec::new();
        let children = std::mem::take(&mut self.children);
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
            let (mut attempts, mut reported, mut errors) = (0, 0, 0);
            for field in stats.split_whitespace() {
                let number = |n: &str| n.parse::<u64>().unwrap_or(0);
                match field.split_once('=') {
                    Some(("attempts", n)) => attempts = number(n),
                    Some(("sections", n)) => reported = number(n),
                    Some(("errors", n)) => errors = number(n),
                    _ => {}
                }
            }
            let path = self.log(i);
            let logged = if path.exists() {
                history::read(&path).expect("a contender's log")
            } else {
                Vec::new()
            };
            counts.expect(logged.len() as u64 == reported, || {
                format!(
                    "contender {i} reported {reported} sections, its log holds {}",
                    logged.len()
                )
            });
            outcome.attempts += attempts;
            outcome.errors += errors;
            outcome.members.push(Member {
                driver: self.drivers[i],
                attempts,
                errors,
                sections: logged.len(),
            });
            sections.extend(logged);
        }
        outcome.verdict = history::check(&sections);
        for violation in &outcome.verdict.violations {
            counts.violation(violation.to_string());
        }
        outcome
    }
}

impl Drop for Contenders {
    fn drop(&mut self) {
        // Each process is killed and reaped first, as its `Reaped` is dropped.
        self.children.clear();
        let _ = std::fs::remove_dir_all(&self.logs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(driver: Driver, attempts: u64, errors: u64, sections: usize) -> Member {
        Member {
            driver,
            attempts,
            errors,
            sections,
        }
    }

    #[test]
    fn every_member_must_take_part() {
        let outcome = Outcome {
            members: vec![
                member(Driver::Sqlx, 1_000, 50, 30),
                // Every call failed: no section, and the errors are all its attempts.
                member(Driver::Diesel, 900, 900, 0),
                // Few sections, too many failures.
                member(Driver::Sqlx, 100, 51, 2),
                // Right at the bounds.
                member(Driver::Diesel, 100, 50, 3),
            ],
            ..Outcome::default()
        };
        let mut counts = Counts::new("history", "test");
        outcome.expect_each(&mut counts, 3);
        assert_eq!(
            counts.details,
            [
                "contender 1 (diesel) logged 0 critical sections, fewer than 3",
                "contender 1 (diesel): 900 of its 900 acquisition attempts failed",
                "contender 2 (sqlx) logged 2 critical sections, fewer than 3",
                "contender 2 (sqlx): 51 of its 100 acquisition attempts failed",
            ]
        );
    }
}
