//! [`Shutdown`]: what a client has running, so a graceful shutdown knows what to wait for.

use std::sync::{Arc, Mutex, MutexGuard};

use futures::channel::oneshot;
use futures::future::{self, Either};

use crate::clock::Clock;
use crate::signal::Signal;

/// What a [`Token`] stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// An acquisition in flight, until it answered (a guard, nothing, or a lease taken as the
    /// shutdown began, given back).
    Acquiring,
    /// A guard an acquisition gave, until it is released or dropped.
    Guard,
    /// A release statement in flight, of a guard released or dropped.
    Releasing,
    /// A `run_exclusive` call, from before it takes the lease until it gave it back.
    Run,
    /// A campaign, until its future ends.
    Campaign,
    /// A schedule's loop, until it ends.
    Schedule,
}

/// How many of each kind are running.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Running {
    pub(crate) acquiring: usize,
    pub(crate) guards: usize,
    pub(crate) releasing: usize,
    pub(crate) runs: usize,
    pub(crate) campaigns: usize,
    pub(crate) schedules: usize,
}

impl Running {
    fn count(&mut self, kind: Kind) -> &mut usize {
        match kind {
            Kind::Acquiring => &mut self.acquiring,
            Kind::Guard => &mut self.guards,
            Kind::Releasing => &mut self.releasing,
            Kind::Run => &mut self.runs,
            Kind::Campaign => &mut self.campaigns,
            Kind::Schedule => &mut self.schedules,
        }
    }

    /// Nothing at all runs.
    pub(crate) fn is_idle(&self) -> bool {
        *self == Self::default()
    }

    /// Nothing runs but guards that their owners hold: every call and statement has ended.
    pub(crate) fn is_settled(&self) -> bool {
        self.unsettled() == 0
    }

    /// How many calls and statements still run: everything but the guards their owners hold.
    pub(crate) fn unsettled(&self) -> usize {
        self.acquiring + self.releasing + self.runs + self.campaigns + self.schedules
    }
}

/// What happened since the shutdown began, as [`ShutdownReport`](crate::ShutdownReport) tells it.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Tally {
    pub(crate) released: usize,
    pub(crate) failed: usize,
    pub(crate) finished: usize,
    pub(crate) cancelled: usize,
    pub(crate) resigned: usize,
    pub(crate) forced: usize,
}

#[derive(Debug, Default)]
struct State {
    running: Running,
    tally: Tally,
    /// Woken at every change of `running`.
    waiters: Vec<oneshot::Sender<()>>,
}

/// The client's running calls, guards and campaigns, and the two moments of a shutdown:
/// `closing` (no new acquisitions, campaigns resign, running work may finish) and `cancelling`
/// (the grace period is over: running work is stopped).
#[derive(Debug)]
pub(crate) struct Shutdown {
    state: Mutex<State>,
    closing: Signal,
    cancelling: Signal,
}

impl Shutdown {
    pub(crate) fn new() -> Self {
        Self {
            state: Mutex::new(State::default()),
            closing: Signal::new(),
            cancelling: Signal::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A token for something that starts now; `None` once the shutdown has begun.
    pub(crate) fn enter(self: &Arc<Self>, kind: Kind) -> Option<Token> {
        let mut state = self.state();
        // Checked under the lock, so a shutdown that begins counts every token entered before.
        if self.closing.is_fired() {
            return None;
        }
        *state.running.count(kind) += 1;
        Some(Token {
            shutdown: Arc::clone(self),
            kind,
        })
    }

    /// A token for a release the shutdown sends itself ([`Kind::Releasing`]), entered even
    /// once it has begun: a later shutdown waits for it as for a dropped guard's release.
    pub(crate) fn enter_own_release(self: &Arc<Self>) -> Token {
        let mut state = self.state();
        *state.running.count(Kind::Releasing) += 1;
        wake(&mut state);
        Token {
            shutdown: Arc::clone(self),
            kind: Kind::Releasing,
        }
    }

    /// Whether the shutdown has begun.
    pub(crate) fn is_closing(&self) -> bool {
        self.closing.is_fired()
    }

    /// Completes once the shutdown has begun.
    pub(crate) fn closing(&self) -> impl Future<Output = ()> + Send + Unpin + 'static {
        self.closing.fired()
    }

    /// Whether the grace period is over.
    pub(crate) fn is_cancelling(&self) -> bool {
        self.cancelling.is_fired()
    }

    /// Completes once the grace period is over.
    pub(crate) fn cancelling(&self) -> impl Future<Output = ()> + Send + Unpin + 'static {
        self.cancelling.fired()
    }

