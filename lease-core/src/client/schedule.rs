//! [`LeaseClient::schedule`] and [`LeaseClient::schedule_on_leader`]: a job's rounds on a
//! [`Schedule`], run by whichever instance wins each round or by the elected leader.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use futures::future::{self, BoxFuture, Either, FutureExt};

use crate::clock::{Clock, ticks};
use crate::guard::LeaseHandle;
use crate::schedule::{EndsWhenDropped, Jitter, Round, Rounds, Schedule, Scheduled, Ticks};
use crate::shutdown::{Kind, Token};
use crate::{
    Error, IntoLeaseName, Leader, LeaseClient, LossReason, RunOptions, RunOutcome, WorkUnderTerm,
};

impl LeaseClient {
    /// Runs `work` on `schedule`: at each round every instance tries to take the lease `name`,
    /// and the one that wins runs the work under it, kept renewed, and gives it back when it
    /// ends, kept taken until its hold ends ([`Schedule::hold`]: by default the period less the
    /// jitter and a tenth of the period, at least half the period); the others skip the round,
    /// also those that try it after the work has ended. On a task of the runtime.
    ///
    /// A round still running when the next falls is not started again: the rounds it overran
    /// are skipped and counted ([`ScheduleStats::missed`](crate::ScheduleStats::missed)). The
    /// client's [`shutdown`](LeaseClient::shutdown) stops the schedule: no new round starts, and
    /// a running one may finish within the grace period.
    ///
    /// Work that panics takes the schedule's task down with it, as a panic does on any task:
    /// the schedule stops on this instance ([`Scheduled::is_stopped`], for a health check),
    /// the round's lease is given back in the background, without the round's hold (the round
    /// did not finish, so another instance may run it again before the next boundary), and the
    /// other instances go on running the rounds. So is a round whose future is dropped half-way
    /// (the loop of [`schedule_on_this_task`](LeaseClient::schedule_on_this_task) let go, a
    /// runtime shut down).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), lease_core::Error> {
    /// use std::time::Duration;
    /// use lease_core::{LeaseClient, MemoryStore, Schedule, runtime::TokioRuntime};
    ///
    /// let client = LeaseClient::new(MemoryStore::new(), TokioRuntime);
    /// let hourly = Schedule::every(Duration::from_secs(3600))?.aligned();
    /// let sweep = client.schedule("sweep", hourly, |lease| async move {
    ///     // delete expired challenges, passing lease.fence() along
    /// })?;
    /// # sweep.stop().await;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidName`]; [`Error::ShuttingDown`] once the shutdown has begun;
    /// [`Error::InvalidConfig`] when the runtime cannot spawn (use
    /// [`schedule_on_this_task`](LeaseClient::schedule_on_this_task) then).
    pub fn schedule<W, F>(
        &self,
        name: impl IntoLeaseName,
        schedule: Schedule,
        work: W,
    ) -> Result<Scheduled, Error>
    where
        W: Fn(LeaseHandle) -> F + Send + Sync + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        let (scheduled, rounds) = self.schedule_on_this_task(name, schedule, work)?;
        self.spawn_schedule(rounds)?;
        Ok(scheduled)
    }

    /// [`schedule`](LeaseClient::schedule) with the loop as a future to poll on a task of your
    /// own; it ends when the schedule stops. Keep polling it through a
    /// [`shutdown`](LeaseClient::shutdown), or drop it first: a loop kept but no longer polled
    /// cannot end, so the shutdown waits its whole grace period for it and reports it
    /// unfinished.
    ///
    /// # Errors
    /// [`Error::InvalidName`]; [`Error::ShuttingDown`] once the shutdown has begun.
    pub fn schedule_on_this_task<W, F>(
        &self,
        name: impl IntoLeaseName,
        schedule: Schedule,
        work: W,
    ) -> Result<(Scheduled, BoxFuture<'static, ()>), Error>
    where
        W: Fn(LeaseHandle) -> F + Send + Sync + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        let name = name.into_lease_name()?;
        let token = self.enter(Kind::Schedule, &name)?;
        let rounds = Arc::new(Rounds::new(name));
        let scheduled = Scheduled::new(Arc::clone(&rounds));
        let client = self.clone();
        let options = RunOptions::default().min_hold(schedule.hold());
        let work = Arc::new(work);
        let round = move |rounds: Arc<Rounds>| {
            let (client, work) = (client.clone(), Arc::clone(&work));
            async move {
                let outcome = client
                    .run_exclusive_with(rounds.name(), options, |lease| work(lease))
                    .await;
                match outcome {
                    Ok(Some(RunOutcome::Finished(()))) => Some(Round::Ran),
                    Ok(Some(_)) => Some(Round::Lost),
                    Ok(None) => Some(Round::Skipped),
                    Err(Error::ShuttingDown { .. }) => None,
                    Err(error) => {
                        tracing::warn!(lease = %rounds.name(), error = %crate::ErrorChain(&error), "scheduled round failed");
                        Some(Round::Failed)
                    }
                }
            }
        };
        let ends = rounds.ends_when_dropped();
        let rounds_loop = run_rounds(self.clone(), rounds, schedule, round, None, token, ends);
        Ok((scheduled, rounds_loop.boxed()))
    }

    /// Runs `work` on `schedule` on the elected leader: the instances campaign for the lease
    /// `name` (see [`campaign`](LeaseClient::campaign)), and at each round the one that leads
    /// runs the work under the current term's lease; the others skip the round. For frequent
    /// work: one acquisition, then renewals, instead of one every round. The schedule's hold
    /// does not apply: the term's lease stays taken while the leader leads, and a new leader
    /// runs the rounds of its own schedule. For an aligned one, those are the same boundaries,
    /// each delayed by the same [`jitter`](Schedule::jitter) on every instance, so a round is
    /// not run again across a handover, but for the instances' clock difference: a round that
    /// falls within it of the handover may run on both or on neither; and one that falls while
    /// nobody leads, before the new leader is elected (at once where the store pushes
    /// releases, up to [`campaign_retry`](crate::LeaseConfig::campaign_retry) where it does
    /// not), is skipped (work whose second run does damage runs under
    /// [`schedule`](LeaseClient::schedule), each round's lease kept for its hold, or fences its
    /// writes). An unaligned schedule's rounds count from each instance's
    /// start, so a new leader's first round may fall anywhere within the period. Work
    /// whose lease is lost while it runs is stopped, the loss checked before each poll of the
    /// work, as [`run_exclusive`](LeaseClient::run_exclusive) does, and the term's lease is
    /// freed only once the round's work has stopped, so the next leader does not run beside it.
    /// A round in a blocking step stops only when the step ends: where the term is given back
    /// (the schedule stops, the client shuts down), the lease is renewed once as the campaign
    /// begins to wait for the round, and one that has not stopped within the store timeout
    /// leaves the lease to lapse one TTL after that renewal; where the term's lease is lost
    /// (renewals failed past its deadline, another instance took it), nothing can keep it, and
    /// the next leader may start once its row expires, a safety margin after its local
    /// deadline, beside a step still running (see [`WorkUnderTerm`](crate::WorkUnderTerm);
    /// fence the work's writes where that matters). The campaign ends, giving
    /// leadership back, when the schedule stops; the client's shutdown gives leadership back at
    /// once, and so stops a running round at once rather than after the grace period. A
    /// campaign that a permanent store error ended (see [`Leader::error`]) is started again at
    /// the next round, which runs as the new campaign's first attempt says: it fails (counted
    /// in [`ScheduleStats::failed`](crate::ScheduleStats::failed)) only while the store still
    /// refuses. A round that falls while the campaign's attempts fail (the store does not
    /// answer) waits for the campaign's next attempt, at most the acquire backoff's longest
    /// pause and the store timeout: it runs if this process leads then, and fails (counted in
    /// `failed`, not `skipped`) if the attempt failed too.
    ///
    /// # Errors
    /// As [`schedule`](LeaseClient::schedule).
    pub fn schedule_on_leader<W, F>(
        &self,
        name: impl IntoLeaseName,
        schedule: Schedule,
        work: W,
    ) -> Result<Scheduled, Error>
    where
        W: Fn(LeaseHandle) -> F + Send + Sync + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        let name = name.into_lease_name()?;
        let token = self.enter(Kind::Schedule, &name)?;
        // The campaign of the moment: one that a permanent store error ended is replaced at
        // the next round.
        let campaign = Arc::new(Mutex::new(self.campaign(name.clone())?));
        let rounds = Arc::new(Rounds::new(name));
        let scheduled = Scheduled::new(Arc::clone(&rounds));
        let client = self.clone();
        let work = Arc::new(work);
        let term = Arc::clone(&campaign);
        let round = move |rounds: Arc<Rounds>| {
            let (client, work, campaign) = (client.clone(), Arc::clone(&work), Arc::clone(&term));
            async move {
                let mut leader = current(&campaign);
                // The first round falls as the schedule starts, before the campaign's first
                // attempt has answered: not leading yet says nothing until it has.
                leader.first_attempt().await;
                if let Some(error) = leader.error() {
                    // A permanent store error ended the campaign (a table renamed by a
                    // migration, a permission revoked), maybe long ago: the schedule campaigns
                    // again now, as a plain schedule acquires again at each round, and this
                    // round goes on as the new campaign's first attempt says, rather than fail
                    // on an error the store may have left behind (or skip every round for good).
                    tracing::warn!(lease = %rounds.name(), error = %crate::ErrorChain(&*error), "the leader's campaign ended; campaigning again");
                    match client.campaign(rounds.name().clone()) {
                        Ok(again) => {
                            *campaign.lock().unwrap_or_else(PoisonError::into_inner) =
                                again.clone();
                            leader = again;
                        }
                        // The client shuts down: the schedule ends with it.
                        Err(Error::ShuttingDown { .. }) => return None,
                        // Another failure (a runtime that cannot spawn it): the round failed,
                        // and the next tries again.
                        Err(error) => {
                            tracing::warn!(lease = %rounds.name(), error = %crate::ErrorChain(&error), "the leader's campaign could not start again");
                            return Some(Round::Failed);
                        }
                    }
                    leader.first_attempt().await;
                    if leader.error().is_some() {
                        // Still refused: the round failed, and the next campaigns again.
                        return Some(Round::Failed);
                    }
                }
                // `working` keeps the term's lease from being freed until the work below has
                // stopped: told of the term's end in the middle of a synchronous step, the work
                // stops only once the step is over.
                let (lease, working) = match lease_for_round(&client, &leader, &rounds).await {
                    Ok(taken) => taken,
                    Err(ended) => return ended,
                };
                let token = client.enter(Kind::Run, rounds.name()).ok()?;
                // A shutdown gives leadership back at once, so it stops the round at once too:
                // the work never runs on without the lease.
                let cancelled = client.shutdown_state().closing();
                let lost = async {
                    match future::select(std::pin::pin!(lease.lost()), cancelled).await {
                        Either::Left((reason, _)) => reason,
                        Either::Right(_) => LossReason::ShutDown,
                    }
                };
                // The loss is polled before the work, at every poll (the first included): a
                // process that resumes from a stall past its deadline with the loss due and the
                // work ready stops the work before it takes another step.
                // The round, and whether its work was stopped rather than ended by itself.
                let (round, stopped) = match future::select(
                    std::pin::pin!(lost),
                    std::pin::pin!(work(lease.clone())),
                )
                .await
                {
                    // The work ended by itself; whether the lease was still held then is read
                    // now, as `run_exclusive` reads it: work that ends after a step past the
                    // lease's deadline did not finish under the lease.
                    Either::Right(((), _)) => match lease.loss() {
                        None => (Round::Ran, false),
                        Some(reason) => {
                            tracing::info!(lease = %rounds.name(), %reason, "leader's scheduled round ended after its lease was lost");
                            (Round::Lost, false)
                        }
                    },
                    Either::Left((reason, _)) => {
                        // Info: a loss was logged as one where it was noticed, and a term given
                        // back (a shutdown, a resignation) is no failure.
                        tracing::info!(lease = %rounds.name(), %reason, "leader's scheduled round stopped");
                        (Round::Lost, true)
                    }
                };
                // The work's future is gone: the term's lease may be freed.
                drop(working);
                token
                    .shutdown()
                    .record_run(stopped && client.is_shutting_down());
                Some(round)
            }
        };
        self.spawn_schedule(
            run_rounds(
                self.clone(),
                Arc::clone(&rounds),
                schedule,
                round,
                Some(campaign),
                token,
                rounds.ends_when_dropped(),
            )
            .boxed(),
        )?;
        Ok(scheduled)
    }

    fn spawn_schedule(&self, rounds: BoxFuture<'static, ()>) -> Result<(), Error> {
        self.clock()
            .runtime()
            .spawn(rounds)
            .map_err(|_| Error::InvalidConfig {
                reason: "a schedule on a runtime that cannot spawn: poll the future of schedule_on_this_task instead".to_owned(),
            })
    }
}

