//! Crash failover of a PostgreSQL primary to its streaming standby, on private servers
//! (`lease_tests::server::PostgresReplication`), with the clients on the service address that
//! moves to the new primary.
//!
//! **Asynchronous replication, the standby cut off first.** A holder takes the lease and writes
//! under its fence; once the standby has replayed that, its stream is cut. The holder releases,
//! a second holder takes the lease and writes (both acknowledged, neither replicated), and the
//! primary crashes; the standby is promoted with the older row. Then:
//! - the database's check statement, sent alone, refuses the second holder (on the synchronous
//!   run, its control, it passes for the kept holder); the second holder learns of its loss at
//!   its next renewal (`Rejected`: the row names the first holder), and its fenced transaction
//!   is refused;
//! - the next holder's fence exceeds every fence granted before the crash (the fences are the
//!   database's clock, and the promoted standby's clock is past the lost acquisition's time);
//! - the writes committed under the fences hold no stale write (`lease_reliability::fenced`).
//!
//! The negative control runs beside it on its own name: a client whose store answers counter
//! fences (`previous + 1`, [`CounterFences`]) must be handed a fence that was granted before
//! the crash, or the check above could not fail. The acknowledged acquisition the standby
//! missed is counted as lost: that is the control of the synchronous run.
//!
//! **Synchronous replication** (`synchronous_standby_names = '*'`, `synchronous_commit =
//! on`): the same steps without the cut. The second holder's row is on the new primary, its
//! renewals resume there with the same fence and its fenced writes go on. An acquisition sent
//! while the stream is cut is never acknowledged (the commit waits for the standby, and the
//! call times out); the stream is then healed.
//!
//! **The burst**, on both runs: each driver acquires fresh names one after another for half a
//! second, and the primary crashes right after the last acknowledged one. Under synchronous
//! replication every acknowledged acquisition is on the new primary (zero lost); under
//! asynchronous replication with the standby cut off, every one is lost, which is what shows
//! that the check finds losses where there are some.
//!
//! Both drivers run side by side in each topology, each on a name of its own, each with its
//! RELIABILITY line. Each run takes about 20 s.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lease_core::{
    ErrorChain, HolderId, LeaseClient, LeaseGuard, LeaseName, LeaseStore, LossReason, Ttl,
};
use lease_diesel::diesel_async::AsyncPgConnection;
use lease_reliability::counter_fences::CounterFences;
use lease_reliability::db;
use lease_reliability::diesel::Diesel;
use lease_reliability::factory::Sqlx;
use lease_reliability::fenced::{self, FencedWrites, Protected};
use lease_reliability::report::{self, Counts};
use lease_reliability::scenario::{Timing, runtime, take_over};
use lease_sqlx::CheckAt;
use lease_sqlx::sqlx::{self, Connection, PgConnection, Postgres};
use lease_tests::env;
use lease_tests::server::{PostgresReplication, Replication};

fn timing() -> Timing {
    Timing::for_ttl(Duration::from_secs(12))
}

/// At most this many acquisitions in a burst.
const BURST_LIMIT: u64 = 2_000;
/// How long the burst runs before the crash.
const BURST_TIME: Duration = Duration::from_millis(500);

/// The control's leases: each expires before the next acquisition.
const CONTROL_TTL: Duration = Duration::from_secs(1);

/// How long a step that waits for the new primary may take.
const STEP_LIMIT: Duration = Duration::from_secs(15);
/// How long reading the burst's rows on the new primary may take once it answers, on top of
/// [`STEP_LIMIT`]: at most [`BURST_LIMIT`] reads, about a millisecond each on loopback.
const BURST_READ_LIMIT: Duration = Duration::from_secs(15);

/// One driver's part of the scenario: its stores, clients, names and what they were granted.
struct Leg<F: FencedWrites> {
    factory: F,
    store: F::Store,
    counts: Counts,
    protected: Protected,
    name: LeaseName,
    client: LeaseClient,
    /// Granted before the crash, in order.
    granted: Vec<u64>,
    /// The latest holder before the crash: its acquisition was acknowledged.
    latest: Option<LeaseGuard>,
    /// The negative control: acquisitions of its own name with counter fences, each left to
    /// expire (a released row is not visible through the store, its fence with it).
    control_name: LeaseName,
    control: CounterFences<F::Store>,
    control_granted: Vec<u64>,
    /// Writes committed (acknowledged) under a fence before the crash.
    written: u64,
}

