//! [`Signal`]: a one-way event that any number of tasks wait for.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::channel::oneshot;
use futures::future::{FutureExt, Shared};

/// Fired once, waited for by anybody: every waiter, past and future, completes once it fires.
#[derive(Debug)]
pub(crate) struct Signal {
    is_fired: AtomicBool,
    fire: Mutex<Option<oneshot::Sender<()>>>,
    fired: Shared<oneshot::Receiver<()>>,
}

impl Signal {
    pub(crate) fn new() -> Self {
        let (fire, fired) = oneshot::channel();
        Self {
            is_fired: AtomicBool::new(false),
            fire: Mutex::new(Some(fire)),
            fired: fired.shared(),
        }
    }

    /// Fires it; firing again does nothing.
    pub(crate) fn fire(&self) {
        self.is_fired.store(true, Ordering::Release);
        let fire = self
            .fire
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(fire) = fire {
            let _ = fire.send(());
        }
    }

    /// Whether it has fired.
    pub(crate) fn is_fired(&self) -> bool {
        self.is_fired.load(Ordering::Acquire)
    }

    /// Completes once it has fired (at once if it has). Holds no reference to the signal, so
    /// it may outlive it: a dropped signal counts as fired.
    pub(crate) fn fired(&self) -> impl Future<Output = ()> + Send + Unpin + 'static + use<> {
        self.fired.clone().map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wakes_every_waiter_once_fired() {
        let signal = Signal::new();
        let early = signal.fired();
        assert!(!signal.is_fired());
        assert!(futures::executor::block_on(async { futures::poll!(signal.fired()) }).is_pending());
        signal.fire();
        signal.fire();
        assert!(signal.is_fired());
        futures::executor::block_on(early);
        futures::executor::block_on(signal.fired());
    }
}
