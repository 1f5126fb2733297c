//! [`Renewer`]: one loop that renews every lease a client holds.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use futures::StreamExt;
use futures::channel::mpsc;
use futures::future::{self, Either, FutureExt};

use crate::clock::{Clock, ticks};
use crate::health::Health;
use crate::held::{Held, Taken};
use crate::stats::Renewed;
use crate::timed_store::TimedStore;
use crate::{Error, Fence, HolderId, LeaseConfig, LeaseName, LossReason, Operation, Ttl};

/// The receiving end of the wake-up line; whoever locks it runs the loop.
type Driver = Arc<futures::lock::Mutex<mpsc::Receiver<()>>>;

/// [`Renewer::planned`] during a round: a lease added now may have been missed by it.
const RUNNING: u64 = 0;
/// [`Renewer::planned`] before the loop first ran: the first lease held wakes it.
const IDLE: u64 = u64::MAX;

/// Locks `mutex`; what it guards stays consistent whatever panicked while holding it (a map
/// insert or remove, a send).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The leases a client holds, the store and settings that renew them, and the wake-up line of
/// the loop that does.
///
/// The loop renews in rounds: each round takes every lease due within half a renewal period
/// and renews them with one [`renew_many`](crate::LeaseStore::renew_many) call per batch; the
/// leases of a call cut by the store timeout are renewed each in a call of its own until each
/// succeeds.
/// Renewing a little early costs nothing and keeps leases taken at scattered moments in step, so
/// ten thousand leases cost ten statements a period rather than ten thousand.
///
/// Shared by the client and every guard it gave; the loop holds it only during a round, so it
/// ends once they are all gone.
pub(crate) struct Renewer {
    store: TimedStore,
    ttl: Ttl,
    /// The renewal period, in clock ticks.
    period: u64,
    /// How long after a renewal was sent the lease still counts as held, in clock ticks.
    validity: u64,
    /// How much before its local deadline a renewal must succeed not to count as late, in
    /// clock ticks.
    margin: u64,
    /// How many leases one `renew_many` call carries.
    batch: usize,
    leases: Mutex<HashMap<u64, Arc<Held>>>,
    next_id: AtomicU64,
    /// Wakes the loop when a lease is added that it has not planned for. One sender, used in
    /// place: each clone of a sender would bring a slot of its own, queueing a wake-up per lease.
    /// Dropped with the renewer, which ends the loop.
    wake: Mutex<mpsc::Sender<()>>,
    /// When the loop next wakes by itself, in clock ticks: [`RUNNING`] during a round,
    /// [`IDLE`] before the first.
    planned: AtomicU64,
    /// Whoever locks this runs the loop: the spawned task, or a caller's task where the runtime
    /// cannot spawn. The lock makes sure only one does.
    driver: Driver,
    /// Whether a spawned task runs the loop (or a spawn of it is being tried: see `spawning`).
    spawned: AtomicBool,
    /// Held while a spawn of the loop is tried, so that no caller reads [`spawned`](Self::spawned)
    /// between the flag set and its reset after a failed spawn: a caller that read it then
    /// would leave the loop to a task that never ran, and wait for ever.
    spawning: Mutex<()>,
    /// Held while a renewal statement is in flight. A release that keeps its lease on for a
    /// minimum hold waits for it: a renewal the store ran after that release would extend the
    /// kept lease by a whole TTL.
    in_flight: futures::lock::Mutex<()>,
}

/// Held by the spawned loop's task: when the task is gone without the renewer (its runtime
/// shut down while the client lives on, for the next runtime), the next acquisition spawns the
/// loop again, on the runtime it runs on.
struct Spawned(Weak<Renewer>);

impl Drop for Spawned {
    fn drop(&mut self) {
        if let Some(renewer) = self.0.upgrade() {
            renewer.spawned.store(false, Ordering::Release);
        }
    }
}