/// The loop of one schedule: waits for each round, runs it with `round` (which answers how it
/// ended, `None` to stop), skips the rounds that fell meanwhile. Ends when the schedule is
/// stopped or the client shuts down; a leader's campaign resigns then. Counted by `token` for
/// a shutdown, which waits for it to end.
/// `ends` ends the schedule with the loop, and with its future when that is dropped before it
/// ended, polled or not.
async fn run_rounds<R, Fut>(
    client: LeaseClient,
    rounds: Arc<Rounds>,
    schedule: Schedule,
    round: R,
    leader: Option<Arc<Mutex<Leader>>>,
    token: Token,
    ends: EndsWhenDropped,
) where
    R: Fn(Arc<Rounds>) -> Fut,
    Fut: Future<Output = Option<Round>>,
{
    let clock = client.clock().clone();
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    // Only the leader runs a leader's round: on the wall clock's boundaries, each round's delay
    // is the same on every instance, so a round is neither run again nor skipped when the
    // leadership moves within its jitter.
    let jitter = Jitter::new(
        schedule.jitter_limit(),
        rounds.name(),
        leader.is_some() && schedule.is_aligned(),
    );
    let mut ticks = Ticks::new(&schedule, clock.now(), since_epoch, jitter);
    loop {
        if !until_due(&clock, ticks.due(), &client, &rounds).await {
            break;
        }
        match round(Arc::clone(&rounds)).await {
            Some(ended) => rounds.count(ended),
            None => break,
        }
        let missed = ticks.advance(clock.now());
        if missed > 0 {
            tracing::info!(lease = %rounds.name(), missed, "rounds fell while one ran; skipped");
            rounds.missed(missed);
        }
    }
    if let Some(campaign) = leader {
        current(&campaign).resign().await;
    }
    drop(ends);
    drop(token);
}

