//! [`Leader`]: keep campaigning for a lease, and know at any moment whether this process leads.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use futures::channel::{mpsc, oneshot};
use futures::future::{self, BoxFuture, Either, FusedFuture, FutureExt};
use futures::stream::Stream;

use crate::backoff::Backoff;
use crate::client::AnsweredLate;
use crate::clock::{Clock, ticks};
use crate::guard::{LeaseGuard, LeaseHandle};
use crate::handover;
use crate::shutdown::{Shutdown, Token};
use crate::signal::Signal;
use crate::{Error, Fence, LeaseClient, LeaseName, LossReason, WorkUnderTerm};

/// Leader election on one lease name: the campaign keeps trying to take the lease, holds it while
/// it can, and tries again when it is lost.
///
/// Made by [`LeaseClient::campaign`]. [`is_leader`](Leader::is_leader) answers at any moment
/// (it turns `false` as soon as the lease is lost or its local deadline passes);
/// [`changes`](Leader::changes) streams every change. Dropping the last `Leader` or calling
/// [`resign`](Leader::resign) ends the campaign and gives the lease back, and so does the
/// client's [`shutdown`](LeaseClient::shutdown); work under the leadership learns of it from
/// the term's [`lease`](Leader::lease), whose [`lost`](LeaseHandle::lost) completes before the
/// release is sent.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), lease_core::Error> {
/// use futures::StreamExt;
/// use lease_core::{LeaseClient, MemoryStore, runtime::TokioRuntime};
///
/// let client = LeaseClient::new(MemoryStore::new(), TokioRuntime);
/// let leader = client.campaign("alerts")?;
/// let mut changes = leader.changes();
/// assert_eq!(changes.next().await, Some(true));
/// assert!(leader.is_leader());
/// leader.resign().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Leader {
    shared: Arc<Shared>,
}

struct Shared {
    name: LeaseName,
    state: Mutex<State>,
    /// Fired once the campaign's first attempt has answered (or the campaign ended first).
    attempted: Signal,
    /// Fired once the campaign has ended, its lease given back.
    ended: Signal,
    working: Working,
}

struct State {
    current: Option<LeaseHandle>,
    /// What was last told to watchers, so each change is told once.
    told: bool,
    watchers: Vec<mpsc::UnboundedSender<bool>>,
    /// How many watchers were left by the last sweep of the dropped ones in `changes`.
    swept_at: usize,
    /// The campaign has ended: `changes` streams end.
    ended: bool,
    /// The permanent store error that ended the campaign.
    error: Option<Arc<Error>>,
    /// The transient store error the campaign's latest attempt failed with, until an attempt
    /// answers.
    failing: Option<Arc<Error>>,
    /// Fired, and replaced, as each attempt of the campaign answers or fails.
    answered: Signal,
    /// Sent by `resign`, or dropped with the last `Leader`: either ends the campaign.
    stop: Option<oneshot::Sender<oneshot::Sender<()>>>,
}

/// Work running under the current term (a leader schedule's round, a caller's work), each
/// until its [`WorkUnderTerm`] is dropped: the term's lease is not freed before it has stopped.
/// Shared by the `Leader`s, which add to it, and the campaign, which waits on it, so that it
/// outlives the last `Leader`.
type Working = Arc<Mutex<Vec<oneshot::Receiver<()>>>>;

impl Leader {
    /// The lease this campaign is for.
    pub fn name(&self) -> &LeaseName {
        &self.shared.name
    }

    /// Whether this process leads right now.
    pub fn is_leader(&self) -> bool {
        self.shared
            .state()
            .current
            .as_ref()
            .is_some_and(LeaseHandle::is_held)
    }

    /// The fence of the current term, while this process leads.
    pub fn fence(&self) -> Option<Fence> {
        let state = self.shared.state();
        state
            .current
            .as_ref()
            .filter(|lease| lease.is_held())
            .map(LeaseHandle::fence)
    }