impl Renewer {
    /// A renewer holding nothing yet, renewing through `store` as `config` says.
    pub(crate) fn new(store: TimedStore, config: &LeaseConfig) -> Self {
        let (wake, woken) = mpsc::channel(1);
        Self {
            store,
            ttl: config.ttl,
            period: ticks(config.renew_every),
            validity: ticks(config.local_validity()),
            margin: ticks(config.safety_margin),
            batch: config.renew_batch,
            leases: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            wake: Mutex::new(wake),
            planned: AtomicU64::new(IDLE),
            driver: Arc::new(futures::lock::Mutex::new(woken)),
            spawned: AtomicBool::new(false),
            spawning: Mutex::new(()),
            in_flight: futures::lock::Mutex::new(()),
        }
    }

    fn clock(&self) -> &Clock {
        self.store.clock()
    }

    fn leases(&self) -> MutexGuard<'_, HashMap<u64, Arc<Held>>> {
        lock(&self.leases)
    }

    /// How many leases it keeps renewed and still holds (a lost one waits for the next round
    /// to be dropped, or, lost by its deadline, for its guard to let it go).
    pub(crate) fn held_count(&self) -> usize {
        self.leases().values().filter(|held| held.is_held()).count()
    }

    /// Whether its leases are renewed in time: see [`Health`].
    pub(crate) fn health(&self, shutting_down: bool, store_timeout: std::time::Duration) -> Health {
        let now = self.clock().now();
        // A renewal that should have succeeded by then did not; but never as late as the
        // local deadline, where the lease is no longer held (and no longer counted): half-way
        // between the renewal's due time and the deadline at the latest, so that a period and
        // a store timeout as long as the local validity still turn a probe unready in time.
        let overdue_after = self
            .period
            .saturating_add(ticks(store_timeout))
            .min(self.period + self.validity.saturating_sub(self.period) / 2);
        let leases = self.leases();
        let mut health = Health {
            held: 0,
            overdue: 0,
            soonest_deadline: None,
            shutting_down,
        };
        for held in leases.values().filter(|held| held.is_held()) {
            health.held += 1;
            let deadline = held.deadline();
            let last_sent = deadline.saturating_sub(self.validity);
            if now.saturating_sub(last_sent) > overdue_after {
                health.overdue += 1;
            }
            let left = std::time::Duration::from_nanos(deadline.saturating_sub(now));
            health.soonest_deadline = Some(
                health
                    .soonest_deadline
                    .map_or(left, |soonest| soonest.min(left)),
            );
        }
        health
    }

    /// Every lease it keeps renewed, at this moment, and those whose deadline passed while
    /// their guards still keep them.
    pub(crate) fn held(&self) -> Vec<Arc<Held>> {
        self.leases().values().cloned().collect()
    }

    /// Starts holding a lease that was taken by a statement sent at `sent`, and starts the loop
    /// if it is not running yet.
    pub(crate) fn hold(
        self: &Arc<Self>,
        name: LeaseName,
        holder: HolderId,
        fence: Fence,
        sent: u64,
    ) -> Arc<Held> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let next_renewal = sent.saturating_add(self.period);
        let held = Arc::new(Held::new(
            id,
            name,
            holder,
            fence,
            self.clock().clone(),
            Arc::clone(self.store.stats()),
            (
                Taken {
                    sent,
                    answered: self.clock().now(),
                },
                sent.saturating_add(self.validity),
                next_renewal,
            ),
        ));
        self.leases().insert(id, Arc::clone(&held));
        if self.must_wake_for(next_renewal) {
            // Full means a wake-up is already pending: one is enough.
            let _ = lock(&self.wake).try_send(());
        }
        // Where it cannot be spawned, a caller's task runs it (`run_unless_spawned`).
        let _ = self.spawn_once();
        held
    }

    /// Whether an acquisition sent at `sent` (clock ticks) is answered past the local deadline a
    /// lease taken by it would have: the TTL minus the safety margin after it was sent.
    pub(crate) fn answered_late(&self, sent: u64) -> bool {
        self.clock().now() >= sent.saturating_add(self.validity)
    }

    /// Whether the loop must be woken for a lease just added, due at `next_renewal`.
    ///
    /// Usually the loop already wakes in time for it: it looks again within half a period even
    /// with nothing to renew, and the lease is due a period after its acquisition was sent.
    /// Wake it only when it sleeps for longer, or is mid-round and may have missed this lease;
    /// an extra round would renew others early and cost a scan of every lease.
    fn must_wake_for(&self, next_renewal: u64) -> bool {
        let planned = self.planned.load(Ordering::SeqCst);
        planned == RUNNING || next_renewal < planned
    }

    /// Stops renewing `held`: whether this call did (it had not been forgotten before).
    pub(crate) fn forget(&self, held: &Held) -> bool {
        let forgotten = self.leases().remove(&held.id()).is_some();
        if forgotten {
            held.stop_counting();
        }
        forgotten
    }

    /// Renews `held` once, given back while work under it may still run (the renewer renews
    /// no lease given back): its TTL counts from now, so it does not lapse while its holder
    /// waits for the work to stop (`stopped`, at most the store timeout, shorter than the TTL)
    /// before it frees it, or leaves it to lapse. Answers `stopped`'s answer, whether the work
    /// stopped. Counted as no renewal.
    ///
    /// The renewal waits for a round of the renewer in flight to end (the rounds' statements
    /// go one at a time): where the work stops first, nothing is sent,
    /// as the lease is released next and needs no renewal through a wait, and the release does
    /// not wait for that round (many leases whose renewals wait on locked rows could hold it
    /// for several store timeouts, and the lease past a shutdown's settling). Where the work
    /// did not stop in time either, the renewal still goes out once the round ends: the lease
    /// is left to lapse, a TTL from then rather than sooner, under work that may still run.
    pub(crate) async fn renew_given_back(
        &self,
        held: &Held,
        stopped: impl Future<Output = bool>,
    ) -> bool {
        let mut stopped = std::pin::pin!(stopped);
        let lock = std::pin::pin!(self.in_flight.lock());
        let in_flight = match future::select(lock, stopped.as_mut()).await {
            Either::Left((in_flight, _)) => in_flight,
            Either::Right((true, _)) => return true,
            Either::Right((false, lock)) => {
                let in_flight = lock.await;
                self.send_given_back(held, in_flight).await;
                return false;
            }
        };
        future::join(self.send_given_back(held, in_flight), stopped)
            .await
            .1
    }

    /// The renewal of [`renew_given_back`](Renewer::renew_given_back), sent holding the
    /// renewer's `in_flight` lock: whether the store renewed it.
    async fn send_given_back(
        &self,
        held: &Held,
        in_flight: futures::lock::MutexGuard<'_, ()>,
    ) -> bool {
        let leases = [(held.name().clone(), held.holder().clone())];
        let answer = self.store.renew_many(&leases, self.ttl).await;
        drop(in_flight);
        match answer.as_deref() {
            Ok([true]) => true,
            Ok(_) => false,
            Err(error) => {
                tracing::warn!(lease = %held.name(), fence = %held.fence(), error = %crate::ErrorChain(error), "could not renew a lease given back while its work stops; it may lapse before the work has stopped");
                false
            }
        }
    }

    /// Completes once no renewal statement that may still carry a forgotten lease is in flight.
    pub(crate) async fn no_renewal_in_flight(&self) {
        drop(self.in_flight.lock().await);
    }

    /// Never completes. Spawns the loop on the runtime, once, where the runtime can spawn it;
    /// where it cannot, runs the loop on the caller's task (or waits while another caller's
    /// task runs it), renewing every lease of the renewer for as long as this future is polled.
    /// (A spawned task that went with its runtime is spawned again by the next call or
    /// acquisition: `Spawned`.)
    ///
    /// Spawning first matters where nothing is held yet (a campaign's first poll): the loop
    /// run here would take the driver's lock before the first acquisition spawns the task, and
    /// every lease would then be renewed only while the caller polls this future.
    pub(crate) async fn run_unless_spawned(self: &Arc<Self>) -> Infallible {
        if !self.spawn_once() {
            Self::run_loop(Arc::downgrade(self), Arc::clone(&self.driver)).await;
        }
        // The caller holds the renewer, so the loop cannot have ended.
        future::pending().await
    }

    /// Spawns the loop unless a spawned task runs it already: whether one does, as decided
    /// under [`spawning`](Self::spawning), never a flag read after another thread set it for a
    /// spawn still being tried.
    fn spawn_once(self: &Arc<Self>) -> bool {
        // Held until the flag says what happened: a caller on another thread waits here while
        // this one tries, rather than read the flag set for a spawn that is about to fail.
        let _spawning = lock(&self.spawning);
        if self.spawned.swap(true, Ordering::AcqRel) {
            return true;
        }
        let spawned = Spawned(Arc::downgrade(self));
        let run = Self::run_loop(Arc::downgrade(self), Arc::clone(&self.driver));
        let task = async move {
            run.await;
            drop(spawned);
        }
        .boxed();
        if self.clock().runtime().spawn(task).is_err() {
            // Callers drive it instead; a later acquisition tries spawning again.
            self.spawned.store(false, Ordering::Release);
            return false;
        }
        true
    }

    /// The renewal loop, until the renewer is gone. Holds no strong reference while it sleeps,
    /// so dropping the last client and guard ends it.
    async fn run_loop(renewer: Weak<Self>, driver: Driver) {
        let mut woken = driver.lock_owned().await;
        loop {
            let Some(this) = renewer.upgrade() else {
                return;
            };
            this.planned.store(RUNNING, Ordering::SeqCst);
            let next = this.renew_due().await;
            let clock = this.clock().clone();
            // With nothing to renew, it still looks again half a period on, so that a lease
            // taken meanwhile need not wake it (`must_wake_for`). Sleeping until woken, it was
            // woken by every acquisition of a process that takes and gives back one lease at a
            // time, only to find the lease gone: 36 to 52 µs of a one-task cycle on PostgreSQL
            // through diesel, on a 2-core machine.
            let next = next.unwrap_or_else(|| clock.now().saturating_add((this.period / 2).max(1)));
            this.planned.store(next, Ordering::SeqCst);
            drop(this);
            let sleep = clock.sleep_until(next);
            if let Either::Left((None, _)) =
                future::select(woken.next(), std::pin::pin!(sleep)).await
            {
                return;
            }
        }
    }

    /// One round: renews every lease that is due, and says when the next one is.
    async fn renew_due(&self) -> Option<u64> {
        let horizon = self.clock().now().saturating_add(self.period / 2);
        let mut due = Vec::new();
        let mut next = None::<u64>;
        self.leases().retain(|_, held| {
            if !held.is_held() {
                held.stop_counting();
                // One whose deadline passed is kept, not renewed, until its guard lets it go:
                // its row may still name this holder (for the safety margin at least), and a
                // shutdown gives it back as a dropped guard would.
                return held.loss() == Some(LossReason::DeadlinePassed) && !held.is_let_go();
            }
            let at = held.next_renewal();
            if at <= horizon {
                due.push(Arc::clone(held));
            } else {
                next = Some(next.map_or(at, |next| next.min(at)));
            }
            true
        });
        // A lease whose last renewal timed out is renewed alone until one succeeds: a row
        // another transaction keeps locked holds up its whole statement, so renewed together it
        // would cost every lease of its batch, round after round.
        let (alone, mut together): (Vec<Arc<Held>>, Vec<Arc<Held>>) =
            due.iter().cloned().partition(|held| held.renews_alone());
        // In the order they were taken: the same leases share a batch round after round.
        together.sort_by_key(|held| held.id());
        if !together.is_empty() {
            self.renew_batches(&together).await;
        }
        if !alone.is_empty() {
            self.renew_each(&alone).await;
        }
        due.iter()
            .filter(|held| held.is_held())
            .map(|held| held.next_renewal())
            .chain(next)
            .min()
    }

    /// Renews `leases`, a statement per batch, one batch after the other; a batch that has not
    /// answered within [`STAGGER`] of the store timeout lets the next start beside it, and
    /// goes on waiting for its answer there. A row another transaction keeps locked holds its
    /// statement up to the store timeout: batches sent strictly one after the other would each
    /// wait for the one before, and locked rows in a few batches would delay the last batches
    /// past their leases' deadlines. Healthy statements answer well within that, so a client
    /// renews on one connection at a time; each held-up batch costs the batches after it that
    /// fraction of the store timeout once (the next batch waits for its own answer only), and
    /// a connection while it waits.
    async fn renew_batches(&self, leases: &[Arc<Held>]) {
        let in_flight = self.in_flight.lock().await;
        let patience = self.store.timeout() / STAGGER;
        // The batches held up past their patience, still waiting for their answers.
        let mut held_up = futures::stream::FuturesUnordered::new();
        for batch in leases.chunks(self.batch) {
            let mut newest = Box::pin(self.renew_batch(batch));
            let answered = {
                // The held-up batches are polled meanwhile, so that each is answered, or cut
                // by the store timeout, as it comes.
                let others = std::pin::pin!(async {
                    while held_up.next().await.is_some() {}
                    future::pending::<()>().await;
                });
                let patience = future::select(self.clock().runtime().sleep(patience), others);
                matches!(
                    future::select(newest.as_mut(), patience).await,
                    Either::Left(_)
                )
            };
            if !answered {
                held_up.push(newest);
            }
        }
        while held_up.next().await.is_some() {}
        drop(in_flight);
    }

    /// Renews `batch` in one statement; the caller holds the in-flight lock.
    async fn renew_batch(&self, batch: &[Arc<Held>]) {
        let batch = still_held(batch);
        if batch.is_empty() {
            return;
        }
        let sent = self.clock().now();
        let answer = self.store.renew_many(&pairs(&batch), self.ttl).await;
        if let Some(error) = self.record(&batch, sent, answer, false) {
            tracing::warn!(
                leases = batch.len(),
                error = %crate::ErrorChain(&error),
                "lease renewal failed; retrying"
            );
        }
    }

    /// Renews each of `leases` in a statement of its own, [`EACH_AT_ONCE`] at a time, and
    /// records each answer as it comes: one whose row is locked waits out its store timeout
    /// in its place without holding up the others (up to that many locked rows). They are
    /// sent, and so queue for the pool's connections, in the order most likely to renew: those
    /// that never failed alone first,
    /// then the most recently renewed (a row locked since rounds ago was renewed longest ago;
    /// the leases of one failed batch tie). Where the locked rows' statements take every free
    /// connection of the pool, the others wait for one and may fail too: the pool needs a
    /// connection more than the rows that stay locked at once. The failures are logged once,
    /// with the first's error: in an outage every statement fails alike.
    async fn renew_each(&self, leases: &[Arc<Held>]) {
        let in_flight = self.in_flight.lock().await;
        let mut leases = still_held(leases);
        leases.sort_by_key(|held| (held.timed_out_alone(), std::cmp::Reverse(held.deadline())));
        let at_once = leases.len().clamp(1, EACH_AT_ONCE);
        let mut answers = futures::stream::iter(leases)
            .map(|held| async move {
                // Lost since the round began (its deadline passed): not sent.
                if !held.is_held() {
                    return None;
                }
                let sent = self.clock().now();
                let answer = self.store.renew_many(&pairs(&[&held]), self.ttl).await;
                Some((held, sent, answer))
            })
            .buffer_unordered(at_once);
        let (mut failed, mut first) = (Vec::new(), None);
        while let Some(answer) = answers.next().await {
            let Some((held, sent, answer)) = answer else {
                continue;
            };
            if let Some(error) = self.record(std::slice::from_ref(&held), sent, answer, true) {
                failed.push(held.name().clone());
                first.get_or_insert(error);
            }
        }
        drop(in_flight);
        if let Some(error) = first {
            // The names say whose rows to look at: a lease that fails alone round after round
            // while the others renew has a row another transaction keeps locked.
            failed.sort();
            tracing::warn!(
                leases = failed.len(),
                names = %NamesShown(&failed),
                error = %crate::ErrorChain(&error),
                "lease renewals, each alone, failed; retrying"
            );
        }
    }

    /// Records the answer to a renewal of `batch` sent at `sent`, `alone` when the renewer sent
    /// it as a statement of its own: the error when the renewal failed, for the caller to log.
    fn record(
        &self,
        batch: &[Arc<Held>],
        sent: u64,
        answer: Result<Vec<bool>, Error>,
        alone: bool,
    ) -> Option<Error> {
        let answer = answer.and_then(|renewed| {
            if renewed.len() == batch.len() {
                Ok(renewed)
            } else {
                Err(Error::store(
                    Operation::RenewMany,
                    None,
                    format!(
                        "the store answered {} results for {} leases",
                        renewed.len(),
                        batch.len()
                    ),
                ))
            }
        });
        let renewed = match answer {
            Ok(renewed) => renewed,
            Err(error) => {
                let timed_out = crate::timed_store::is_timeout(&error);
                // Not renewed: the deadline stays where the last success put it. Try again soon,
                // while there is still time before it.
                let now = self.clock().now();
                for held in batch {
                    held.set_next_renewal(retry_at(now, held.deadline(), self.period));
                    // Cut by the store timeout, as a statement waiting for a locked row is: sent
                    // alone next time. Refused at once (an outage), it stays where it was.
                    if timed_out {
                        held.renewal_timed_out(alone);
                    }
                    // A lease released or given back while the renewal was on its way failed
                    // to renew nothing this client holds; one whose deadline passed meanwhile
                    // was lost by this failure, which counts.
                    if !held.is_let_go() {
                        self.store.stats().renewed(held.name(), Renewed::Failed);
                    }
                }
                return Some(error);
            }
        };
        let period = self.period;
        let answered = self.clock().now();
        let stats = self.store.stats();
        for (held, renewed) in batch.iter().zip(renewed) {
            if !renewed {
                // A lease given back while its renewal was on its way is not renewed either,
                // and was not lost; one lost meanwhile (found gone by a fenced check, its
                // deadline passed) was counted as that loss: only a lease still believed held
                // counts a rejection.
                if held.mark_lost(LossReason::Rejected) == Some(LossReason::Rejected) {
                    stats.renewed(held.name(), Renewed::Rejected);
                }
                continue;
            }
            // Given back, or lost otherwise (found gone by a fenced check, its deadline passed,
            // noticed or not), while its renewal was on its way: the answer keeps nothing, and
            // counts nothing (a loss was counted as such, and a loss is never taken back).
            if !held.is_held() {
                continue;
            }
            // Late: the answer came with less than the safety margin left before the deadline
            // the previous renewal gave.
            let spare = held.deadline().saturating_sub(answered);
            stats.renewed(
                held.name(),
                if spare < self.margin {
                    Renewed::Late
                } else {
                    Renewed::InTime
                },
            );
            let previous = held.deadline().saturating_sub(self.validity);
            if sent.saturating_sub(previous) > period + period / 2 {
                tracing::warn!(
                    lease = %held.name(),
                    fence = %held.fence(),
                    since_last = ?std::time::Duration::from_nanos(sent - previous),
                    "lease renewed late"
                );
            } else {
                tracing::trace!(lease = %held.name(), fence = %held.fence(), "lease renewed");
            }
            held.renewed(
                sent.saturating_add(self.validity),
                sent.saturating_add(period),
            );
        }
        None
    }
}

