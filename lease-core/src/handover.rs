//! [`Releases`]: wakes the waiters for a lease when the store says it was released.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::channel::oneshot;
use futures::future::{self, Either, FutureExt, Shared};

use crate::backoff::Backoff;
use crate::timed_store::TimedStore;
use crate::{LeaseName, Runtime};

/// The waiters of one client, by lease, and its one subscription to the store's release events.
///
/// The subscription is opened by the first waiter (an `acquire` or a campaign, before its first
/// attempt) and kept while the client lives, or until its shutdown ([`Releases::close`]): a store may
/// spend a dedicated connection on it, once per client rather than once per waiter. When it
/// ends, the next waiter opens it again; when it keeps ending soon after it opened (a listening
/// connection cut again and again), it is opened again only after a pause that doubles each
/// time, and the waiters poll meanwhile: every opening wakes every waiter, so without the pause
/// each waiter would spin through attempts and openings as fast as the store answers.
pub(crate) struct Releases {
    state: Mutex<State>,
    /// Completes when this is dropped with its client, or closed, which ends the subscription
    /// task.
    closed: Shared<oneshot::Receiver<()>>,
    /// Dropped to close: `None` once closed.
    close: Mutex<Option<oneshot::Sender<()>>>,
}

#[derive(Default)]
struct State {
    /// A subscription task runs (or is being opened).
    subscribed: bool,
    /// The store said it has no release events: only polling is left.
    unsupported: bool,
    /// When the subscription last opened (its events began to come): `None` while it is being
    /// opened, and after an opening that failed, which lived no time at all however long it
    /// took (a store that hangs until the store timeout).
    opened_at: Option<Instant>,
    /// How many subscriptions in a row ended before they had lived [`State::SHORT_LIFE`].
    short_lived: u32,
    /// The pauses before opening again, from the second of those on; `None` once one lived.
    reopen_pauses: Option<Backoff>,
    /// No subscription opens before then: the last ones ended too soon.
    reopen_at: Option<Instant>,
    waiters: HashMap<LeaseName, Vec<oneshot::Sender<()>>>,
    /// How many names had waiters after the last sweep of those that gave up.
    swept: usize,
}

impl State {
    /// The least number of names kept before a sweep is worth its scan.
    const SWEEP_FROM: usize = 64;
    /// A subscription that ends sooner than this counts as ending at once.
    const SHORT_LIFE: Duration = Duration::from_secs(10);
    /// The pause before opening again after the second subscription in a row that ended at
    /// once (the first is opened again at once: a one-off cut, a runtime replaced), doubled for
    /// each one after it, up to [`State::LONGEST_PAUSE`].
    const FIRST_PAUSE: Duration = Duration::from_secs(1);
    const LONGEST_PAUSE: Duration = Duration::from_secs(60);

    /// The subscription ended (or could not be opened) at `now`: when the next may open.
    fn ended(&mut self, now: Instant) {
        let lived = self.opened_at.map_or(Duration::ZERO, |opened| {
            now.saturating_duration_since(opened)
        });
        if lived >= Self::SHORT_LIFE {
            (self.short_lived, self.reopen_pauses, self.reopen_at) = (0, None, None);
            return;
        }
        self.short_lived = self.short_lived.saturating_add(1);
        self.reopen_at = if self.short_lived < 2 {
            None
        } else {
            let pauses = self
                .reopen_pauses
                .get_or_insert_with(|| Backoff::new((Self::FIRST_PAUSE, Self::LONGEST_PAUSE)));
            now.checked_add(pauses.next_limit())
        };
    }