    /// The lease of the current term, while this process leads: for work that runs under it,
    /// raced against its [`lost`](LeaseHandle::lost). That completes when the term ends: when
    /// the lease is lost, and when the campaign gives the leadership back, before the release
    /// is sent: with [`LossReason::ShutDown`] at the client's [`shutdown`](LeaseClient::shutdown),
    /// with [`LossReason::Resigned`] on [`resign`](Leader::resign), when the last `Leader` is
    /// dropped, or when the campaign's future is dropped.
    ///
    /// The release follows at once: work on tasks of its own must take no step after `lost`
    /// completes, or it may run beside the next leader's (a task in the middle of a blocking
    /// call or of CPU work learns of the loss only when it ends). Take the lease with
    /// [`lease_for_work`](Leader::lease_for_work) instead for work that may, and the release
    /// waits for it, as it does for a
    /// [`schedule_on_leader`](LeaseClient::schedule_on_leader) round: the lease is released
    /// once the work has stopped, or, when it has not stopped within the
    /// [store timeout](crate::LeaseConfig::store_timeout), left to lapse one TTL after its
    /// last renewal (see [`WorkUnderTerm`]: work blocked past that runs beside the next
    /// leader).
    pub fn lease(&self) -> Option<LeaseHandle> {
        self.shared
            .state()
            .current
            .clone()
            .filter(LeaseHandle::is_held)
    }

    /// The lease of the current term, as [`lease`](Leader::lease), with a [`WorkUnderTerm`]
    /// that keeps the campaign from freeing it until dropped: for work on a task of its own
    /// that may be in the middle of a blocking call or of CPU work when the term ends, and so
    /// learns of it late. Race the work against the lease's [`lost`](LeaseHandle::lost), and
    /// drop the `WorkUnderTerm` once the work's future is dropped: the campaign releases the
    /// lease then, not before (at most the store timeout later; past that it leaves the lease
    /// to lapse). A [`schedule_on_leader`](LeaseClient::schedule_on_leader) round does this
    /// itself.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), lease_core::Error> {
    /// use lease_core::{LeaseClient, MemoryStore, runtime::TokioRuntime};
    ///
    /// let client = LeaseClient::new(MemoryStore::new(), TokioRuntime);
    /// let leader = client.campaign("alerts")?;
    /// # while !leader.is_leader() { tokio::task::yield_now().await; }
    /// if let Some((lease, working)) = leader.lease_for_work() {
    ///     tokio::spawn(async move {
    ///         tokio::select! {
    ///             biased;
    ///             _ = lease.lost() => {}
    ///             () = async { /* the work, passing lease.fence() along */ } => {}
    ///         }
    ///         // The work's future is gone: the term's lease may be freed.
    ///         drop(working);
    ///     });
    /// }
    /// # leader.resign().await;
    /// # Ok(()) }
    /// ```
    pub fn lease_for_work(&self) -> Option<(LeaseHandle, WorkUnderTerm)> {
        // The state stays locked while the work is added: the campaign ends a term by clearing
        // `current` under this lock before it takes the term's work, so work added under a
        // term is always taken with it.
        let state = self.shared.state();
        let lease = state.current.clone()?;
        // Counted as work on the lease before it is read held: a shutdown that found no work on
        // it and marked it lost first makes it read lost here.
        let (working, stopped) = WorkUnderTerm::new(&lease);
        if !lease.is_held() {
            return None;
        }
        let mut running = lock(&self.shared.working);
        // A term dropped with the campaign's future marks its lease given back before it takes
        // the work: read again under this lock, a lease still held means the term takes it.
        if !lease.is_held() {
            return None;
        }
        // Work that stopped under this term is forgotten here, not only when the term ends.
        TermWork::forget_stopped(&mut running);
        running.push(stopped);
        Some((lease, working))
    }

