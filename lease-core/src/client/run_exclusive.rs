//! [`LeaseClient::run_exclusive`]: take a lease, run the work, keep it renewed, give it back.

use std::future::Future;
use std::time::Duration;

use futures::future::{self, Either};

use crate::config::OnLoss;
use crate::guard::LeaseHandle;
use crate::shutdown::Kind;
use crate::{Error, IntoLeaseName, LeaseClient, LossReason};

/// How work run under a lease ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunOutcome<T> {
    /// The work finished while the lease was held.
    Finished(T),
    /// The lease was lost while the work ran, and the work was stopped ([`OnLoss::Cancel`]);
    /// or the client's [`shutdown`](LeaseClient::shutdown) stopped it when its grace period ran
    /// out, with [`LossReason::ShutDown`] (whatever [`OnLoss`] says), and gave the lease back.
    /// Also the outcome, whatever [`OnLoss`] says, of a lease lost before the work would have
    /// started (an acquisition answered after the lease's local deadline): the work never ran.
    Cancelled {
        /// How the lease was lost.
        reason: LossReason,
    },
    /// The lease was lost while the work ran, and the work was let finish ([`OnLoss::Finish`]).
    /// It may have overlapped with another holder's run.
    ///
    /// Also the outcome of work that ends by itself after its lease was lost, whatever
    /// [`OnLoss`] says, so its output is kept: work whose lease was marked
    /// [`NotHeld`](LossReason::NotHeld) (a fenced check failed, see
    /// [`LeaseHandle::mark_not_held`]; the output is usually that check's [`Error::NotHeld`]), or
    /// that ends as its deadline passes (a process paused past it wakes to both at once: whether
    /// the lease was still held is read when the work ends, not from which was seen first).
    FinishedAfterLoss {
        /// What the work returned.
        output: T,
        /// How the lease was lost.
        reason: LossReason,
    },
}

impl<T> RunOutcome<T> {
    /// What the work returned, if it finished.
    pub fn output(self) -> Option<T> {
        match self {
            Self::Finished(output) | Self::FinishedAfterLoss { output, .. } => Some(output),
            Self::Cancelled { .. } => None,
        }
    }
}

/// Per-call settings for [`LeaseClient::run_exclusive_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RunOptions {
    /// What to do with the work when the lease is lost; `None` takes the client's
    /// [`LeaseConfig::on_loss`](crate::LeaseConfig::on_loss).
    pub on_loss: Option<OnLoss>,
    /// Keep the lease taken until this long after it was taken, even when the work ends sooner:
    /// at most one run per period across all instances. Default: zero. Not kept for a lease
    /// lost before its work started (an acquisition answered past its local deadline): nothing
    /// ran, and the next instance may run the work at once.
    pub min_hold: Duration,
}

impl RunOptions {
    /// Sets what to do with the work when the lease is lost.
    #[must_use]
    pub fn on_loss(mut self, on_loss: OnLoss) -> Self {
        self.on_loss = Some(on_loss);
        self
    }

    /// Keeps the lease taken at least `min_hold` after it was taken.
    #[must_use]
    pub fn min_hold(mut self, min_hold: Duration) -> Self {
        self.min_hold = min_hold;
        self
    }
}

impl LeaseClient {
    /// Takes the lease `name`, runs `work` while keeping the lease renewed, and releases it when
    /// the work ends. `None` when somebody else holds the lease: this round is theirs.
    ///
    /// When the lease is lost while the work runs, the work is cancelled (its future dropped,
    /// before the release is sent) and the outcome says so; [`OnLoss::Finish`] lets it run to
    /// its end instead. The work gets a [`LeaseHandle`] for the fence to pass downstream.
    ///
    /// The loss is checked before each poll of the work: the work never starts under a lease
    /// already lost, and a process that resumes from a stall past the lease's local deadline (a
    /// blocked runtime thread, a paused VM, SIGSTOP) stops the work before it takes another
    /// step, even when the work is ready to go on.
    ///
    /// Renewal runs on this task alongside the work where the runtime cannot spawn, so this needs
    /// nothing but a timer.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), lease_core::Error> {
    /// use lease_core::{LeaseClient, MemoryStore, RunOutcome, runtime::TokioRuntime};
    ///
    /// let client = LeaseClient::new(MemoryStore::new(), TokioRuntime);
    /// let outcome = client
    ///     .run_exclusive("sweep", |lease| async move {
    ///         // delete expired challenges, passing lease.fence() along
    ///         lease.fence().get()
    ///     })
    ///     .await?;
    /// assert_eq!(outcome, Some(RunOutcome::Finished(1)));
    /// # Ok(()) }
    /// ```
    ///
    /// During a [`shutdown`](LeaseClient::shutdown), running work may finish within the grace
    /// period; when that runs out it is stopped, the outcome is
    /// [`Cancelled`](RunOutcome::Cancelled) with [`LossReason::ShutDown`], and the lease is
    /// given back (kept until its minimum hold, as always).
    ///
    /// # Errors
    /// As [`try_acquire`](LeaseClient::try_acquire), [`Error::ShuttingDown`] included. A failed release after the work finished is
    /// logged, not returned, so the work's output is never lost: the lease then lapses.
    ///
    /// # Cancel safety
    /// Not cancel safe. Cancelled while taking the lease, as
    /// [`try_acquire`](LeaseClient::try_acquire): the lease may have been taken for nobody and
    /// lapses after one TTL. Cancelled while the work runs, the work's future is dropped with it,
    /// wherever it was, and the guard is dropped: the lease is released in the background where
    /// the runtime can spawn, and lapses after one TTL otherwise. Cancelled while releasing, as
    /// [`LeaseGuard::release`](crate::LeaseGuard::release). Where the runtime cannot spawn, the
    /// renewal this call drove on its task stops with it.
    pub async fn run_exclusive<W, F, T>(
        &self,
        name: impl IntoLeaseName,
        work: W,
    ) -> Result<Option<RunOutcome<T>>, Error>
    where
        W: FnOnce(LeaseHandle) -> F,
        F: Future<Output = T>,
    {
        self.run_exclusive_with(name, RunOptions::default(), work)
            .await
    }