    /// A new waiter for the next release of `name`. A waiter gives up when its receiver is
    /// dropped (its attempt succeeded, or its acquisition ended), and nothing but a pushed
    /// release of its name removes it: so the names whose waiters all gave up are swept
    /// whenever their number has doubled since the last sweep (at most one scan per as many
    /// waits), or per-entity names never released with a push (a minimum hold, a lapse) would
    /// be kept for the client's life.
    fn wait_for(&mut self, name: &LeaseName) -> oneshot::Receiver<()> {
        let (wake, woken) = oneshot::channel();
        let waiters = self.waiters.entry(name.clone()).or_default();
        waiters.retain(|waiter| !waiter.is_canceled());
        waiters.push(wake);
        if self.waiters.len() >= self.swept.max(Self::SWEEP_FROM) * 2 {
            self.waiters.retain(|_, waiters| {
                waiters.retain(|waiter| !waiter.is_canceled());
                !waiters.is_empty()
            });
            self.swept = self.waiters.len();
        }
        woken
    }
}

/// Resolves when the lease it was made for is released; never, where releases are not pushed.
pub(crate) type Released = Option<oneshot::Receiver<()>>;

impl Releases {
    pub(crate) fn new() -> Self {
        let (close, closed) = oneshot::channel();
        Self {
            state: Mutex::new(State::default()),
            closed: closed.shared(),
            close: Mutex::new(Some(close)),
        }
    }