    /// Every change of leadership from now on: `true` when this process becomes leader, `false`
    /// when it stops. The first item is the current state when this process leads. The stream
    /// ends when the campaign does (a resignation, the client's shutdown, a permanent store
    /// error, its future dropped), after a `false` when it led. `true` is told only for a lease
    /// still held when the campaign took it, as [`is_leader`](Leader::is_leader) would say.
    pub fn changes(&self) -> impl Stream<Item = bool> + Send + 'static {
        let (tx, rx) = mpsc::unbounded();
        let mut state = self.shared.state();
        // Streams dropped while leadership stays as it is are swept here, not only at the next
        // change, which may be weeks away: once their number has doubled since the last sweep.
        if state.watchers.len() >= state.swept_at.max(8) * 2 {
            state.watchers.retain(|watcher| !watcher.is_closed());
            state.swept_at = state.watchers.len();
        }
        if state.told {
            let _ = tx.unbounded_send(true);
        }
        if !state.ended {
            state.watchers.push(tx);
        }
        rx
    }

    /// The store error that ended the campaign, if one did: a permanent failure
    /// ([`Error::is_transient`] is `false`: permission denied, a missing table), which no retry
    /// fixes. Transient failures are retried with the acquire backoff and never end a campaign.
    pub fn error(&self) -> Option<Arc<Error>> {
        self.shared.state().error.clone()
    }

    /// Completes once the campaign's first attempt has answered, led or not (at once after
    /// that, and if the campaign ended first): until then, that this process does not lead says
    /// nothing yet.
    pub(crate) fn first_attempt(&self) -> impl Future<Output = ()> + Send + Unpin + 'static {
        self.shared.attempted.fired()
    }

    /// The transient store error the campaign's latest attempt failed with (nobody may lead
    /// then), and what completes once its next attempt has answered or failed, or the campaign
    /// has ended; `None` when the latest attempt answered.
    pub(crate) fn failing(
        &self,
    ) -> Option<(
        Arc<Error>,
        impl Future<Output = ()> + Send + Unpin + 'static,
    )> {
        // Read together, under the lock: an attempt that answers after this is the one waited
        // for, not the one after it.
        let state = self.shared.state();
        let error = state.failing.clone()?;
        let next = future::select(state.answered.fired(), self.shared.ended.fired());
        Some((error, next.map(|_| ())))
    }

    /// Ends the campaign, for every clone of this `Leader`, and gives the lease back; returns
    /// once it is given back (also when another clone resigned first: each waits for the end).
    /// The term's [`lease`](Leader::lease) reports [`LossReason::Resigned`] (at the client's
    /// shutdown, [`LossReason::ShutDown`]) before the release is sent.
    ///
    /// # Cancel safety
    /// Once polled, cancelling it does not undo the resignation: the campaign still ends and
    /// gives the lease back, only nobody waits for that. Dropped before its first poll, it is
    /// a dropped `Leader`: the campaign ends if it was the last clone.
    pub async fn resign(self) {
        let ended = self.shared.ended.fired();
        let stop = self.shared.state().stop.take();
        let released = stop.and_then(|stop| {
            let (done, released) = oneshot::channel();
            stop.send(done).is_ok().then_some(released)
        });
        match released {
            // The campaign answers once it has released, or drops the sender if its future is
            // gone without ending (a runtime shut down).
            Some(released) => {
                let _ = released.await;
            }
            // Another clone resigned first, or the campaign had ended.
            None => ended.await,
        }
    }

    /// The [`Leader`] for `name` and the campaign future that runs the election through
    /// `client`, counted by `token` until it ends. The campaign ends when every `Leader` clone is
    /// dropped or resigns, or the client shuts down.
    pub(crate) fn elect(
        client: LeaseClient,
        name: LeaseName,
        token: Token,
    ) -> (Self, BoxFuture<'static, ()>) {
        let (stop, stopped) = oneshot::channel();
        let shared = Arc::new(Shared {
            name: name.clone(),
            state: Mutex::new(State {
                current: None,
                told: false,
                watchers: Vec::new(),
                swept_at: 0,
                ended: false,
                error: None,
                failing: None,
                answered: Signal::new(),
                stop: Some(stop),
            }),
            attempted: Signal::new(),
            ended: Signal::new(),
            working: Arc::default(),
        });
        // Made before the future, so that it goes with it even when it is never polled.
        let ends = EndsWhenDropped(Arc::downgrade(&shared));
        let working = Arc::clone(&shared.working);
        let campaign = run_campaign(
            client,
            (Arc::downgrade(&shared), working),
            name,
            stopped,
            token,
            ends,
        );
        (Self { shared }, campaign.boxed())
    }
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// The campaign ended: every `changes` stream ends, after a `false` if it had been told
    /// `true` (a campaign future dropped while leading ends without a term's end), and a stream
    /// made later says nothing.
    fn end(&self) {
        let mut state = self.state();
        state.current = None;
        state.ended = true;
        // No attempt fails any more: a permanent error, if one ended it, is `error`.
        state.failing = None;
        if std::mem::take(&mut state.told) {
            for watcher in &state.watchers {
                let _ = watcher.unbounded_send(false);
            }
        }
        state.watchers.clear();
        drop(state);
        self.attempted.fire();
        self.ended.fire();
    }

    /// Records that an attempt of the campaign answered, or failed with the transient store
    /// error `failing`, and tells whoever waits for it.
    fn answered(&self, failing: Option<Arc<Error>>) {
        let mut state = self.state();
        state.failing = failing;
        let answered = std::mem::replace(&mut state.answered, Signal::new());
        drop(state);
        answered.fire();
        self.attempted.fire();
    }

    /// The current term's lease, or `None` between terms; watchers are told when leadership
    /// changes. A lease already lost (an acquisition answered after its local deadline) is no
    /// leadership: nobody is told `true` for it.
    fn set(&self, current: Option<LeaseHandle>) {
        let mut state = self.state();
        let leading = current.as_ref().is_some_and(LeaseHandle::is_held);
        state.current = current;
        if state.told != leading {
            state.told = leading;
            state
                .watchers
                .retain(|watcher| watcher.unbounded_send(leading).is_ok());
        }
    }
}