/// What fraction of the store timeout [`Renewer::renew_batches`] waits for a batch's answer
/// before it sends the next batch beside it: with the defaults (a store timeout of the renewal
/// period, a quarter of the TTL), a thirty-second of the TTL, 3.75 s for 2 minutes, far above
/// a healthy statement's time. A round leaves its leases at least 0.65 TTL before their
/// deadlines (a local validity of 0.9 TTL, renewals sent at most a period after the last):
/// sent one after the other, three batches held up in a round took 0.75 TTL, and the leases of
/// the third lapsed; staggered, twelve take under 0.6 TTL, and their leases are then renewed
/// each alone in time.
const STAGGER: u32 = 8;

/// How many leases [`Renewer::renew_each`] renews at once, each in a statement of its own: a
/// statement held up by a locked row takes one place until its store timeout, the others go
/// on through the rest. After a timeout in an outage every lease is renewed alone once, so a
/// client of many leases then sends this many statements at a time, not all of its leases'.
const EACH_AT_ONCE: usize = 32;

/// Lease names as a log line shows them: the first [`NamesShown::MOST`], then how many more.
struct NamesShown<'a>(&'a [LeaseName]);

impl NamesShown<'_> {
    /// How many names a log line shows.
    const MOST: usize = 5;
}

impl std::fmt::Display for NamesShown<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (at, name) in self.0.iter().take(Self::MOST).enumerate() {
            if at > 0 {
                f.write_str(", ")?;
            }
            f.write_str(name.as_str())?;
        }
        if let Some(more) = self
            .0
            .len()
            .checked_sub(Self::MOST)
            .filter(|more| *more > 0)
        {
            write!(f, " and {more} more")?;
        }
        Ok(())
    }
}