impl<F: FencedWrites> Leg<F> {
    async fn new(factory: F, scenario: &str, url: &str, table: &str) -> Self {
        let timing = timing();
        let counts = Counts::new(scenario, factory.label());
        let store = factory.connect(url, table, 4).await.expect("a store");
        factory.setup(&store).await.expect("the lease table");
        let driver = counts.backend.replace('/', "_");
        let protected = Protected::new(format!("{table}_{driver}"));
        for statement in protected.create() {
            factory.execute(&store, &statement).await.unwrap();
        }
        Self {
            client: timing.client(store.clone()),
            control: CounterFences::new(store.clone()),
            factory,
            store,
            counts,
            protected,
            name: LeaseName::new(format!("ledger-{driver}")).unwrap(),
            granted: Vec::new(),
            latest: None,
            control_name: LeaseName::new(format!("control-{driver}")).unwrap(),
            control_granted: Vec::new(),
            written: 0,
        }
    }

    /// A holder takes each name, and writes once under the real one; the control's lease
    /// expires.
    async fn first(&mut self) {
        self.take_both().await;
        tokio::time::sleep(CONTROL_TTL + Duration::from_millis(500)).await;
    }

    /// The holders release, new ones take the names and write: on the asynchronous run, while
    /// the standby is cut off.
    async fn second(&mut self) {
        if let Some(guard) = self.latest.take() {
            guard.release().await.expect("a release before the crash");
        }
        self.take_both().await;
    }

    async fn take_both(&mut self) {
        let guard = self
            .client
            .try_acquire(&self.name)
            .await
            .expect("an acquisition before the crash")
            .expect("the name is free");
        self.counts.operations += 1;
        self.granted.push(guard.fence().get());
        let seq = self
            .factory
            .write(
                &self.store,
                guard.as_ref(),
                Some(CheckAt::Commit),
                &self.protected,
                "w",
            )
            .await;
        self.counts.operations += 1;
        match seq {
            Ok(_) => self.written += 1,
            Err(error) => self
                .counts
                .violation(format!("a fenced write before the crash failed: {error}")),
        }
        self.latest = Some(guard);
        let control = self.control_acquire().await;
        self.counts.operations += 1;
        match control {
            Ok(Some(fence)) => self.control_granted.push(fence),
            other => self.counts.violation(format!(
                "the control's acquisition before the crash answered {other:?}"
            )),
        }
    }

    /// One acquisition of the control's name, with a fresh holder, left to expire.
    async fn control_acquire(&self) -> Result<Option<u64>, lease_core::Error> {
        let ttl = Ttl::new(CONTROL_TTL).expect("a valid TTL");
        let fence = self
            .control
            .try_acquire(&self.control_name, &HolderId::generate(), ttl)
            .await?;
        Ok(fence.map(lease_core::Fence::get))
    }

    /// While the stream is cut on the synchronous run: an acquisition of another name is not
    /// acknowledged.
    async fn blocked(&mut self) {
        let name = format!("{}-blocked", self.name);
        let answer = self.client.try_acquire(name.as_str()).await;
        self.counts.operations += 1;
        self.counts.expect(answer.is_err(), || {
            format!(
                "an acquisition was acknowledged while the synchronous standby was cut off: \
                 {answer:?}"
            )
        });
    }