    /// Ends the subscription for good, at the client's shutdown (after which it takes no
    /// lease): the store's subscription, on PostgreSQL a connection of its own, is closed
    /// though the application keeps the client, and the waiters left poll.
    pub(crate) fn close(&self) {
        self.state().unsupported = true;
        drop(
            self.close
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take(),
        );
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Interest in the next release of `name`. Call it *before* the attempt that may fail, so a
    /// release between that attempt and the wait is not missed. A release before the
    /// subscription is open reaches no subscriber: opening it wakes every waiter to try again
    /// (see [`Releases::subscribed`]).
    pub(crate) fn listen(
        self: &Arc<Self>,
        name: &LeaseName,
        store: &TimedStore,
        runtime: &Arc<dyn Runtime>,
    ) -> Released {
        let mut state = self.state();
        if state.unsupported {
            return None;
        }
        if !state.subscribed {
            let now = runtime.now();
            if state.reopen_at.is_some_and(|at| now < at) {
                // The last subscriptions ended as soon as they opened: poll for now.
                return None;
            }
            state.subscribed = true;
            state.opened_at = None;
            // Unlocked while spawning: a task the runtime drops at once clears `subscribed`.
            drop(state);
            let ends = Unsubscribes(Arc::downgrade(self), Arc::clone(runtime));
            let task = subscribe(
                Arc::downgrade(self),
                store.clone(),
                Arc::clone(runtime),
                self.closed.clone(),
            );
            // A runtime that cannot spawn hands the task back: dropped here, still unlocked, as
            // its `Unsubscribes` locks the state.
            let spawned = runtime
                .spawn(
                    async move {
                        task.await;
                        drop(ends)
                    }
                    .boxed(),
                )
                .is_ok();
            state = self.state();
            if !spawned {
                // Nothing to run the subscription on: poll.
                state.unsupported = true;
                return None;
            }
        }
        Some(state.wait_for(name))
    }

    fn released(&self, name: &LeaseName) {
        let waiters = self.state().waiters.remove(name);
        for waiter in waiters.into_iter().flatten() {
            let _ = waiter.send(());
        }
    }

    /// Wakes every waiter, whatever its lease: the subscription has just opened (at `now`), and
    /// a release between a waiter's attempt and that moment was pushed to nobody. Each waiter
    /// tries once more, then waits with the subscription live.
    fn subscribed(&self, now: Instant) {
        let waiters = {
            let mut state = self.state();
            state.opened_at = Some(now);
            std::mem::take(&mut state.waiters)
        };
        for waiter in waiters.into_values().flatten() {
            let _ = waiter.send(());
        }
    }
}

/// Waits for `released` or the `pause`, whichever comes first.
pub(crate) async fn pause(released: Released, sleep: impl Future<Output = ()>) {
    let sleep = std::pin::pin!(sleep);
    match released {
        Some(released) => {
            future::select(released, sleep).await;
        }
        None => sleep.await,
    }
}

/// Forwards the store's release events to the waiters until the stream or the client ends
/// (its task's [`Unsubscribes`] then lets the next waiter subscribe again).
/// Opening the subscription is a store call like the others: in a `lease.store` span, bounded
/// by the store timeout and counted in the client's statistics. Its life counts from when it
/// opened, on `runtime`'s clock.
async fn subscribe(
    releases: Weak<Releases>,
    store: TimedStore,
    runtime: Arc<dyn Runtime>,
    closed: Shared<oneshot::Receiver<()>>,
) {
    let events = match future::select(store.release_events().boxed(), closed.clone()).await {
        Either::Left((events, _)) => events,
        Either::Right(_) => return,
    };
    let mut events = match events {
        Ok(Some(events)) => {
            match releases.upgrade() {
                Some(releases) => releases.subscribed(runtime.now()),
                None => return,
            }
            events
        }
        Ok(None) => {
            if let Some(releases) = releases.upgrade() {
                releases.state().unsupported = true;
            }
            return;
        }
        Err(error) => {
            tracing::warn!(
                error = %crate::ErrorChain(&error),
                "release events unavailable; waiters poll"
            );
            return;
        }
    };
    loop {
        let name = match future::select(events.next(), closed.clone()).await {
            Either::Left((Some(name), _)) => name,
            Either::Left((None, _)) => break,
            Either::Right(_) => return,
        };
        match releases.upgrade() {
            Some(releases) => releases.released(&name),
            None => return,
        }
    }
    tracing::debug!("release events ended; waiters poll until the next wait subscribes again");
}

/// Held by the subscription's task: when the task ends, however it ends (the events ended or
/// could not be opened, or the task went with its runtime while the client lives on, for the
/// next runtime), the next waiter opens the subscription again, on the runtime it runs on
/// (after a pause, when they keep ending at once: see [`State::ended`]). Keeps the runtime
/// for its clock.
struct Unsubscribes(Weak<Releases>, Arc<dyn Runtime>);

impl Drop for Unsubscribes {
    fn drop(&mut self) {
        if let Some(releases) = self.0.upgrade() {
            let mut state = releases.state();
            state.subscribed = false;
            state.ended(self.1.now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscriptions_that_keep_ending_at_once_are_reopened_ever_later() {
        let mut state = State::default();
        let start = Instant::now();
        let mut now = start;
        let mut pauses = Vec::new();
        for _ in 0..10 {
            state.opened_at = Some(now);
            now += Duration::from_millis(5);
            state.ended(now);
            pauses.push(state.reopen_at.map(|at| at - now));
            now = state.reopen_at.unwrap_or(now);
        }
        let seconds = |s| Some(Duration::from_secs(s));
        assert_eq!(
            pauses,
            [
                None,
                seconds(1),
                seconds(2),
                seconds(4),
                seconds(8),
                seconds(16),
                seconds(32),
                seconds(60),
                seconds(60),
                seconds(60)
            ]
        );
        // One that lived long enough starts the count again.
        state.opened_at = Some(now);
        now += State::SHORT_LIFE;
        state.ended(now);
        assert_eq!((state.short_lived, state.reopen_at), (0, None));
    }

    #[test]
    fn names_whose_waiters_gave_up_are_swept() {
        let mut state = State::default();
        let kept = LeaseName::new("kept").unwrap();
        let waiting = state.wait_for(&kept);
        for i in 0..10_000 {
            drop(state.wait_for(&LeaseName::new(format!("entity:{i}")).unwrap()));
        }
        assert!(
            state.waiters.len() <= State::SWEEP_FROM * 2,
            "{} names kept for waiters that gave up",
            state.waiters.len()
        );
        assert_eq!(state.waiters.get(&kept).map(Vec::len), Some(1));
        drop(waiting);
    }
}