    /// Begins the shutdown: no token is entered from now on.
    pub(crate) fn close(&self) {
        let _state = self.state();
        self.closing.fire();
    }

    /// Ends the grace period.
    pub(crate) fn cancel(&self) {
        self.cancelling.fire();
    }

    /// What runs now.
    pub(crate) fn running(&self) -> Running {
        self.state().running
    }

    /// What happened since the shutdown began.
    pub(crate) fn tally(&self) -> Tally {
        self.state().tally
    }

    /// Waits until `done` holds for what runs, or until `deadline` on `clock`: whether it held.
    /// Each round waits for a change or the deadline, so the wait ends by the deadline.
    pub(crate) async fn wait_until(
        &self,
        clock: &Clock,
        deadline: u64,
        done: impl Fn(&Running) -> bool,
    ) -> bool {
        loop {
            let changed = {
                let mut state = self.state();
                if done(&state.running) {
                    return true;
                }
                if clock.now() >= deadline {
                    return false;
                }
                let (wake, changed) = oneshot::channel();
                state.waiters.retain(|waiter| !waiter.is_canceled());
                state.waiters.push(wake);
                changed
            };
            let sleep = std::pin::pin!(clock.sleep_until(deadline));
            if let Either::Right(_) = future::select(changed, sleep).await {
                return done(&self.state().running);
            }
        }
    }

    fn record(&self, tally: impl FnOnce(&mut Tally)) {
        if self.is_closing() {
            tally(&mut self.state().tally);
        }
    }

    /// Counts a release statement's answer, once the shutdown has begun: `Ok(true)` gave a lease
    /// back, an error left it to lapse, `Ok(false)` found it gone already.
    pub(crate) fn record_release<E>(&self, answer: &Result<bool, E>) {
        match answer {
            Ok(true) => self.record(|tally| tally.released += 1),
            Ok(false) => {}
            Err(_) => self.record(|tally| tally.failed += 1),
        }
    }

    /// Counts work that ended once the shutdown has begun: let finish, or stopped.
    pub(crate) fn record_run(&self, cancelled: bool) {
        self.record(|tally| {
            if cancelled {
                tally.cancelled += 1;
            } else {
                tally.finished += 1;
            }
        });
    }

    /// Counts a leadership given back because of the shutdown.
    pub(crate) fn record_resigned(&self) {
        self.record(|tally| tally.resigned += 1);
    }

    /// Counts a lease left to lapse, not given back, under work that did not stop: as a
    /// release that failed, whose lease lapses too.
    pub(crate) fn record_lapsed(&self) {
        self.record(|tally| tally.failed += 1);
    }

    /// Counts `count` guards the shutdown released by force.
    pub(crate) fn record_forced(&self, count: usize) {
        self.record(|tally| tally.forced += count);
    }
}

/// Something that runs, counted by [`Shutdown`] until the token is dropped.
#[derive(Debug)]
pub(crate) struct Token {
    shutdown: Arc<Shutdown>,
    kind: Kind,
}

impl Token {
    /// The shutdown it is counted by.
    pub(crate) fn shutdown(&self) -> &Shutdown {
        &self.shutdown
    }

    /// Counts it as `kind` from now on, such as a guard whose release statement is sent.
    pub(crate) fn become_kind(&mut self, kind: Kind) {
        let mut state = self.shutdown.state();
        *state.running.count(self.kind) -= 1;
        *state.running.count(kind) += 1;
        self.kind = kind;
        wake(&mut state);
    }
}

impl Drop for Token {
    fn drop(&mut self) {
        let mut state = self.shutdown.state();
        *state.running.count(self.kind) -= 1;
        wake(&mut state);
    }
}

fn wake(state: &mut State) {
    for waiter in state.waiters.drain(..) {
        let _ = waiter.send(());
    }
}