    /// After the failover: what the new primary has, and what each holder learns.
    async fn after(&mut self, replication: Replication) {
        let timing = timing();
        let latest = self.latest.take().expect("a holder before the crash");
        let row = self.inspect().await;
        let kept = row
            .as_ref()
            .is_some_and(|row| row.fence == latest.fence() && &row.holder == latest.holder());
        let lost_acquisitions = u64::from(!kept);
        eprintln!(
            "{}: the new primary has {row:?}; the last acknowledged acquisition was fence {} \
             by {}",
            self.counts.backend,
            latest.fence(),
            latest.holder()
        );
        match replication {
            Replication::Synchronous => {
                self.counts.expect(lost_acquisitions == 0, || {
                    "an acknowledged acquisition was lost under synchronous replication".into()
                });
                self.resumes(&latest).await;
                latest.release().await.unwrap_or_else(|error| {
                    self.counts
                        .violation(format!("the kept lease did not release: {error}"));
                });
            }
            _ => {
                // The control of the synchronous run: the check finds the loss it is there for.
                self.counts.expect(lost_acquisitions == 1, || {
                    "the standby had the acquisition made while it was cut off: the scenario \
                     lost nothing, so it shows nothing"
                        .into()
                });
                self.learns_of_loss(&latest).await;
            }
        }

        // The next holder: its fence exceeds every fence granted before the crash.
        match take_over(
            &self.client,
            self.name.as_str(),
            timing.renew_every / 8,
            timing.ttl * 2,
        )
        .await
        {
            Ok(takeover) => {
                self.counts.operations += takeover.attempts;
                let fence = takeover.guard.fence().get();
                let before = self.granted.iter().copied().max().unwrap_or(0);
                self.counts.expect(fence > before, || {
                    format!(
                        "the fence after the failover, {fence}, does not exceed the fences \
                         granted before it, {:?}",
                        self.granted
                    )
                });
                match self
                    .factory
                    .write(
                        &self.store,
                        takeover.guard.as_ref(),
                        Some(CheckAt::Commit),
                        &self.protected,
                        "w",
                    )
                    .await
                {
                    Ok(_) => self.written += 1,
                    Err(error) => self
                        .counts
                        .violation(format!("the new holder's fenced write failed: {error}")),
                }
                self.counts.operations += 1;
                let _ = takeover.guard.release().await;
            }
            Err(error) => self.counts.violation(error),
        }
        self.control(replication).await;
        self.no_stale_writes(replication).await;
        self.counts.faults += 1;
    }