/// Ends the campaign's [`Shared`] when dropped: at the end of the campaign, or with its future
/// when that never got there (a task that panicked, a runtime shut down, the future of
/// `campaign_on_this_task` let go by a `select!`), so that [`Leader::resign`] and the
/// [`changes`](Leader::changes) streams never wait for a campaign that no longer runs.
struct EndsWhenDropped(Weak<Shared>);

impl Drop for EndsWhenDropped {
    fn drop(&mut self) {
        if let Some(leader) = self.0.upgrade() {
            leader.end();
        }
    }
}

/// The campaign for `name` on `client`, telling `shared` (while a `Leader` lives) and waiting
/// for the term's work in `working` (whether one does or not).
async fn run_campaign(
    client: LeaseClient,
    (shared, working): (Weak<Shared>, Working),
    name: LeaseName,
    mut stopped: oneshot::Receiver<oneshot::Sender<()>>,
    token: Token,
    ends: EndsWhenDropped,
) {
    let clock = client.clock().clone();
    let store_timeout = client.config().store_timeout;
    let retry = ticks(client.config().campaign_retry());
    let first_pause = client.config().acquire_backoff;
    let mut backoff = Backoff::new(first_pause);
    // Keeps the renewer going where the runtime cannot spawn it; waits idle where it can.
    let mut renewer = std::pin::pin!(client.run_renewer().fuse());
    let mut closing = token.shutdown().closing();
    let mut events = Events {
        stopped: &mut stopped,
        renewer: &mut renewer,
        closing: &mut closing,
    };
    let resigned = loop {
        // The transient store error this attempt failed with.
        let mut failing = None;
        let released = client.listen(&name);
        // A lease answered past its deadline is given back as never held: no term begins.
        let mut attempt = std::pin::pin!(client.take(name.clone(), AnsweredLate::GiveBack));
        let pause = match events.until_stopped(attempt.as_mut()).await {
            Err(resigned) => {
                // An attempt already sent may have taken the lease (a release's notification
                // wakes a campaign at once, so a stop often finds one in flight): let it answer,
                // within the store timeout, and give back what it took, rather than leave the
                // lease held for its TTL by nobody.
                if let Ok(Some(guard)) = events.alongside(attempt).await
                    && let Err(error) = events.alongside(guard.release()).await
                {
                    tracing::warn!(lease = %name, error = %crate::ErrorChain(&error), "a lease taken as the campaign stopped was not given back");
                }
                break resigned;
            }
            Ok(Ok(Some(guard))) => {
                backoff = Backoff::new(first_pause);
                let Some(leader) = shared.upgrade() else {
                    break None;
                };
                leader.set(Some(guard.handle()));
                leader.answered(None);
                // No strong reference while leading, so dropping the last `Leader` stops this.
                drop(leader);
                let mut term = Term::new(guard, Arc::clone(&working), token.shutdown());
                let ended = events.until_stopped(term.lost()).await;
                // The term ends: no lease from now on, then the work that ran under it (see
                // `Leader::lease_for_work`).
                if let Some(leader) = shared.upgrade() {
                    leader.set(None);
                }
                term.take_work();
                match ended {
                    Ok(reason) => {
                        tracing::info!(lease = %name, %reason, "leadership lost; campaigning again");
                        events.alongside(term.end_lost(&clock, store_timeout)).await;
                        retry
                    }
                    Err(resigned) => {
                        // Work under the term's lease learns of it before the lease is free.
                        let reason = if token.shutdown().is_closing() {
                            LossReason::ShutDown
                        } else {
                            LossReason::Resigned
                        };
                        match events
                            .alongside(term.give_back(reason, &clock, store_timeout))
                            .await
                        {
                            Err(error) => {
                                tracing::warn!(lease = %name, error = %crate::ErrorChain(&error), "leadership not given back on resign");
                            }
                            Ok(true) if token.shutdown().is_closing() => {
                                tracing::info!(lease = %name, "leadership given back: the client shuts down");
                                token.shutdown().record_resigned();
                            }
                            // Left to lapse under a round that did not stop: not given back.
                            Ok(false) if token.shutdown().is_closing() => {
                                token.shutdown().record_lapsed();
                            }
                            Ok(_) => {}
                        }
                        break resigned;
                    }
                }
            }
            Ok(Ok(None)) => retry,
            Ok(Err(error)) if error.is_transient() => {
                tracing::warn!(lease = %name, error = %crate::ErrorChain(&error), "campaign attempt failed; retrying");
                failing = Some(Arc::new(error));
                ticks(backoff.next_pause())
            }
            Ok(Err(Error::ShuttingDown { .. })) => break None,
            Ok(Err(error)) => {
                tracing::error!(lease = %name, error = %crate::ErrorChain(&error), "campaign ended by a permanent store error");
                if let Some(leader) = shared.upgrade() {
                    leader.state().error = Some(Arc::new(error));
                }
                break None;
            }
        };
        if let Some(leader) = shared.upgrade() {
            leader.answered(failing);
        }
        let wait = handover::pause(
            released,
            clock.sleep_until(clock.now().saturating_add(pause)),
        );
        if let Err(resigned) = events.until_stopped(wait).await {
            break resigned;
        }
    };
    drop(ends);
    if let Some(resigned) = resigned {
        let _ = resigned.send(());
    }
    drop(token);
}

