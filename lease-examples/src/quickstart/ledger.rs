//! [`Ledger`]: every round every instance ran or skipped, printed as it happens and checked at
//! the end.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

use super::clock::{Hms, SimClock};
use super::summary::{Summary, Takeover};

/// One round that ran.
#[derive(Debug, Clone)]
pub(crate) struct Run {
    /// The lease it ran under, such as `uptime:node-1`.
    pub(crate) lease: String,
    /// Which round of the job's schedule it was (0-based).
    pub(crate) round: u64,
    pub(crate) instance: &'static str,
    pub(crate) fence: u64,
    /// Simulated start and end; `end` is `None` while it runs.
    pub(crate) start: Duration,
    pub(crate) end: Option<Duration>,
}

/// A leader's run of consecutive rounds under one fence.
#[derive(Debug, Clone)]
struct Term {
    instance: &'static str,
    fence: u64,
    first: u64,
    last: u64,
}

/// The instance that was killed, and the leases it held then.
#[derive(Debug)]
struct Killed {
    instance: &'static str,
    /// Real time since the start, when it was killed.
    real: Duration,
    held: Vec<String>,
}

#[derive(Debug, Default)]
struct State {
    runs: Vec<Run>,
    skipped: BTreeMap<String, u64>,
    terms: BTreeMap<String, Term>,
    killed: Option<Killed>,
    takeovers: Vec<Takeover>,
    errors: Vec<String>,
}

/// Records rounds from every instance, and prints each event as it happens.
pub(crate) struct Ledger {
    clock: SimClock,
    out: Mutex<Box<dyn Write + Send>>,
    state: Mutex<State>,
}

impl Ledger {
    pub(crate) fn new(clock: SimClock, out: Box<dyn Write + Send>) -> Self {
        Self {
            clock,
            out: Mutex::new(out),
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Prints a line as it happens: the demo's output, not a log.
    pub(crate) fn say(&self, line: impl AsRef<str>) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        // A closed standard output must not stop the demo; the summary still decides the exit.
        let _ = writeln!(out, "{}", line.as_ref());
        let _ = out.flush();
    }

    fn event(&self, lease: &str, instance: &str, what: impl AsRef<str>) {
        self.say(format!(
            "{}  {lease:<14} {instance}  {}",
            Hms(self.clock.now()),
            what.as_ref()
        ));
    }

    /// A per-round job started a round; returns its index for [`finished`](Ledger::finished).
    pub(crate) fn started(
        &self,
        lease: &str,
        round: u64,
        instance: &'static str,
        fence: u64,
    ) -> usize {
        let start = self.clock.now();
        let index = {
            let mut state = self.state();
            self.note_takeover(&mut state, lease, instance, fence);
            state.runs.push(Run {
                lease: lease.to_owned(),
                round,
                instance,
                fence,
                start,
                end: None,
            });
            state.runs.len() - 1
        };
        self.event(
            lease,
            instance,
            format!("runs round {} with fence {fence}", round + 1),
        );
        index
    }

    /// The round started as `index` ended.
    pub(crate) fn finished(&self, index: usize) {
        let end = self.clock.now();
        self.state().runs[index].end = Some(end);
    }

    /// An instance found the lease of a per-round job held, and skipped the round.
    pub(crate) fn skipped(&self, lease: &str, round: u64, instance: &'static str) {
        *self.state().skipped.entry(lease.to_owned()).or_default() += 1;
        self.event(
            lease,
            instance,
            format!(
                "skips round {}: another instance holds the lease",
                round + 1
            ),
        );
    }

    /// A leader ran a round. Printed only when the leadership changes: frequent rounds would
    /// drown everything else.
    pub(crate) fn led(&self, lease: &str, round: u64, instance: &'static str, fence: u64) {
        let now = self.clock.now();
        let mut lines = Vec::new();
        {
            let mut state = self.state();
            state.runs.push(Run {
                lease: lease.to_owned(),
                round,
                instance,
                fence,
                start: now,
                end: Some(now),
            });
            let same_term = state
                .terms
                .get(lease)
                .is_some_and(|term| term.instance == instance && term.fence == fence);
            if same_term {
                if let Some(term) = state.terms.get_mut(lease) {
                    term.last = round;
                }
            } else {
                if let Some(previous) = state.terms.get(lease) {
                    lines.push((
                        previous.instance,
                        format!(
                            "ran rounds {}-{} with fence {}",
                            previous.first + 1,
                            previous.last + 1,
                            previous.fence
                        ),
                    ));
                }
                let took_over = self.note_takeover(&mut state, lease, instance, fence);
                let gap = state
                    .terms
                    .get(lease)
                    .filter(|previous| previous.last + 1 < round)
                    .map(|previous| format!(" (rounds {}-{} missed)", previous.last + 2, round));
                let verb = match took_over {
                    Some(after) => format!(
                        "takes over at round {} with fence {fence}, {:.1} s after the kill{}",
                        round + 1,
                        after.as_secs_f64(),
                        gap.unwrap_or_default()
                    ),
                    None => format!("leads from round {} with fence {fence}", round + 1),
                };
                lines.push((instance, verb));
                state.terms.insert(
                    lease.to_owned(),
                    Term {
                        instance,
                        fence,
                        first: round,
                        last: round,
                    },
                );
            }
        }
        for (who, line) in lines {
            self.event(lease, who, line);
        }
    }

    /// A follower did not run a round of a leader job.
    pub(crate) fn followed(&self, lease: &str) {
        *self.state().skipped.entry(lease.to_owned()).or_default() += 1;
    }

    /// A store call failed (other than in the killed instance, whose calls all fail).
    pub(crate) fn failed(
        &self,
        lease: &str,
        instance: &'static str,
        error: &dyn std::error::Error,
    ) {
        let message = lease_core::ErrorChain(error).to_string();
        self.state()
            .errors
            .push(format!("{lease} on {instance}: {message}"));
        self.event(lease, instance, format!("error: {message}"));
    }

    /// The leases `instance` holds now: the leaderships it has and the rounds it is running.
    pub(crate) fn holdings(&self, instance: &str) -> Vec<String> {
        let state = self.state();
        let mut held: Vec<String> = state
            .terms
            .iter()
            .filter(|(_, term)| term.instance == instance)
            .map(|(lease, _)| lease.clone())
            .collect();
        held.extend(
            state
                .runs
                .iter()
                .filter(|run| run.instance == instance && run.end.is_none())
                .map(|run| run.lease.clone()),
        );
        held.sort();
        held.dedup();
        held
    }

    /// Whoever leads `lease` now.
    pub(crate) fn leader_of(&self, lease: &str) -> Option<&'static str> {
        self.state().terms.get(lease).map(|term| term.instance)
    }

