//! Server restart during a hold, on a private server: a restart shorter than the holder's
//! deadline lets renewal resume with the same fence; one longer than the TTL is reported as a
//! loss (by the deadline, while the server is down) and the next acquisition, after the
//! restart, gets a larger fence; fences go on increasing.

use std::time::{Duration, Instant};

use lease_core::{Error, LeaseName, LeaseStore, LossReason};
use lease_reliability::db::{Db, PrivateServer, Target};
use lease_reliability::factory::StoreFactory;
use lease_reliability::report::Counts;
use lease_reliability::scenario::{Timing, runtime};
use lease_reliability::{Driver, with_driver};
use lease_tests::env;

fn timing() -> Timing {
    Timing::for_ttl(Duration::from_secs(12))
}

fn stop(server: &mut PrivateServer) {
    tokio::task::block_in_place(|| server.stop()).expect("the server stops");
}

fn start(server: &mut PrivateServer) {
    tokio::task::block_in_place(|| server.restart()).expect("the server starts again");
}

async fn restart<F: StoreFactory>(factory: F, url: String, server: &mut PrivateServer) -> Counts {
    let timing = timing();
    let mut counts = Counts::new("server-restart", factory.label());
    let table = env::unique_table("restart");
    let admin = factory.connect(&url, &table, 2).await.unwrap();
    factory.setup(&admin).await.unwrap();
    let a = timing.client(factory.connect(&url, &table, 2).await.unwrap());
    let b = timing.client(factory.connect(&url, &table, 2).await.unwrap());

    // Shorter than the deadline: renewal resumes, the fence stays.
    let short = LeaseName::new("alerts").unwrap();
    let guard = a.try_acquire(&short).await.unwrap().expect("free");
    tokio::time::sleep(timing.renew_every + Duration::from_millis(300)).await;
    let down = Instant::now();
    stop(server);
    start(server);
    let outage = down.elapsed();
    counts.faults += 1;
    eprintln!("{}: short restart took {outage:?}", counts.backend);
    counts.expect(outage < timing.validity() - timing.renew_every, || {
        format!("the short restart took {outage:?}: too long to show that renewal resumes")
    });
    // The expiry as the restarted server has it: only a renewal sent after the restart can move
    // it later. (Read before the stop, it would let a first renewal that landed late, after the
    // read and before the stop, pass for one that resumed.)
    let mut before = None;
    let waited = Instant::now();
    while before.is_none() && waited.elapsed() < timing.renew_every {
        counts.operations += 1;
        match admin.inspect(&short).await {
            Ok(row) => before = Some(row),
            // The admin's pool may still hand out a connection from before the restart once.
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let before = before.flatten();
    counts.expect(before.is_some(), || {
        format!("the lease {short} could not be read after the short restart")
    });
    let mut resumed = None;
    let waited = Instant::now();
    while let Some(before) = &before
        && waited.elapsed() < timing.renew_every * 3
    {
        counts.operations += 1;
        if let Ok(Some(now)) = admin.inspect(&short).await
            && now.expires_at > before.expires_at
        {
            resumed = Some(now);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    counts.expect(guard.is_held(), || {
        "the holder lost its lease over a restart shorter than its deadline".into()
    });
    match &resumed {
        Some(info) => {
            counts.expect(
                info.fence == guard.fence() && &info.holder == guard.holder(),
                || format!("renewal changed the lease: {info:?}"),
            );
        }
        None => counts.violation("no renewal reached the store after the short restart"),
    }
    let short_fence = guard.fence();
    guard.release().await.unwrap();

    // Longer than the TTL: the holder reports the loss while the server is down.
    let long = LeaseName::new("sweep").unwrap();
    let guard = a.try_acquire(&long).await.unwrap().expect("free");
    let first_fence = guard.fence();
    tokio::time::sleep(timing.renew_every).await;
    let down = Instant::now();
    stop(server);
    counts.faults += 1;
    let lost = tokio::time::timeout(timing.ttl + Duration::from_secs(2), guard.lost()).await;
    let lost_after = down.elapsed();
    counts.expect(lost == Ok(LossReason::DeadlinePassed), || {
        format!("while the server was down the holder saw {lost:?} after {lost_after:?}")
    });
    counts.expect(!guard.is_held(), || {
        "the guard still believes after its loss".into()
    });
    // Down for longer than the TTL before it comes back.
    let rest = (timing.ttl + Duration::from_secs(1)).saturating_sub(down.elapsed());
    tokio::time::sleep(rest).await;
    start(server);
    eprintln!(
        "{}: long outage {:?}, loss reported after {lost_after:?}",
        counts.backend,
        down.elapsed()
    );
    let late = guard.release().await;
    counts.expect(matches!(late, Err(Error::Lost { .. })), || {
        format!("the release of the lost lease answered {late:?}")
    });
    let mut fences = vec![short_fence.get(), first_fence.get()];
    for name in [&long, &long, &short] {
        let mut taken = None;
        for _ in 0..40 {
            counts.operations += 1;
            match b.try_acquire(name).await {
                Ok(Some(guard)) => {
                    taken = Some(guard);
                    break;
                }
                // The pool may still hand out a connection from before the restart once.
                Ok(None) | Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
        let Some(guard) = taken else {
            counts.violation(format!("{name} could not be taken after the restart"));
            break;
        };
        fences.push(guard.fence().get());
        guard.release().await.unwrap();
    }
    // Per name: sweep's fences, then alerts'.
    let sweep = [fences[1], fences[2], fences[3]];
    let alerts = [fences[0], fences[4]];
    counts.expect(
        sweep.windows(2).all(|w| w[0] < w[1]) && alerts.windows(2).all(|w| w[0] < w[1]),
        || format!("fences did not increase over the restart: {fences:?}"),
    );
    counts.operations += 6;
    factory
        .execute(&admin, &format!("DROP TABLE {table}"))
        .await
        .unwrap();
    counts
}

fn run(db: Db, driver: Driver) {
    let Some(mut target) = Target::private(db) else {
        return;
    };
    let url = target.url.clone();
    let server = target.server();
    let counts =
        runtime().block_on(async { with_driver!(driver, db, |f| restart(f, url, server).await) });
    counts.conclude();
}

#[test]
fn postgres_server_restart() {
    run(Db::Postgres, Driver::Sqlx);
}

#[test]
fn postgres_server_restart_diesel() {
    run(Db::Postgres, Driver::Diesel);
}

#[test]
fn mariadb_server_restart() {
    run(Db::MariaDb, Driver::Sqlx);
}

#[test]
fn mariadb_server_restart_diesel() {
    run(Db::MariaDb, Driver::Diesel);
}