/// The guard of the term a campaign leads in, and the work under it. Dropped with the
/// campaign's future before the term ended, or while it waited for the work (a task aborted, a
/// runtime shut down, the future of `campaign_on_this_task` let go), it tells the term's lease
/// handles that the leadership is given back ([`LossReason::Resigned`]); the guard then
/// releases the lease in the background, as a dropped guard does, unless a piece of the work
/// under the term has not stopped: nobody is left to wait for it, so the lease lapses after its
/// TTL rather than be freed under it (counted by a shutdown under way as a lease that lapsed).
struct Term<'a> {
    guard: Option<LeaseGuard>,
    /// Where work under the term is registered while it runs (`Leader::lease_for_work`).
    working: Working,
    /// The work taken from `working` as the term ends ([`take_work`](Term::take_work)).
    work: TermWork,
    /// The client's shutdown, which counts a lease left to lapse.
    shutdown: &'a Shutdown,
}

impl<'a> Term<'a> {
    fn new(guard: LeaseGuard, working: Working, shutdown: &'a Shutdown) -> Self {
        Self {
            guard: Some(guard),
            working,
            work: TermWork(Vec::new()),
            shutdown,
        }
    }

    /// Completes when the term's lease is lost.
    async fn lost(&self) -> LossReason {
        match &self.guard {
            Some(guard) => guard.lost().await,
            None => future::pending().await,
        }
    }

