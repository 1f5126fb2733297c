//! [`Renewer`]: one loop that renews every lease a client holds.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use futures::StreamExt;
use futures::channel::mpsc;
use futures::future::{self, Either, FutureExt};

use crate::client::{Inner, TimedOut};
use crate::clock::{Clock, ticks};
use crate::held::Held;
use crate::{Error, Fence, HolderId, LeaseName, LossReason, Operation};

type Driver = Arc<futures::lock::Mutex<mpsc::Receiver<()>>>;

/// [`Renewer::planned`] during a round: a lease added now may have been missed by it.
const RUNNING: u64 = 0;
/// [`Renewer::planned`] with nothing to renew: the loop sleeps until woken.
const IDLE: u64 = u64::MAX;

/// Locks `mutex`; what it guards stays consistent whatever panicked while holding it (a map
/// insert or remove, a send).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The leases a client holds, and the wake-up line of the loop that renews them.
///
/// The loop renews in rounds: each round takes every lease due within half a renewal period
/// and renews them with one [`renew_many`](crate::LeaseStore::renew_many) call per batch.
/// Renewing a little early costs nothing and keeps leases taken at scattered moments in step, so
/// ten thousand leases cost ten statements a period rather than ten thousand.
pub(crate) struct Renewer {
    leases: Mutex<HashMap<u64, Arc<Held>>>,
    next_id: AtomicU64,
    /// Wakes the loop when a lease is added that it has not planned for. One sender, used in
    /// place: each clone of a sender would bring a slot of its own, queueing a wake-up per lease.
    /// Dropped with the client, which ends the loop.
    wake: Mutex<mpsc::Sender<()>>,
    /// When the loop next wakes by itself, in clock ticks: [`RUNNING`] during a round,
    /// [`IDLE`] when it holds nothing to renew.
    planned: AtomicU64,
    /// Whoever locks this runs the loop: the spawned task, or a caller's task where the runtime
    /// cannot spawn. The lock makes sure only one does.
    driver: Driver,
    spawned: AtomicBool,
    /// Held while a renewal statement is in flight. A release that keeps its lease on for a
    /// minimum hold waits for it: a renewal the store ran after that release would extend the
    /// kept lease by a whole TTL.
    in_flight: futures::lock::Mutex<()>,
}

impl Renewer {
    pub(crate) fn new() -> Self {
        let (wake, woken) = mpsc::channel(1);
        Self {
            leases: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            wake: Mutex::new(wake),
            planned: AtomicU64::new(IDLE),
            driver: Arc::new(futures::lock::Mutex::new(woken)),
            spawned: AtomicBool::new(false),
            in_flight: futures::lock::Mutex::new(()),
        }
    }

    fn leases(&self) -> MutexGuard<'_, HashMap<u64, Arc<Held>>> {
        lock(&self.leases)
    }

    pub(crate) fn len(&self) -> usize {
        self.leases().len()
    }

    pub(crate) fn driver(&self) -> Driver {
        Arc::clone(&self.driver)
    }

    /// Whether the loop runs on a spawned task, so callers need not drive it.
    pub(crate) fn is_spawned(&self) -> bool {
        self.spawned.load(Ordering::Acquire)
    }

    /// Starts holding a lease that was taken by a statement sent at `sent` and starts the loop if
    /// it is not running yet.
    pub(crate) fn register(
        &self,
        inner: &Arc<Inner>,
        name: LeaseName,
        holder: HolderId,
        fence: Fence,
        sent: u64,
    ) -> Arc<Held> {
        let config = &inner.config;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let next_renewal = sent.saturating_add(ticks(config.renew_every));
        let held = Arc::new(Held::new(
            id,
            name,
            holder,
            fence,
            inner.clock.clone(),
            sent.saturating_add(ticks(config.local_validity())),
            next_renewal,
        ));
        self.leases().insert(id, Arc::clone(&held));
        // Usually the loop already wakes in time for it: every held lease is due within one
        // period. Wake it only when it sleeps for longer, or is mid-round and may have missed
        // this lease; an extra round would renew others early and cost a scan of every lease.
        let planned = self.planned.load(Ordering::SeqCst);
        if planned == RUNNING || next_renewal < planned {
            // Full means a wake-up is already pending: one is enough.
            let _ = lock(&self.wake).try_send(());
        }
        self.spawn_once(inner);
        held
    }

    pub(crate) fn unregister(&self, id: u64) {
        self.leases().remove(&id);
    }

    /// Completes once no renewal statement that may still carry an unregistered lease is in
    /// flight.
    pub(crate) async fn settled(&self) {
        drop(self.in_flight.lock().await);
    }

    fn spawn_once(&self, inner: &Arc<Inner>) {
        if self.spawned.swap(true, Ordering::AcqRel) {
            return;
        }
        let task = Self::drive(Arc::downgrade(inner), self.driver(), inner.clock.clone()).boxed();
        if inner.clock.runtime().spawn(task).is_err() {
            // Callers drive it instead; a later acquisition tries spawning again.
            self.spawned.store(false, Ordering::Release);
        }
    }

    /// The renewal loop, until the client is gone. Holds no strong reference while it sleeps, so
    /// dropping the last clone and guard ends it.
    pub(crate) async fn drive(client: Weak<Inner>, driver: Driver, clock: Clock) {
        let mut woken = driver.lock_owned().await;
        loop {
            let next = match client.upgrade() {
                Some(inner) => {
                    inner.renewer.planned.store(RUNNING, Ordering::SeqCst);
                    let next = inner.renew_due().await;
                    inner
                        .renewer
                        .planned
                        .store(next.unwrap_or(IDLE), Ordering::SeqCst);
                    next
                }
                None => return,
            };
            let sleep = match next {
                Some(at) => Either::Left(clock.sleep_until(at)),
                None => Either::Right(future::pending()),
            };
            if let Either::Left((None, _)) =
                future::select(woken.next(), std::pin::pin!(sleep)).await
            {
                return;
            }
        }
    }
}