/// The term's lease for a leader's round, and the work it counts under the term (see
/// [`Leader::lease_for_work`]); or how the round ended without it: skipped where this process
/// does not lead, failed where the campaign's attempts fail, `None` when the client shuts down.
///
/// Where the campaign's latest attempt failed (the store did not answer), nobody may lead:
/// the round waits for its next attempt, within the longest pause of the acquire backoff and
/// the store timeout, and runs if this process leads then (a blip of the database as an hourly
/// schedule starts costs it no hour); otherwise it failed, counted as a plain schedule's round
/// whose acquisition failed, not as a round another instance had. A stop of the schedule or
/// the client's shutdown ends the wait, and the schedule, without a round.
async fn lease_for_round(
    client: &LeaseClient,
    leader: &Leader,
    rounds: &Rounds,
) -> Result<(LeaseHandle, WorkUnderTerm), Option<Round>> {
    if let Some(taken) = leader.lease_for_work() {
        return Ok(taken);
    }
    let Some((_, next_attempt)) = leader.failing() else {
        return Err(Some(Round::Skipped));
    };
    let clock = client.clock();
    let config = client.config();
    let longest = config
        .acquire_backoff
        .1
        .saturating_add(config.store_timeout);
    let give_up = clock.sleep_until(clock.now().saturating_add(ticks(longest)));
    // A stop or a shutdown asked for meanwhile ends the wait: no round starts after it.
    let stop = future::select(rounds.stopped(), client.shutdown_state().closing());
    future::select(next_attempt, future::select(std::pin::pin!(give_up), stop)).await;
    if rounds.is_stop_asked() || client.is_shutting_down() {
        return Err(None);
    }
    if let Some(taken) = leader.lease_for_work() {
        return Ok(taken);
    }
    match leader
        .failing()
        .map(|(error, _)| error)
        .or_else(|| leader.error())
    {
        Some(error) => {
            tracing::warn!(lease = %rounds.name(), error = %crate::ErrorChain(&*error), "leader's scheduled round failed: the campaign's attempts fail");
            Err(Some(Round::Failed))
        }
        None => Err(Some(Round::Skipped)),
    }
}

/// The leader's campaign of the moment.
fn current(campaign: &Mutex<Leader>) -> Leader {
    campaign
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

/// Waits until clock tick `at`: `false` when the schedule was stopped or the client began
/// shutting down first, also when the round is due already (the stop is polled first: a
/// schedule stopped as it starts, or a task polled late, starts no round).
async fn until_due(clock: &Clock, at: u64, client: &LeaseClient, rounds: &Rounds) -> bool {
    let stop = future::select(rounds.stopped(), client.shutdown_state().closing());
    let due = std::pin::pin!(clock.sleep_until(at));
    matches!(future::select(stop, due).await, Either::Right(_))
}