    /// Takes the work registered under the term, to wait for it: called once no more can be
    /// (the term's lease is no longer handed out).
    fn take_work(&mut self) {
        self.work.0.append(&mut lock(&self.working));
    }

    /// Gives the leadership back: the term's lease handles are told `reason`; once the work
    /// under the term has stopped (waited for at most `bound`), the lease is released: `true`.
    /// Work that did not stop keeps it from being released: it lapses after its TTL (`false`).
    /// While work may still run, the lease is renewed once as the wait begins (the renewer
    /// renews no lease given back): with little of its TTL left, it would otherwise lapse
    /// within the wait, and the next leader's work would run beside the work still running.
    /// Work that stops while that renewal still waits for a round of the renewer in flight
    /// needs none: the lease is released without waiting for the round.
    ///
    /// The guard stays in the term while it waits: dropped then, the term lets the lease lapse
    /// under work that has not stopped.
    async fn give_back(
        mut self,
        reason: LossReason,
        clock: &Clock,
        bound: std::time::Duration,
    ) -> Result<bool, Error> {
        let stopped = match &self.guard {
            None => return Ok(true),
            Some(guard) => {
                let lost = guard.mark_given_back(reason);
                if !self.work.running() {
                    true
                } else if lost.is_some() {
                    // A lease lost first is not renewed (a loss is never taken back), but the
                    // row may still be ours: waited for all the same.
                    self.work.stopped(clock, bound).await
                } else {
                    guard
                        .renew_given_back(self.work.stopped(clock, bound))
                        .await
                }
            }
        };
        match self.guard.take() {
            Some(guard) if stopped => guard.give_back(reason).await.map(|()| true),
            Some(guard) => {
                guard.leave_to_lapse();
                Ok(false)
            }
            None => Ok(true),
        }
    }

    /// Ends a term whose lease was lost, once the work under it has stopped (waited for at most
    /// `bound`): dropped then, the guard frees a lease whose deadline passed, as a dropped guard
    /// does; work that did not stop keeps it from being freed: it lapses after its TTL.
    async fn end_lost(mut self, clock: &Clock, bound: std::time::Duration) {
        let stopped = self.work.stopped(clock, bound).await;
        match self.guard.take() {
            Some(guard) if stopped => drop(guard),
            Some(guard) => guard.leave_to_lapse(),
            None => {}
        }
    }
}

/// The work that ran under a term as it ended (see [`WorkUnderTerm`]).
struct TermWork(Vec<oneshot::Receiver<()>>);

/// `mutex` locked, whoever panicked while holding it.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl TermWork {
    /// Whether a piece of the work has not stopped yet; the pieces that have are forgotten.
    fn running(&mut self) -> bool {
        Self::forget_stopped(&mut self.0);
        !self.0.is_empty()
    }

    /// Drops from `work` the pieces that have stopped.
    fn forget_stopped(work: &mut Vec<oneshot::Receiver<()>>) {
        work.retain_mut(|stopped| matches!(stopped.try_recv(), Ok(None)));
    }

    /// Waits, at most `bound`, until every piece of the work has stopped (been dropped, told
    /// the term ended): whether it has. Work in a synchronous step stops only once the step is
    /// over. The pieces stay here while it waits, so that a wait dropped half-way leaves those
    /// still running for [`running`](TermWork::running) to see.
    async fn stopped(&mut self, clock: &Clock, bound: std::time::Duration) -> bool {
        self.0.is_empty()
            || clock
                .timeout(bound, future::join_all(self.0.iter_mut()))
                .await
                .is_some()
    }
}

