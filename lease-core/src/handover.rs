//! [`Releases`]: wakes the waiters for a lease when the store says it was released.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use futures::StreamExt;
use futures::channel::oneshot;
use futures::future::{self, Either, FutureExt, Shared};

use crate::timed_store::TimedStore;
use crate::{LeaseName, Runtime};

/// The waiters of one client, by lease, and its one subscription to the store's release events.
///
/// The subscription is opened by the first waiter and kept while the client lives: a store may
/// spend a dedicated connection on it, once per client rather than once per waiter.
pub(crate) struct Releases {
    state: Mutex<State>,
    /// Completes when this is dropped with its client, which ends the subscription task.
    closed: Shared<oneshot::Receiver<()>>,
    _close: oneshot::Sender<()>,
}

#[derive(Default)]
struct State {
    /// A subscription task runs (or is being opened).
    subscribed: bool,
    /// The store said it has no release events: only polling is left.
    unsupported: bool,
    waiters: HashMap<LeaseName, Vec<oneshot::Sender<()>>>,
}

/// Resolves when the lease it was made for is released; never, where releases are not pushed.
pub(crate) type Released = Option<oneshot::Receiver<()>>;

impl Releases {
    pub(crate) fn new() -> Self {
        let (close, closed) = oneshot::channel();
        Self {
            state: Mutex::new(State::default()),
            closed: closed.shared(),
            _close: close,
        }
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
            let task = subscribe(Arc::downgrade(self), store.clone(), self.closed.clone());
            if runtime.spawn(task.boxed()).is_err() {
                // Nothing to run the subscription on: poll.
                state.unsupported = true;
                return None;
            }
            state.subscribed = true;
        }
        let (wake, woken) = oneshot::channel();
        let waiters = state.waiters.entry(name.clone()).or_default();
        waiters.retain(|waiter| !waiter.is_canceled());
        waiters.push(wake);
        Some(woken)
    }

    fn released(&self, name: &LeaseName) {
        let waiters = self.state().waiters.remove(name);
        for waiter in waiters.into_iter().flatten() {
            let _ = waiter.send(());
        }
    }

    /// Wakes every waiter, whatever its lease: the subscription has just opened, and a release
    /// between a waiter's attempt and that moment was pushed to nobody. Each waiter tries once
    /// more, then waits with the subscription live.
    fn subscribed(&self) {
        let waiters = std::mem::take(&mut self.state().waiters);
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

/// Forwards the store's release events to the waiters until the stream or the client ends.
/// Opening the subscription is a store call like the others: in a `lease.store` span, bounded
/// by the store timeout and counted in the client's statistics.
async fn subscribe(
    releases: Weak<Releases>,
    store: TimedStore,
    closed: Shared<oneshot::Receiver<()>>,
) {
    let events = match future::select(store.release_events().boxed(), closed.clone()).await {
        Either::Left((events, _)) => events,
        Either::Right(_) => return,
    };
    let mut events = match events {
        Ok(Some(events)) => {
            match releases.upgrade() {
                Some(releases) => releases.subscribed(),
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
                error = &error as &dyn std::error::Error,
                "release events unavailable; waiters poll"
            );
            if let Some(releases) = releases.upgrade() {
                releases.state().subscribed = false;
            }
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
    if let Some(releases) = releases.upgrade() {
        releases.state().subscribed = false;
    }
}
