//! A history of critical sections from many processes, and a checker that proves no two of
//! them believed they held one lease at the same moment, and that fences grew in the order the
//! leases were taken.
//!
//! # What a section records
//!
//! A [`Section`] is one acquisition as the process that made it lived it: the lease's name,
//! the fence and holder it got, and its **believed-valid interval** `[start, end]`. Both ends
//! are readings of the shared monotonic clock ([`now`]) taken *just before* a call of
//! `is_held()` that answered `true`: `start` is the first such reading after the acquisition
//! returned, `end` the last one before the process stopped believing (because `is_held()`
//! answered `false`, the lost signal fired, or it released the lease). `is_held()` reads its own
//! clock after ours, so at both ends, and at every check in between, the process provably
//! believed it held the lease. A section that never saw `is_held()` answer `true` is not
//! recorded: it never believed anything.
//!
//! Work done *after* a check that answered `true` is outside the interval: a process that is
//! paused between its check and its work does that work after it may have lost the lease. That
//! is the window every lease has (see RELIABILITY.md), and why each step checks first.
//!
//! # Why one clock serves every process
//!
//! `CLOCK_MONOTONIC` on Linux is one clock for the whole machine (it counts from boot and is
//! never set), so readings from different processes compare directly. It is also the clock
//! `std::time::Instant`, and so tokio's timers and lease-core's deadlines, run on. The wall
//! clock would not do: it may be stepped, and the clock-skew scenario moves it on purpose.
//!
//! # What the checker proves
//!
//! Per name, with sections in order of their start: no two intervals overlap (the later one
//! starts strictly after the earlier one ends), and fences strictly increase. Non-overlapping
//! intervals make "order of acquisition" well defined, so the second rule is exactly "a later
//! holder has a larger fence".

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;
use std::sync::Mutex;

/// Nanoseconds on `CLOCK_MONOTONIC`, the one clock every process of the machine shares.
pub fn now() -> u64 {
    let time = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    // Monotonic time is never negative.
    u64::try_from(time.tv_sec).unwrap_or(0) * 1_000_000_000
        + u64::try_from(time.tv_nsec).unwrap_or(0)
}

/// How a critical section ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Ending {
    /// The work finished and the lease was released while still believed held.
    Released,
    /// `is_held()` answered `false` or the lost signal fired before the work finished.
    Lost,
}

impl Ending {
    fn as_str(self) -> &'static str {
        match self {
            Self::Released => "released",
            Self::Lost => "lost",
        }
    }
}

/// One critical section: a lease as one holder believed it held it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// The lease.
    pub name: String,
    /// The fence this acquisition got.
    pub fence: u64,
    /// The holder id of this acquisition.
    pub holder: String,
    /// Which process and task ran it, for messages.
    pub worker: String,
    /// The first moment it provably believed it held the lease ([`now`]).
    pub start: u64,
    /// The last moment it provably believed it held the lease ([`now`]).
    pub end: u64,
    /// How it ended.
    pub ending: Ending,
}

impl Section {
    /// The section as one line of tab-separated fields; names and holders are written with
    /// Rust's escapes so a tab or newline in them cannot break the line.
    pub fn to_line(&self) -> String {
        format!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{}",
            self.name.escape_default(),
            self.fence,
            self.holder.escape_default(),
            self.worker.escape_default(),
            self.start,
            self.end,
            self.ending.as_str()
        )
    }

    /// Reads a line [`to_line`](Section::to_line) wrote. Names are compared escaped, which
    /// keeps them distinct.
    ///
    /// # Errors
    /// When the line is not one.
    pub fn from_line(line: &str) -> Result<Self, String> {
        let fields: Vec<&str> = line.split('\t').collect();
        let [name, fence, holder, worker, start, end, ending] = fields[..] else {
            return Err(format!("not a section: {line:?}"));
        };
        let number = |field: &str| {
            field
                .parse::<u64>()
                .map_err(|e| format!("{field:?} in {line:?}: {e}"))
        };
        Ok(Self {
            name: name.to_owned(),
            fence: number(fence)?,
            holder: holder.to_owned(),
            worker: worker.to_owned(),
            start: number(start)?,
            end: number(end)?,
            ending: match ending {
                "released" => Ending::Released,
                "lost" => Ending::Lost,
                other => return Err(format!("unknown ending {other:?} in {line:?}")),
            },
        })
    }
}

/// Appends sections to a file, one line each, flushed at once, so a process that is killed
/// loses no section it finished. Shared by the tasks of one process.
#[derive(Debug)]
pub struct HistoryLog {
    file: Mutex<File>,
}

impl HistoryLog {
    /// Opens `path` for appending, creating it.
    ///
    /// # Errors
    /// When the file cannot be opened.
    pub fn append_to(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self {
            file: Mutex::new(file),
        })
    }

    /// Writes one section.
    ///
    /// # Errors
    /// When the write fails.
    pub fn record(&self, section: &Section) -> io::Result<()> {
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        writeln!(file, "{}", section.to_line())?;
        file.flush()
    }
}

/// Reads every section of a file [`HistoryLog`] wrote.
///
/// # Errors
/// When the file cannot be read or holds a line that is not a section.
pub fn read(path: &Path) -> io::Result<Vec<Section>> {
    let mut sections = Vec::new();
    for line in BufReader::new(File::open(path)?).lines() {
        let line = line?;
        if line.is_empty() {
            continue;
        }
        sections.push(Section::from_line(&line).map_err(io::Error::other)?);
    }
    Ok(sections)
}