impl Inner {
    /// One round: renews every lease that is due, and says when the next one is.
    async fn renew_due(&self) -> Option<u64> {
        let period = ticks(self.config.renew_every);
        let horizon = self.clock.now().saturating_add(period / 2);
        let mut due = Vec::new();
        let mut next = None::<u64>;
        self.renewer.leases().retain(|_, held| {
            if !held.is_held() {
                return false;
            }
            let at = held.next_renewal();
            if at <= horizon {
                due.push(Arc::clone(held));
            } else {
                next = Some(next.map_or(at, |next| next.min(at)));
            }
            true
        });
        for batch in due.chunks(self.config.renew_batch) {
            self.renew_batch(batch).await;
        }
        due.iter()
            .filter(|held| held.is_held())
            .map(|held| held.next_renewal())
            .chain(next)
            .min()
    }

    async fn renew_batch(&self, batch: &[Arc<Held>]) {
        let config = &self.config;
        let leases: Vec<(LeaseName, HolderId)> = batch
            .iter()
            .map(|held| (held.name.clone(), held.holder.clone()))
            .collect();
        let in_flight = self.renewer.in_flight.lock().await;
        let sent = self.clock.now();
        let answer = self
            .clock
            .timeout(
                config.store_timeout,
                self.store.renew_many(&leases, config.ttl),
            )
            .await;
        drop(in_flight);
        let renewed = match answer {
            Some(Ok(renewed)) if renewed.len() == batch.len() => renewed,
            failed => {
                let error = match failed {
                    Some(Err(error)) => error,
                    Some(Ok(renewed)) => Error::store(
                        Operation::RenewMany,
                        None,
                        format!(
                            "the store answered {} results for {} leases",
                            renewed.len(),
                            batch.len()
                        ),
                    ),
                    None => {
                        Error::store(Operation::RenewMany, None, TimedOut(config.store_timeout))
                    }
                };
                // Not renewed: the deadline stays where the last success put it. Try again soon,
                // while there is still time before it.
                let retry = self
                    .clock
                    .now()
                    .saturating_add(ticks(config.renew_every) / 4);
                tracing::warn!(
                    leases = batch.len(),
                    error = &error as &dyn std::error::Error,
                    "lease renewal failed; retrying"
                );
                for held in batch {
                    held.set_next_renewal(retry);
                }
                return;
            }
        };
        let validity = ticks(config.local_validity());
        let period = ticks(config.renew_every);
        for (held, renewed) in batch.iter().zip(renewed) {
            if !renewed {
                held.mark_lost(LossReason::Rejected);
                continue;
            }
            let previous = held.deadline().saturating_sub(validity);
            if sent.saturating_sub(previous) > period + period / 2 {
                tracing::warn!(
                    lease = %held.name,
                    fence = %held.fence,
                    since_last = ?std::time::Duration::from_nanos(sent - previous),
                    "lease renewed late"
                );
            } else {
                tracing::trace!(lease = %held.name, fence = %held.fence, "lease renewed");
            }
            held.renewed(sent.saturating_add(validity), sent.saturating_add(period));
        }
    }
}