    /// `instance` was killed: its open rounds end here, and the leases it held are watched for
    /// a takeover.
    pub(crate) fn killed(&self, instance: &'static str) {
        let held = self.holdings(instance);
        let at = self.clock.now();
        {
            let mut state = self.state();
            for run in state
                .runs
                .iter_mut()
                .filter(|run| run.instance == instance && run.end.is_none())
            {
                run.end = Some(at);
            }
            state.killed = Some(Killed {
                instance,
                real: self.clock.elapsed(),
                held: held.clone(),
            });
        }
        self.say(format!(
            "{}  ** instance {instance} killed: it stops without releasing anything; its leases ({}) lapse within the TTL",
            Hms(at),
            if held.is_empty() { "none".to_owned() } else { held.join(", ") }
        ));
    }

    /// Records a takeover when `instance` is the first after the kill to hold a lease the killed
    /// instance held; returns how long after the kill (real time).
    fn note_takeover(
        &self,
        state: &mut State,
        lease: &str,
        instance: &'static str,
        fence: u64,
    ) -> Option<Duration> {
        let killed = state.killed.as_ref()?;
        if killed.instance == instance
            || !killed.held.iter().any(|held| held == lease)
            || state.takeovers.iter().any(|t| t.lease == lease)
        {
            return None;
        }
        let after = self.clock.elapsed().saturating_sub(killed.real);
        let takeover = Takeover {
            lease: lease.to_owned(),
            from: killed.instance,
            to: instance,
            fence,
            after,
            at: self.clock.now(),
        };
        state.takeovers.push(takeover);
        Some(after)
    }

    /// Everything recorded, checked.
    pub(crate) fn summary(&self, ttl: Duration, end: Duration) -> Summary {
        let state = self.state();
        Summary::check(
            &state.runs,
            &state.skipped,
            state.takeovers.clone(),
            state.errors.clone(),
            ttl,
            end,
        )
    }
}