impl Drop for Term<'_> {
    fn drop(&mut self) {
        if let Some(guard) = self.guard.take() {
            // A term already lost keeps its reason, and is not counted as a lease not given
            // back, as a lost term's end is not.
            let lost_first = guard.mark_given_back(LossReason::Resigned).is_some();
            self.take_work();
            if self.work.running() {
                guard.leave_to_lapse();
                if !lost_first && self.shutdown.is_closing() {
                    self.shutdown.record_lapsed();
                }
            }
        }
    }
}

/// What a campaign waits on besides its own work.
struct Events<'a, R, C> {
    stopped: &'a mut oneshot::Receiver<oneshot::Sender<()>>,
    renewer: &'a mut R,
    /// The client's shutdown beginning.
    closing: &'a mut C,
}

impl<R, C> Events<'_, R, C>
where
    R: FusedFuture<Output = ()> + Unpin,
    C: Future<Output = ()> + Unpin,
{
    /// Runs `work` until it ends, or until the campaign is stopped: `Err` with whom to tell once
    /// the lease is given back (`None` when the last `Leader` was dropped or the client shuts
    /// down).
    async fn until_stopped<T>(
        &mut self,
        work: impl Future<Output = T>,
    ) -> Result<T, Option<oneshot::Sender<()>>> {
        let work = std::pin::pin!(work);
        let stop = future::select(&mut *self.stopped, &mut *self.renewer);
        let stop = future::select(stop, &mut *self.closing);
        match future::select(work, stop).await {
            Either::Left((output, _)) => Ok(output),
            Either::Right((Either::Left((Either::Left((resigned, _)), _)), _)) => {
                Err(resigned.ok())
            }
            // The renewer ends only with the client, which this campaign holds; a shutdown
            // ends the campaign as the last `Leader` dropped does.
            Either::Right((Either::Left((Either::Right(_), _)), _) | (Either::Right(_), _)) => {
                Err(None)
            }
        }
    }

    /// Runs `work` to its end while the renewer goes on: where the runtime cannot spawn it,
    /// this future is the one that runs it, and the waits of a term's end take the renewer's
    /// lock (a release waits for no renewal in flight; a lease given back is renewed once), so
    /// a renewal left half-way in an unpolled renewer would hold them for ever.
    async fn alongside<T>(&mut self, work: impl Future<Output = T>) -> T {
        let work = std::pin::pin!(work);
        match future::select(work, &mut *self.renewer).await {
            Either::Left((output, _)) => output,
            // The renewer ends only with the client: nothing left to run beside the work.
            Either::Right(((), work)) => work.await,
        }
    }
}

impl fmt::Debug for Leader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leader")
            .field("name", self.name())
            .field("leader", &self.is_leader())
            .finish()
    }
}

#[cfg(all(test, feature = "runtime-tokio"))]
mod tests {
    use super::*;
    use crate::MemoryStore;
    use crate::runtime::TokioRuntime;

    #[tokio::test(start_paused = true)]
    async fn streams_dropped_while_leadership_stays_are_swept() {
        let client = LeaseClient::new(MemoryStore::new(), TokioRuntime);
        let leader = client.campaign("alerts").unwrap();
        leader.first_attempt().await;
        assert!(leader.is_leader());
        for _ in 0..10_000 {
            drop(leader.changes());
        }
        let kept = leader.changes();
        let watchers = leader.shared.state().watchers.len();
        assert!(
            watchers <= 32,
            "{watchers} watchers kept for one live stream"
        );
        drop(kept);
        leader.resign().await;
    }
}
