//! Partition longer than the TTL: holder A reaches the database through a fault proxy, B
//! directly. A is cut off (connections reset) or stalled (a black hole). A's lost signal must
//! fire, as `DeadlinePassed`, before B's takeover succeeds, and B's fence must be greater.
//!
//! Then the line between "work runs once" and "work can run twice", shown: `run_exclusive`
//! cancels the work before B takes over, and `OnLoss::Finish` lets it run on while B holds the
//! lease.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lease_core::{Error, LeaseName, LossReason, OnLoss, RunOptions, RunOutcome};
use lease_reliability::db::{Db, Target};
use lease_reliability::factory::StoreFactory;
use lease_reliability::report::Counts;
use lease_reliability::scenario::{Timing, runtime, take_over};
use lease_reliability::{Driver, with_driver};
use lease_tests::env;
use lease_tests::proxy::FaultProxy;

const NAME: &str = "sweep";

#[derive(Debug, Clone, Copy)]
enum Fault {
    Cut,
    Stall,
}

impl Fault {
    fn inject(self, proxy: &FaultProxy) {
        match self {
            Self::Cut => proxy.cut(),
            Self::Stall => proxy.stall(),
        }
    }
}

fn timing() -> Timing {
    Timing::for_ttl(Duration::from_secs(4))
}

/// Runs `scenario` against a private server of `db` with a proxy in front of it.
fn on_private_server<Fut>(db: Db, scenario: impl FnOnce(String, Arc<FaultProxy>) -> Fut)
where
    Fut: Future<Output = Counts>,
{
    let Some(target) = Target::private(db) else {
        return;
    };
    let proxy = Arc::new(FaultProxy::start(target.server.as_ref().unwrap().port()).unwrap());
    let counts = runtime().block_on(scenario(target.url.clone(), proxy));
    counts.conclude();
}