    /// [`run_exclusive`](LeaseClient::run_exclusive) with per-call [`RunOptions`].
    ///
    /// # Errors
    /// As [`run_exclusive`](LeaseClient::run_exclusive).
    ///
    /// # Cancel safety
    /// Not cancel safe, as [`run_exclusive`](LeaseClient::run_exclusive).
    pub async fn run_exclusive_with<W, F, T>(
        &self,
        name: impl IntoLeaseName,
        options: RunOptions,
        work: W,
    ) -> Result<Option<RunOutcome<T>>, Error>
    where
        W: FnOnce(LeaseHandle) -> F,
        F: Future<Output = T>,
    {
        let name = name.into_lease_name()?;
        let token = self.enter(Kind::Run, &name)?;
        let Some(guard) = self.try_acquire(name).await? else {
            return Ok(None);
        };
        let on_loss = options.on_loss.unwrap_or(self.config().on_loss);
        let handle = guard.handle();
        // One renewer future for the whole call: it may hold the renewer's lock, which a second
        // one would wait for forever. It is driven until the release has answered: where the
        // runtime cannot spawn, a renewal it has in flight holds what a release with a minimum
        // hold waits for.
        let mut renewer = std::pin::pin!(self.inner.renewer.run_unless_spawned());
        // Until the work's future is dropped, a shutdown does not free the lease under it.
        let working = handle.working();
        // A lease lost before the work starts (an acquisition answered after its local
        // deadline) runs nothing of it: not even the closure that makes it.
        let lost_first = handle.loss();
        let outcome = 'run: {
            if let Some(reason) = lost_first {
                break 'run RunOutcome::Cancelled { reason };
            }
            // Pinned in this block, so the work's future (and whatever it owns: tasks it joins,
            // an open transaction and its row locks) is dropped before the lease is released,
            // not after: once released, the next holder may start at once.
            let work = std::pin::pin!(work(guard.handle()));
            // A shutdown's grace period running out stops the work as a loss does.
            let cancelled = self.shutdown_state().cancelling();
            let lost = std::pin::pin!(async {
                match future::select(std::pin::pin!(handle.lost()), cancelled).await {
                    Either::Left((reason, _)) => reason,
                    Either::Right(_) => LossReason::ShutDown,
                }
            });
            // The loss is polled before the work, at every poll: a process that resumes from a
            // stall past its deadline (a blocked runtime thread, SIGSTOP) with the loss due and
            // the work ready stops the work before it takes another step.
            // The renewer comes first: a refusal it reads in this wake-up marks the lease lost
            // before the loss is polled, not after, when the work would already have stepped.
            match future::select(future::select(renewer.as_mut(), lost), work).await {
                // The work ended by itself; whether the lease was still held then is read now,
                // not from which future was polled first: work that ends after a pause past its
                // deadline, or after a fenced check found the lease gone (whatever the on-loss
                // setting), did not finish under the lease.
                Either::Right((output, _)) => match handle.loss() {
                    None => RunOutcome::Finished(output),
                    Some(reason) => RunOutcome::FinishedAfterLoss { output, reason },
                },
                Either::Left((Either::Left((never, _)), _)) => match never {},
                Either::Left((Either::Right((LossReason::ShutDown, _)), _)) => {
                    tracing::info!(lease = %guard.name(), fence = %guard.fence(), "the shutdown's grace period ran out; work stopped");
                    RunOutcome::Cancelled {
                        reason: LossReason::ShutDown,
                    }
                }
                Either::Left((Either::Right((reason, _)), work)) => match on_loss {
                    OnLoss::Cancel => RunOutcome::Cancelled { reason },
                    OnLoss::Finish => {
                        tracing::warn!(lease = %guard.name(), fence = %guard.fence(), %reason, "lease lost; letting the work finish as configured");
                        // The shutdown's end of grace, too, is polled before the work.
                        let cancelled = self.shutdown_state().cancelling();
                        match future::select(future::select(cancelled, renewer.as_mut()), work)
                            .await
                        {
                            Either::Right((output, _)) => {
                                RunOutcome::FinishedAfterLoss { output, reason }
                            }
                            Either::Left((Either::Left(_), _)) => RunOutcome::Cancelled {
                                reason: LossReason::ShutDown,
                            },
                            Either::Left((Either::Right((never, _)), _)) => match never {},
                        }
                    }
                },
            }
        };
        drop(working);
        token.shutdown().record_run(matches!(
            outcome,
            RunOutcome::Cancelled {
                reason: LossReason::ShutDown
            }
        ));
        // After a loss the release is expected to fail; after a clean finish it is worth a word.
        // The minimum hold keeps a run from being repeated within it: a lease lost before its
        // work started ran nothing to keep.
        let min_hold = match lost_first {
            None => options.min_hold,
            Some(_) => Duration::ZERO,
        };
        let release = std::pin::pin!(guard.release_after(min_hold));
        let released = match future::select(release, renewer).await {
            Either::Left((released, _)) => released,
            Either::Right((never, _)) => match never {},
        };
        if let Err(error) = released
            && let RunOutcome::Finished(_) = outcome
        {
            tracing::warn!(
                error = %crate::ErrorChain(&error),
                "lease not released after the work finished"
            );
        }
        drop(token);
        Ok(Some(outcome))
    }
}
