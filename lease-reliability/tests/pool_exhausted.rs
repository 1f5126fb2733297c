//! Pool exhausted by the application's own work for longer than the TTL: the holder cannot
//! renew, and must stop believing before the database gives the lease to another instance.
//! Sampled all along: at no moment does the guard say "held" while the other instance holds
//! the lease. Runs on PostgreSQL, MariaDB and SQLite (shared servers: nothing is done to them).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lease_core::{Error, LossReason};
use lease_reliability::db::{Db, remove_sqlite};
use lease_reliability::factory::StoreFactory;
use lease_reliability::report::Counts;
use lease_reliability::scenario::{Timing, runtime, take_over};
use lease_reliability::{Driver, with_driver};
use lease_tests::env;

const NAME: &str = "alerts";
const POOL: u32 = 2;

async fn exhausted<F: StoreFactory>(factory: F, url: String) -> Counts {
    let timing = Timing::for_ttl(Duration::from_secs(2));
    let mut counts = Counts::new("pool-exhausted", factory.label());
    let table = env::unique_table("exhausted");
    let a_store = factory.connect(&url, &table, POOL).await.unwrap();
    factory.setup(&a_store).await.unwrap();
    let a = timing.client(a_store.clone());
    let b = timing.client(factory.connect(&url, &table, POOL).await.unwrap());

    let guard = a.try_acquire(NAME).await.unwrap().expect("free");
    tokio::time::sleep(timing.renew_every + Duration::from_millis(100)).await;
    counts.expect(guard.is_held(), || {
        "lost before the pool was exhausted".into()
    });

    // The application's own work takes every connection for three TTLs.
    let hog = factory.hold_connections(&a_store, POOL).await.unwrap();
    let hogged = Instant::now();
    counts.faults += 1;

    // A sampler: never "held" while B has it.
    let b_holds = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let (samples, overlaps) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let sampler = {
        let (handle, b_holds, stop) = (guard.handle(), Arc::clone(&b_holds), Arc::clone(&stop));
        let (samples, overlaps) = (Arc::clone(&samples), Arc::clone(&overlaps));
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                // Read B's state first: if B already held it, A must not believe now.
                let b_had_it = b_holds.load(Ordering::SeqCst);
                if b_had_it && handle.is_held() {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                samples.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    let takeover = take_over(&b, NAME, Duration::from_millis(25), timing.ttl * 5)
        .await
        .unwrap();
    b_holds.store(true, Ordering::SeqCst);
    let held_at_takeover = guard.is_held();
    counts.operations += takeover.attempts;
    counts.expect(!held_at_takeover, || {
        "A believed it held the lease when B took it over".into()
    });
    // A believes until its local deadline, whenever its sampler wakes: that instant must come
    // before B's winning attempt went out (the sampler only starts counting after its answer).
    counts.expect(guard.deadline() < takeover.sent, || {
        format!(
            "A's local deadline came {:?} after B's winning attempt was sent",
            guard.deadline() - takeover.sent
        )
    });
    counts.expect(takeover.guard.fence() > guard.fence(), || {
        "B's fence is not above A's".into()
    });
    let reason = tokio::time::timeout(Duration::from_millis(100), guard.lost()).await;
    counts.expect(reason == Ok(LossReason::DeadlinePassed), || {
        format!("A's loss: {reason:?}")
    });

    // Keep the pool exhausted for three TTLs in all, sampling on.
    tokio::time::sleep((timing.ttl * 3).saturating_sub(hogged.elapsed())).await;
    drop(hog);
    tokio::time::sleep(timing.renew_every * 2).await;
    stop.store(true, Ordering::SeqCst);
    sampler.await.unwrap();
    counts.operations += samples.load(Ordering::SeqCst);
    let overlaps = overlaps.load(Ordering::SeqCst);
    counts.expect(overlaps == 0, || {
        format!("{overlaps} samples found A believing while B held the lease")
    });
    counts.expect(!guard.is_held(), || {
        "the lost lease came back after the pool freed".into()
    });

    // The pool works again; A's late release touches nothing.
    let late = guard.release().await;
    counts.expect(matches!(late, Err(Error::Lost { .. })), || {
        format!("A's release after the loss answered {late:?}")
    });
    counts.expect(a.try_acquire(NAME).await.unwrap().is_none(), || {
        "A took the lease B holds".into()
    });
    counts.operations += 2;
    takeover.guard.release().await.unwrap();
    factory
        .execute(&a_store, &format!("DROP TABLE {table}"))
        .await
        .unwrap();
    counts
}

fn run(db: Db, driver: Driver) {
    let url = db.shared_url();
    let reachable = runtime().block_on(async {
        with_driver!(driver, db, |f| f.connect(&url, "unused", 1).await.map(drop))
    });
    if let Err(error) = reachable {
        return env::skip_or_fail(db.as_str(), &error.to_string());
    }
    let counts =
        runtime().block_on(async { with_driver!(driver, db, |f| exhausted(f, url.clone()).await) });
    remove_sqlite(&url);
    counts.conclude();
}

#[test]
fn postgres_pool_exhausted() {
    run(Db::Postgres, Driver::Sqlx);
}

#[test]
fn postgres_pool_exhausted_diesel() {
    run(Db::Postgres, Driver::Diesel);
}

#[test]
fn mariadb_pool_exhausted() {
    run(Db::MariaDb, Driver::Sqlx);
}

#[test]
fn mariadb_pool_exhausted_diesel() {
    run(Db::MariaDb, Driver::Diesel);
}

#[test]
fn sqlite_pool_exhausted() {
    run(Db::Sqlite, Driver::Sqlx);
}

#[test]
fn sqlite_pool_exhausted_diesel() {
    run(Db::Sqlite, Driver::Diesel);
}