async fn partition<F: StoreFactory>(
    factory: F,
    url: String,
    proxy: Arc<FaultProxy>,
    fault: Fault,
) -> Counts {
    let timing = timing();
    let mut counts = Counts::new(
        format!("partition-{}", format!("{fault:?}").to_lowercase()),
        factory.label(),
    );
    let table = env::unique_table("partition");
    let direct = factory.connect(&url, &table, 4).await.unwrap();
    factory.setup(&direct).await.unwrap();
    let through = factory
        .connect(&proxy.rewrite_url(&url), &table, 4)
        .await
        .unwrap();
    let a = timing.client(through);
    let b = timing.client(direct.clone());

    let guard_a = a.try_acquire(NAME).await.unwrap().expect("nobody holds it");
    counts.operations += 1;
    // A renews through the proxy; B is turned away meanwhile.
    tokio::time::sleep(timing.renew_every * 2 + Duration::from_millis(200)).await;
    let before = b
        .store()
        .inspect(&LeaseName::new(NAME).unwrap())
        .await
        .unwrap()
        .unwrap();
    counts.expect(guard_a.is_held(), || {
        "A lost its lease before any fault".into()
    });
    counts.expect(before.expires_at > before.taken_at + timing.ttl, || {
        format!("A's renewals did not reach the store: {before:?}")
    });
    counts.expect(b.try_acquire(NAME).await.unwrap().is_none(), || {
        "B took a lease A was renewing".into()
    });
    counts.operations += 2;

    let handle = guard_a.handle();
    let watcher = tokio::spawn(async move {
        let reason = handle.lost().await;
        (Instant::now(), reason)
    });
    let faulted = Instant::now();
    fault.inject(&proxy);

    let takeover = match take_over(&b, NAME, Duration::from_millis(25), timing.ttl * 5).await {
        Ok(takeover) => takeover,
        Err(why) => {
            let info = b.store().inspect(&LeaseName::new(NAME).unwrap()).await;
            panic!(
                "{why}; the store shows {info:?}; A held: {}; A's holder {}; proxy {:?}",
                guard_a.is_held(),
                guard_a.holder(),
                proxy.stats()
            );
        }
    };
    // Read at once: whether A still believed it held the lease when B had it.
    let a_held_at_takeover = guard_a.is_held();
    // A believes it holds the lease until its local deadline, whenever its tasks wake to see
    // it: that instant, not when A's watcher woke, must come before B's winning attempt went
    // out (before the database granted it, which is later still).
    let a_deadline = guard_a.deadline();
    counts.operations += takeover.attempts;
    // Bounded: a loss that never fires (a deadline that failed renewals moved on) is the
    // violation to name, not a hang.
    let (lost_at, reason) = match tokio::time::timeout(timing.ttl * 2, watcher).await {
        Ok(lost) => lost.unwrap(),
        Err(_) => {
            counts.violation(format!(
                "A's lost signal had not fired {:?} after B's takeover (A held: {a_held_at_takeover})",
                timing.ttl * 2
            ));
            return counts;
        }
    };
    counts.expect(!a_held_at_takeover, || {
        "A still believed it held the lease when B took it over".into()
    });
    counts.expect(a_deadline < takeover.sent, || {
        format!(
            "A's local deadline came {:?} after B's winning attempt was sent",
            a_deadline - takeover.sent
        )
    });
    counts.expect(lost_at < takeover.acquired, || {
        format!(
            "A's lost signal fired {:?} after B's takeover",
            lost_at - takeover.acquired
        )
    });
    counts.expect(reason == LossReason::DeadlinePassed, || {
        format!("A lost its lease by {reason:?}, not by its deadline")
    });
    counts.expect(takeover.guard.fence() > guard_a.fence(), || {
        format!(
            "B's fence {} is not above A's {}",
            takeover.guard.fence(),
            guard_a.fence()
        )
    });
    eprintln!(
        "{}: lost {:?} after the fault, B took over {:?} after the fault ({:?} later), {} attempts",
        counts.backend,
        lost_at - faulted,
        takeover.acquired - faulted,
        takeover.acquired.saturating_duration_since(lost_at),
        takeover.attempts
    );

    // Healed: A's late release touches nothing, and A reaches the store again.
    proxy.pass();
    let release = guard_a.release().await;
    counts.expect(matches!(release, Err(Error::Lost { .. })), || {
        format!("A's release after the loss answered {release:?}")
    });
    let info = b
        .store()
        .inspect(&LeaseName::new(NAME).unwrap())
        .await
        .unwrap();
    counts.expect(
        info.as_ref().map(|i| &i.holder) == Some(takeover.guard.holder()),
        || format!("B's lease changed after A's release: {info:?}"),
    );
    let mut reconnected = false;
    for _ in 0..40 {
        counts.operations += 1;
        match a.try_acquire(NAME).await {
            Ok(None) => {
                reconnected = true;
                break;
            }
            Ok(Some(guard)) => {
                counts.violation(format!("A took a lease B holds: fence {}", guard.fence()));
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
    counts.expect(reconnected, || {
        "A never reached the store again after the heal".into()
    });
    takeover.guard.release().await.unwrap();
    counts.faults = proxy.stats().faults;
    factory
        .execute(&direct, &format!("DROP TABLE {table}"))
        .await
        .unwrap();
    counts
}

/// What the work of A saw, and how its run ended, against when B took over.
async fn cancel_or_finish<F: StoreFactory>(
    factory: F,
    url: String,
    proxy: Arc<FaultProxy>,
) -> Counts {
    let timing = timing();
    let mut counts = Counts::new("partition-run-exclusive", factory.label());
    let table = env::unique_table("partition_run");
    let direct = factory.connect(&url, &table, 4).await.unwrap();
    factory.setup(&direct).await.unwrap();
    let through = factory
        .connect(&proxy.rewrite_url(&url), &table, 4)
        .await
        .unwrap();
    let a = timing.client(through);
    let b = timing.client(direct.clone());

    for on_loss in [OnLoss::Cancel, OnLoss::Finish] {
        proxy.pass();
        let name = format!("mail-checks-{on_loss:?}");
        // The work takes steps without checking the lease: run_exclusive is what stops it.
        let steps: Arc<Mutex<Vec<Instant>>> = Arc::default();
        let work_steps = Arc::clone(&steps);
        let work_for = timing.ttl * 4;
        let run = {
            let (a, name) = (a.clone(), name.clone());
            tokio::spawn(async move {
                a.run_exclusive_with(
                    &name,
                    RunOptions::default().on_loss(on_loss),
                    |_| async move {
                        let started = Instant::now();
                        while started.elapsed() < work_for {
                            work_steps.lock().unwrap().push(Instant::now());
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    },
                )
                .await
            })
        };
        tokio::time::sleep(timing.renew_every * 2).await;
        proxy.cut();
        let takeover = take_over(&b, &name, Duration::from_millis(25), timing.ttl * 5)
            .await
            .unwrap();
        counts.operations += takeover.attempts + 1;
        let outcome = run.await.unwrap().unwrap().expect("A took the lease");
        // From when B's winning attempt went out, not when its answer came back: the database
        // granted the lease somewhere in between.
        let after_takeover = steps
            .lock()
            .unwrap()
            .iter()
            .filter(|step| **step > takeover.sent)
            .count();
        counts.operations += steps.lock().unwrap().len() as u64;
        match on_loss {
            OnLoss::Cancel => {
                counts.expect(
                    outcome
                        == RunOutcome::Cancelled {
                            reason: LossReason::DeadlinePassed,
                        },
                    || format!("OnLoss::Cancel ended as {outcome:?}"),
                );
                counts.expect(after_takeover == 0, || {
                    format!("cancelled work took {after_takeover} steps after B took over")
                });
            }
            _ => {
                // The documented way to run twice: not a violation, the demonstration.
                counts.expect(
                    matches!(
                        outcome,
                        RunOutcome::FinishedAfterLoss {
                            reason: LossReason::DeadlinePassed,
                            ..
                        }
                    ),
                    || format!("OnLoss::Finish ended as {outcome:?}"),
                );
                counts.expect(after_takeover > 0, || {
                    "OnLoss::Finish work did not overlap B's: the demonstration shows nothing"
                        .into()
                });
                eprintln!(
                    "{}: with OnLoss::Finish, A's work took {after_takeover} steps while B held the lease",
                    counts.backend
                );
            }
        }
        takeover.guard.release().await.unwrap();
    }
    counts.faults = proxy.stats().faults;
    factory
        .execute(&direct, &format!("DROP TABLE {table}"))
        .await
        .unwrap();
    counts
}

#[test]
fn postgres_partition_by_cut() {
    on_private_server(Db::Postgres, |url, proxy| async move {
        with_driver!(Driver::Sqlx, Db::Postgres, |f| partition(
            f,
            url,
            proxy,
            Fault::Cut
        )
        .await)
    });
}

#[test]
fn postgres_partition_by_stall() {
    on_private_server(Db::Postgres, |url, proxy| async move {
        with_driver!(Driver::Sqlx, Db::Postgres, |f| partition(
            f,
            url,
            proxy,
            Fault::Stall
        )
        .await)
    });
}

#[test]
fn mariadb_partition_by_cut() {
    on_private_server(Db::MariaDb, |url, proxy| async move {
        with_driver!(Driver::Sqlx, Db::MariaDb, |f| partition(
            f,
            url,
            proxy,
            Fault::Cut
        )
        .await)
    });
}

#[test]
fn mariadb_partition_by_stall() {
    on_private_server(Db::MariaDb, |url, proxy| async move {
        with_driver!(Driver::Sqlx, Db::MariaDb, |f| partition(
            f,
            url,
            proxy,
            Fault::Stall
        )
        .await)
    });
}

#[test]
fn postgres_run_exclusive_cancels_or_finishes() {
    on_private_server(Db::Postgres, |url, proxy| async move {
        with_driver!(Driver::Sqlx, Db::Postgres, |f| cancel_or_finish(
            f, url, proxy
        )
        .await)
    });
}

#[test]
fn mariadb_run_exclusive_cancels_or_finishes() {
    on_private_server(Db::MariaDb, |url, proxy| async move {
        with_driver!(Driver::Sqlx, Db::MariaDb, |f| cancel_or_finish(
            f, url, proxy
        )
        .await)
    });
}

#[test]
fn postgres_partition_by_cut_diesel() {
    on_private_server(Db::Postgres, |url, proxy| async move {
        with_driver!(Driver::Diesel, Db::Postgres, |f| partition(
            f,
            url,
            proxy,
            Fault::Cut
        )
        .await)
    });
}

#[test]
fn mariadb_partition_by_stall_diesel() {
    on_private_server(Db::MariaDb, |url, proxy| async move {
        with_driver!(Driver::Diesel, Db::MariaDb, |f| partition(
            f,
            url,
            proxy,
            Fault::Stall
        )
        .await)
    });
}