    /// The burst's acknowledged acquisitions on the new primary: every one kept under
    /// synchronous replication; every one lost under asynchronous replication with the
    /// standby cut off (the control: the check finds losses where there are some).
    async fn burst_kept(&mut self, burst: Burst, replication: Replication) {
        self.counts.operations += burst.acknowledged.len() as u64 + burst.failed;
        self.counts.expect(burst.refused == 0, || {
            format!(
                "{} acquisitions of fresh names answered \"held\"",
                burst.refused
            )
        });
        self.counts.expect(burst.acknowledged.len() >= 5, || {
            format!(
                "only {} acquisitions acknowledged before the crash: the burst shows little",
                burst.acknowledged.len()
            )
        });
        // One deadline for the whole check, not one per guard: a new primary that never
        // answers costs one STEP_LIMIT, not STEP_LIMIT for each of hundreds of guards. Once it
        // answers, each read takes a millisecond or so; BURST_READ_LIMIT covers them all.
        let deadline = Instant::now() + STEP_LIMIT + BURST_READ_LIMIT;
        let (mut lost, mut read) = (0u64, 0u64);
        let mut unread: Option<(LeaseName, String)> = None;
        'guards: for guard in &burst.acknowledged {
            let name = guard.name().clone();
            let row = loop {
                let left = deadline.saturating_duration_since(Instant::now());
                let error = match tokio::time::timeout(left, self.store.inspect(&name)).await {
                    Ok(Ok(row)) => break row,
                    Ok(Err(error)) => ErrorChain(&error).to_string(),
                    Err(_) => "no answer".to_owned(),
                };
                if Instant::now() >= deadline {
                    unread = Some((name, error));
                    break 'guards;
                }
                tokio::time::sleep(Duration::from_millis(200).min(left)).await;
            };
            read += 1;
            let kept =
                row.is_some_and(|row| row.fence == guard.fence() && &row.holder == guard.holder());
            lost += u64::from(!kept);
        }
        let acknowledged = burst.acknowledged.len();
        if let Some((name, error)) = unread {
            self.counts.violation(format!(
                "the new primary did not answer for the burst within {:?}: {} of {acknowledged} \
                 acknowledged acquisitions unread, from {name} on ({error})",
                STEP_LIMIT + BURST_READ_LIMIT,
                acknowledged as u64 - read,
            ));
        }
        eprintln!(
            "{}: a burst of {acknowledged} acknowledged acquisitions ({} failed in the crash): \
             {read} read on the new primary, {lost} lost",
            self.counts.backend, burst.failed
        );
        match replication {
            Replication::Synchronous => self.counts.expect(lost == 0, || {
                format!(
                    "{lost} of {read} acknowledged acquisitions read lost under synchronous \
                     replication"
                )
            }),
            _ => self.counts.expect(lost == read, || {
                format!(
                    "only {lost} of {read} acquisitions made while the standby was cut off (and \
                     read on the new primary) were lost: the scenario does not show what it \
                     claims"
                )
            }),
        }
        for guard in burst.acknowledged {
            let _ = guard.release().await;
        }
    }

    /// Synchronous run: renewals of the kept lease resume on the new primary, with its fence,
    /// and its fenced writes go on.
    async fn resumes(&mut self, latest: &LeaseGuard) {
        let timing = timing();
        let before = self.inspect().await;
        tokio::time::sleep(timing.renew_every * 2).await;
        let after = self.inspect().await;
        let renewed = match (&before, &after) {
            (Some(before), Some(after)) => {
                after.expires_at > before.expires_at
                    && after.fence == latest.fence()
                    && &after.holder == latest.holder()
            }
            _ => false,
        };
        self.counts.expect(renewed && latest.is_held(), || {
            format!("renewals did not resume on the new primary: {before:?} then {after:?}")
        });
        // The control of the asynchronous run's check alone: it passes for a kept holder.
        match self.check_settled(latest).await {
            Ok(true) => {}
            other => self.counts.violation(format!(
                "the database's check, alone, answered {other:?} for the kept holder"
            )),
        }
        match self.write_settled(latest).await {
            Ok(()) => self.written += 1,
            Err(error) => self.counts.violation(format!(
                "the kept holder's fenced write failed on the new primary: {error}"
            )),
        }
    }

    /// Asynchronous run: the holder whose acquisition was lost learns it at its next renewal,
    /// and then its fenced transaction is refused.
    async fn learns_of_loss(&mut self, latest: &LeaseGuard) {
        let timing = timing();
        // The database itself refuses it, whatever the guard knows yet: its check statement,
        // sent alone, matches no row on the new primary (which names the earlier holder).
        match self.check_settled(latest).await {
            Ok(false) => {}
            other => self.counts.violation(format!(
                "the database's check, alone, answered {other:?} for the holder whose \
                 acquisition was lost, not a refusal"
            )),
        }
        let waited = Instant::now();
        let lost = tokio::time::timeout(timing.ttl, latest.lost()).await;
        self.counts.operations += 1;
        eprintln!(
            "{}: the holder whose acquisition was lost learned {lost:?} after {:?}",
            self.counts.backend,
            waited.elapsed()
        );
        self.counts.expect(lost == Ok(LossReason::Rejected), || {
            format!("the holder whose acquisition was lost saw {lost:?}, not a rejected renewal")
        });
        match self.write_settled(latest).await {
            Err(error) if fenced::is_refusal(&error) => {}
            other => self.counts.violation(format!(
                "the lost holder's fenced transaction answered {other:?}, not a refusal"
            )),
        }
    }

    /// The control: counter fences after the failover.
    async fn control(&mut self, replication: Replication) {
        let started = Instant::now();
        let fence = loop {
            self.counts.operations += 1;
            let left = STEP_LIMIT.saturating_sub(started.elapsed());
            match tokio::time::timeout(left, self.control_acquire()).await {
                Ok(Ok(Some(fence))) => break Some(fence),
                _ if started.elapsed() > STEP_LIMIT => break None,
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        };
        let Some(fence) = fence else {
            self.counts
                .violation("the control's name could not be taken after the failover");
            return;
        };
        let repeated = self.control_granted.contains(&fence);
        eprintln!(
            "{}: counter fences granted {:?} before the failover and {fence} after",
            self.counts.backend, self.control_granted
        );
        match replication {
            Replication::Synchronous => self.counts.expect(!repeated, || {
                format!(
                    "counter fences repeated a fence although nothing was lost: {:?}, then \
                     {fence}",
                    self.control_granted
                )
            }),
            _ => self.counts.expect(repeated, || {
                format!(
                    "the counter-fence control was not handed a fence granted before the \
                     failover ({:?}, then {fence}): the fence check could not fail",
                    self.control_granted
                )
            }),
        }
    }

    /// The protected table on the new primary: no stale write, and every acknowledged write
    /// there unless the failover lost it.
    async fn no_stale_writes(&mut self, replication: Replication) {
        let read = self.factory.writes(&self.store, &self.protected);
        let writes = match tokio::time::timeout(STEP_LIMIT, read)
            .await
            .map_err(|_| format!("no answer within {STEP_LIMIT:?}"))
            .and_then(|answer| answer.map_err(|error| error.to_string()))
        {
            Ok(writes) => writes,
            Err(error) => {
                self.counts
                    .violation(format!("the writes could not be read: {error}"));
                return;
            }
        };
        // Acquisitions unrecorded: the writes come one at a time from this task, each awaited,
        // so no write is in flight when the next holder takes the lease.
        let verdict = fenced::check(&writes, &[]);
        for stale in &verdict.stale {
            self.counts.violation(stale.to_string());
        }
        // Asynchronous: the write made while the standby was cut off is gone.
        let expected = match replication {
            Replication::Synchronous => self.written,
            _ => self.written.saturating_sub(1),
        };
        self.counts.expect(writes.len() as u64 == expected, || {
            format!(
                "the new primary holds {} writes, {expected} expected",
                writes.len()
            )
        });
    }

    /// The row of the leg's name, read on the new primary once it answers.
    async fn inspect(&mut self) -> Option<lease_core::LeaseInfo> {
        let name = self.name.clone();
        let started = Instant::now();
        loop {
            self.counts.operations += 1;
            let left = STEP_LIMIT.saturating_sub(started.elapsed());
            match tokio::time::timeout(left, self.store.inspect(&name)).await {
                Ok(Ok(row)) => return row,
                Ok(Err(error)) if started.elapsed() > STEP_LIMIT => {
                    self.counts.violation(format!(
                        "{name} could not be read after the failover: {error}"
                    ));
                    return None;
                }
                Err(_) => {
                    self.counts.violation(format!(
                        "{name} could not be read after the failover: no answer within \
                         {STEP_LIMIT:?}"
                    ));
                    return None;
                }
                Ok(Err(_)) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    /// The database's fenced check for `guard`, alone ([`FencedWrites::check_alone`]), tried
    /// until the new primary answers.
    async fn check_settled(&mut self, guard: &LeaseGuard) -> Result<bool, lease_core::BoxError> {
        let check = async |leg: &Self| leg.factory.check_alone(&leg.store, guard.as_ref()).await;
        self.settled(check, |_| false).await
    }

    /// A fenced write under `guard`, tried again while the pool still meets the crashed
    /// server: its answer once the new primary gave one.
    async fn write_settled(&mut self, guard: &LeaseGuard) -> Result<(), lease_core::BoxError> {
        let write = async |leg: &Self| {
            let written = leg.factory.write(
                &leg.store,
                guard.as_ref(),
                Some(CheckAt::Commit),
                &leg.protected,
                "w",
            );
            written.await.map(drop)
        };
        self.settled(write, fenced::is_refusal).await
    }

    /// `call`, tried again every 200 ms while it fails (the pool still meets the crashed
    /// server), for [`STEP_LIMIT`] at most: its answer, or at once an error `settles` accepts
    /// as one (a refusal is the database's answer, not a failure to reach it).
    async fn settled<T>(
        &mut self,
        call: impl AsyncFn(&Self) -> Result<T, lease_core::BoxError>,
        settles: fn(&lease_core::BoxError) -> bool,
    ) -> Result<T, lease_core::BoxError> {
        let started = Instant::now();
        loop {
            self.counts.operations += 1;
            let left = STEP_LIMIT.saturating_sub(started.elapsed());
            match tokio::time::timeout(left, call(self)).await {
                Ok(Ok(answer)) => return Ok(answer),
                Ok(Err(error)) if settles(&error) || started.elapsed() > STEP_LIMIT => {
                    return Err(error);
                }
                Err(_) => return Err(format!("no answer within {STEP_LIMIT:?}").into()),
                Ok(Err(_)) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
}

/// What a burst of acquisitions was acknowledged, and how many of its calls failed.
struct Burst {
    acknowledged: Vec<LeaseGuard>,
    failed: u64,
    refused: u64,
}

/// Acquires fresh names `<prefix>-<n>` one after another until `stop`, keeping every guard:
/// each acknowledged acquisition, up to the crash.
async fn burst(client: LeaseClient, prefix: String, stop: Arc<AtomicBool>) -> Burst {
    let mut burst = Burst {
        acknowledged: Vec::new(),
        failed: 0,
        refused: 0,
    };
    for n in 0..BURST_LIMIT {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        match client.try_acquire(format!("{prefix}-{n}").as_str()).await {
            Ok(Some(guard)) => burst.acknowledged.push(guard),
            Ok(None) => burst.refused += 1,
            Err(_) => burst.failed += 1,
        }
    }
    burst
}

/// Waits until the standby has replayed everything the primary has written so far.
async fn wait_replayed(pair: &PostgresReplication) {
    let mut primary = PgConnection::connect(&pair.primary().url()).await.unwrap();
    let lsn: String = sqlx::query_scalar("SELECT pg_current_wal_lsn()::text")
        .fetch_one(&mut primary)
        .await
        .unwrap();
    let mut standby = PgConnection::connect(&pair.standby().url()).await.unwrap();
    let started = Instant::now();
    loop {
        let replayed: bool =
            sqlx::query_scalar("SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn")
                .bind(&lsn)
                .fetch_one(&mut standby)
                .await
                .unwrap();
        if replayed {
            return;
        }
        assert!(
            started.elapsed() < STEP_LIMIT,
            "the standby did not replay {lsn} within {STEP_LIMIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn run(replication: Replication) {
    let Some(mut pair) = db::replication_or_skip(replication) else {
        return;
    };
    let scenario = match replication {
        Replication::Synchronous => "crash-failover-sync",
        _ => "crash-failover-async",
    };
    let (url, table) = (pair.url(), env::unique_table("failover"));
    let (sqlx_counts, diesel_counts) = runtime().block_on(async {
        let mut a = Leg::new(Sqlx::<Postgres>::new(), scenario, &url, &table).await;
        let mut b = Leg::new(Diesel::<AsyncPgConnection>::new(), scenario, &url, &table).await;
        tokio::join!(a.first(), b.first());
        if replication == Replication::Asynchronous {
            wait_replayed(&pair).await;
            pair.stream().cut();
        }
        tokio::join!(a.second(), b.second());
        if replication == Replication::Synchronous {
            pair.stream().cut();
            tokio::join!(a.blocked(), b.blocked());
            pair.stream().pass();
            wait_replayed(&pair).await;
        }
        // A burst of acquisitions per driver, the crash right after the last acknowledged one.
        let stop = Arc::new(AtomicBool::new(false));
        let bursts = [
            tokio::spawn(burst(
                a.client.clone(),
                format!("{}-burst", a.name),
                Arc::clone(&stop),
            )),
            tokio::spawn(burst(
                b.client.clone(),
                format!("{}-burst", b.name),
                Arc::clone(&stop),
            )),
        ];
        tokio::time::sleep(BURST_TIME).await;
        stop.store(true, Ordering::SeqCst);
        let crashed = Instant::now();
        tokio::task::block_in_place(|| pair.crash_failover()).expect("the failover");
        eprintln!(
            "{scenario}: the primary crashed and the standby was promoted in {:?}",
            crashed.elapsed()
        );
        let [burst_a, burst_b] = bursts;
        let (burst_a, burst_b) = (burst_a.await.unwrap(), burst_b.await.unwrap());
        tokio::join!(
            a.burst_kept(burst_a, replication),
            b.burst_kept(burst_b, replication)
        );
        tokio::join!(a.after(replication), b.after(replication));
        // The cut, then the crash.
        let faults = pair.stream().stats().faults;
        a.counts.faults += faults;
        b.counts.faults += faults;
        (a.counts, b.counts)
    });
    report::conclude_all(&[&sqlx_counts, &diesel_counts]);
}

#[test]
fn postgres_crash_failover_async() {
    run(Replication::Asynchronous);
}

#[test]
fn postgres_crash_failover_sync() {
    run(Replication::Synchronous);
}