/// The leases of `leases` still held, read under the renewer's in-flight lock: a lease
/// released since the round began (its guard marks it released before it waits for that
/// lock) must not be renewed after its release, which would cut a minimum hold short or
/// stretch it by a TTL.
fn still_held(leases: &[Arc<Held>]) -> Vec<Arc<Held>> {
    leases
        .iter()
        .filter(|held| held.is_held())
        .cloned()
        .collect()
}

/// The `(name, holder)` pairs a renewal statement carries for `leases`.
fn pairs(leases: &[impl AsRef<Held>]) -> Vec<(LeaseName, HolderId)> {
    leases
        .iter()
        .map(|held| {
            let held = held.as_ref();
            (held.name().clone(), held.holder().clone())
        })
        .collect()
}

/// When to try again a renewal that failed at `now`, for a lease whose local deadline is
/// `deadline`, renewed every `period` (all in clock ticks): a quarter period on, but no later than half-way to the deadline, so
/// that a lease renewed rarely (a period close to the local validity) still gets another try
/// before it; never sooner than a sixteenth of the period, so that the tries do not crowd in
/// ever closer to the deadline.
fn retry_at(now: u64, deadline: u64, period: u64) -> u64 {
    let half_way = deadline.saturating_sub(now) / 2;
    now.saturating_add((period / 4).min(half_way).max(period / 16))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::TokioRuntime;
    use crate::stats::Stats;
    use crate::{LeaseLabel, MemoryStore};
    use std::time::Duration;

    #[test]
    fn a_log_line_shows_five_names_then_how_many_more() {
        let names: Vec<LeaseName> = ["a", "b", "c", "d", "e", "f", "g"]
            .into_iter()
            .map(|name| LeaseName::new(name).unwrap())
            .collect();
        assert_eq!(NamesShown(&names).to_string(), "a, b, c, d, e and 2 more");
        assert_eq!(NamesShown(&names[..5]).to_string(), "a, b, c, d, e");
        assert_eq!(NamesShown(&names[..1]).to_string(), "a");
    }

    fn renewer() -> Arc<Renewer> {
        let config = LeaseConfig::for_ttl(Ttl::from_secs(40).expect("a valid TTL"));
        let store = TimedStore::new(
            Arc::new(MemoryStore::new()),
            Clock::new(Arc::new(TokioRuntime)),
            config.store_timeout,
            Arc::new(Stats::new("test", LeaseLabel::Name)),
        );
        Arc::new(Renewer::new(store, &config))
    }

    fn period(renewer: &Renewer) -> Duration {
        Duration::from_nanos(renewer.period)
    }

    /// Lets the spawned loop run its round and go to sleep.
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    /// Takes the free lease `name` from the renewer's store and holds it there, as an
    /// acquisition does.
    async fn take(renewer: &Arc<Renewer>, name: &str) -> Arc<Held> {
        let name = LeaseName::new(name).expect("a valid name");
        let holder = HolderId::generate();
        let fence = renewer
            .store
            .try_acquire(&name, &holder, renewer.ttl)
            .await
            .expect("the store answers")
            .expect("free");
        renewer.hold(name, holder, fence, renewer.clock().now())
    }

    /// Starts the loop with a first lease and gives it back at once, as a job that takes one
    /// lease at a time does, then lets the loop run a round with nothing to renew.
    async fn leave_with_nothing_to_renew(renewer: &Arc<Renewer>) {
        let first = renewer.hold(
            LeaseName::new("first").expect("a valid name"),
            HolderId::generate(),
            Fence::new(1),
            renewer.clock().now(),
        );
        settle().await;
        renewer.forget(&first);
        tokio::time::advance(period(renewer)).await;
        settle().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_released_after_its_round_began_is_not_renewed_after_its_release() {
        let renewer = renewer();
        let held = take(&renewer, "mail-checks").await;
        let (name, holder) = (held.name().clone(), held.holder().clone());
        // A round took the lease as due; before its batch is sent, the guard releases it with a
        // minimum hold, as `release_after` does.
        let batch = [Arc::clone(&held)];
        renewer.forget(&held);
        assert_eq!(held.mark_released(), None);
        renewer.no_renewal_in_flight().await;
        let hold = Duration::from_secs(15 * 60);
        assert!(
            renewer
                .store
                .release(&name, &holder, hold)
                .await
                .expect("the store answers"),
            "the holder's release"
        );
        renewer.renew_batches(&batch).await;
        let info = renewer
            .store
            .unbounded()
            .inspect(&name)
            .await
            .expect("the store answers")
            .expect("still taken");
        let held_for = info
            .expires_at
            .duration_since(info.taken_at)
            .expect("expires after it was taken");
        assert!(
            held_for >= hold,
            "a renewal sent after the release cut the minimum hold to {held_for:?}"
        );
        // A store whose renewals never move an expiry back keeps the hold whatever comes late,
        // so the batch itself must have sent nothing.
        assert_eq!(
            renewer.store.stats().snapshot(0).renewals,
            0,
            "a renewal was sent for a lease released before its batch"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_taken_while_the_loop_has_nothing_to_renew_does_not_wake_it() {
        let renewer = renewer();
        assert!(
            renewer.must_wake_for(renewer.clock().now() + renewer.period),
            "before its first round the loop sleeps until woken"
        );
        leave_with_nothing_to_renew(&renewer).await;
        assert_eq!(renewer.held_count(), 0);
        let sent = renewer.clock().now();
        assert!(
            !renewer.must_wake_for(sent + renewer.period),
            "a lease taken now is due after the loop looks again: no wake-up needed"
        );
        let late = sent.saturating_sub(renewer.period / 2 + 1);
        assert!(
            renewer.must_wake_for(late + renewer.period),
            "an acquisition sent over half a period ago is due before that look: wake the loop"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_taken_while_the_loop_has_nothing_to_renew_is_still_renewed_in_time() {
        let renewer = renewer();
        leave_with_nothing_to_renew(&renewer).await;
        // Not woken for it, the loop must still renew it before its deadline.
        let second = take(&renewer, "second").await;
        let deadline = second.deadline();
        for _ in 0..40 {
            tokio::time::advance(period(&renewer) / 8).await;
            settle().await;
        }
        assert!(second.is_held(), "the lease was not lost");
        assert!(
            second.deadline() > deadline,
            "the loop renewed it, which moved its deadline on"
        );
    }
}