/// A broken rule, with the two sections that break it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// Two holders believed they held the same lease at the same moment.
    Overlap {
        /// The section that started first.
        earlier: Section,
        /// The section that started while the first was still believed held.
        later: Section,
    },
    /// A later acquisition of a name did not get a larger fence.
    FenceNotIncreasing {
        /// The section that started first.
        earlier: Section,
        /// The next section of the same name, with a fence not above the first's.
        later: Section,
    },
    /// A section that ends before it starts: the log is broken.
    Malformed(Section),
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Overlap { earlier, later } => write!(
                f,
                "overlap on {}: fence {} by {} believed held until {} ns, fence {} by {} from {} ns",
                earlier.name,
                earlier.fence,
                earlier.worker,
                earlier.end,
                later.fence,
                later.worker,
                later.start
            ),
            Self::FenceNotIncreasing { earlier, later } => write!(
                f,
                "fence did not increase on {}: {} by {} then {} by {}",
                earlier.name, earlier.fence, earlier.worker, later.fence, later.worker
            ),
            Self::Malformed(section) => write!(f, "section ends before it starts: {section:?}"),
        }
    }
}

/// What [`check`] found.
#[derive(Debug, Clone, Default)]
pub struct Verdict {
    /// Sections checked.
    pub sections: usize,
    /// Sections per name.
    pub per_name: BTreeMap<String, usize>,
    /// Sections that ended by loss rather than release.
    pub lost: usize,
    /// Every broken rule.
    pub violations: Vec<Violation>,
}

/// Checks the rules of the module docs on every name of `sections`.
pub fn check(sections: &[Section]) -> Verdict {
    let mut verdict = Verdict {
        sections: sections.len(),
        lost: sections.iter().filter(|s| s.ending == Ending::Lost).count(),
        ..Verdict::default()
    };
    let mut by_name: BTreeMap<&str, Vec<&Section>> = BTreeMap::new();
    for section in sections {
        if section.end < section.start {
            verdict
                .violations
                .push(Violation::Malformed(section.clone()));
            continue;
        }
        by_name.entry(&section.name).or_default().push(section);
    }
    for (name, mut list) in by_name {
        verdict.per_name.insert(name.to_owned(), list.len());
        list.sort_by_key(|s| (s.start, s.end));
        // Each section against the one before it, and against the latest end seen so far: a
        // long section may overlap several later ones.
        let mut reach: Option<&Section> = None;
        for pair in list.windows(2) {
            let (earlier, later) = (pair[0], pair[1]);
            if later.fence <= earlier.fence {
                verdict.violations.push(Violation::FenceNotIncreasing {
                    earlier: earlier.clone(),
                    later: later.clone(),
                });
            }
        }
        for section in list {
            if let Some(longest) = reach
                && section.start <= longest.end
            {
                verdict.violations.push(Violation::Overlap {
                    earlier: longest.clone(),
                    later: section.clone(),
                });
            }
            if reach.is_none_or(|longest| section.end > longest.end) {
                reach = Some(section);
            }
        }
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(name: &str, fence: u64, start: u64, end: u64) -> Section {
        Section {
            name: name.to_owned(),
            fence,
            holder: format!("holder-{fence}"),
            worker: format!("worker-{fence}"),
            start,
            end,
            ending: Ending::Released,
        }
    }

    #[test]
    fn a_clean_history_passes() {
        let verdict = check(&[
            section("a", 1, 0, 10),
            section("a", 2, 11, 20),
            section("b", 1, 5, 30),
            section("a", 5, 25, 40),
        ]);
        assert!(verdict.violations.is_empty(), "{:?}", verdict.violations);
        assert_eq!(verdict.sections, 4);
        assert_eq!(verdict.per_name["a"], 3);
    }

    #[test]
    fn overlaps_and_shrinking_fences_are_found() {
        let verdict = check(&[
            section("a", 1, 0, 100),
            section("a", 2, 50, 60),
            section("a", 3, 70, 80),
            section("b", 7, 0, 10),
            section("b", 7, 20, 30),
            section("c", 1, 10, 5),
        ]);
        let overlaps = verdict
            .violations
            .iter()
            .filter(|v| matches!(v, Violation::Overlap { .. }))
            .count();
        let fences = verdict
            .violations
            .iter()
            .filter(|v| matches!(v, Violation::FenceNotIncreasing { .. }))
            .count();
        let malformed = verdict
            .violations
            .iter()
            .filter(|v| matches!(v, Violation::Malformed(_)))
            .count();
        // Fence 1's interval covers both 2 and 3.
        assert_eq!(
            (overlaps, fences, malformed),
            (2, 1, 1),
            "{:?}",
            verdict.violations
        );
    }

    #[test]
    fn touching_intervals_overlap() {
        let verdict = check(&[section("a", 1, 0, 10), section("a", 2, 10, 20)]);
        assert_eq!(verdict.violations.len(), 1);
    }

    #[test]
    fn lines_round_trip_awkward_names() {
        let mut original = section("tab\there\nnewline 'quote' ünï", 42, 3, 9);
        original.ending = Ending::Lost;
        let read = Section::from_line(&original.to_line()).unwrap();
        assert_eq!(read.fence, 42);
        assert_eq!(read.ending, Ending::Lost);
        assert_eq!(read.name, original.name.escape_default().to_string());
        assert!(Section::from_line("not\ta section").is_err());
    }

    #[test]
    fn the_clock_moves_forward() {
        let a = now();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = now();
        assert!(b > a + 1_000_000, "{a} then {b}");
    }
}
