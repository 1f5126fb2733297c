//! Connections killed under the holder, on a private server (`pg_terminate_backend`, MariaDB
//! `KILL CONNECTION`), again and again for longer than a renewal period: the pool reconnects
//! and renewal goes on, or the loss is reported; whenever the guard says it holds the lease,
//! the database agrees; nothing panics.

use std::time::{Duration, Instant};

use lease_core::{LeaseName, LeaseStore};
use lease_reliability::admin::{Admin, Grant};
use lease_reliability::db::{Db, Target};
use lease_reliability::factory::StoreFactory;
use lease_reliability::report::Counts;
use lease_reliability::scenario::{Timing, runtime};
use lease_reliability::{Driver, with_driver};
use lease_tests::env;

const APP: &str = "lease_kill_app";

async fn killed<F: StoreFactory>(factory: F, target: &Target) -> Counts {
    let timing = Timing::for_ttl(Duration::from_secs(6));
    let mut counts = Counts::new("connections-killed", factory.label());
    let admin = Admin::connect(target).await.unwrap();
    let table = env::unique_table("killed");
    let observer = factory.connect(&target.url, &table, 2).await.unwrap();
    factory.setup(&observer).await.unwrap();
    let app_url = admin.create_user(APP, Grant::All).await.unwrap();
    let client = timing.client(factory.connect(&app_url, &table, 2).await.unwrap());
    let name = LeaseName::new("uptime:node-a").unwrap();
    let guard = client.try_acquire(&name).await.unwrap().expect("free");

    // Kill the holder's connections every 300 ms for twice the renewal period; after each
    // kill, whenever the guard believes, the database must show its lease unexpired.
    let storm = Instant::now();
    let mut storm_kills = 0;
    let mut compared = 0u64;
    while storm.elapsed() < timing.renew_every * 2 + Duration::from_millis(500) {
        storm_kills += admin.kill_connections_of(APP).await.unwrap();
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let believed = guard.is_held();
            let info = observer.inspect(&name).await.unwrap();
            counts.operations += 1;
            if believed {
                compared += 1;
                counts.expect(
                    info.as_ref()
                        .is_some_and(|i| &i.holder == guard.holder() && !i.is_expired()),
                    || format!("the guard believed while the database showed {info:?}"),
                );
            }
        }
        // The application's own calls meet killed connections too: errors, never panics.
        counts.operations += 1;
        let _ = client.try_acquire("alerts").await.map(drop);
    }
    counts.faults += storm_kills;
    // A guard lost at the first kill would leave nothing compared: the first samples come a
    // tenth of a second after it, seconds short of the lease's deadline.
    counts.expect(compared > 0, || {
        "the guard never believed it held the lease during the storm: nothing was compared with \
         the database"
            .into()
    });
    // Without a kill the storm tested nothing: the checks above hold trivially on a pool
    // nobody disturbed.
    counts.expect(storm_kills > 0, || {
        format!(
            "no connection was killed during the storm: kill_connections_of({APP:?}) matched \
             no session of the holder's account, so the scenario injected no fault"
        )
    });
    let storm_over = observer.inspect(&name).await.unwrap().unwrap();
    tokio::time::sleep(timing.renew_every * 2).await;
    let after = observer.inspect(&name).await.unwrap().unwrap();
    if guard.is_held() {
        counts.expect(after.expires_at > storm_over.expires_at, || {
            format!("renewal did not go on after the kills: {storm_over:?} then {after:?}")
        });
        eprintln!(
            "{}: renewal went on through {} kills",
            counts.backend, counts.faults
        );
    } else {
        // Allowed: the loss was reported, and it can be awaited at once.
        let reason = tokio::time::timeout(Duration::from_millis(100), guard.lost()).await;
        counts.expect(reason.is_ok(), || {
            "the guard is not held but reports no loss".into()
        });
        eprintln!(
            "{}: the lease was reported lost: {reason:?}",
            counts.backend
        );
    }
    counts.faults += admin.kill_connections_of(APP).await.unwrap();
    // Released through a pool whose connections were just killed: it reconnects.
    let mut released = false;
    for _ in 0..10 {
        counts.operations += 1;
        if guard_release(&client, &name).await {
            released = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(guard);
    counts.expect(released, || "the pool never reconnected".into());
    factory
        .execute(&observer, &format!("DROP TABLE {table}"))
        .await
        .unwrap();
    counts
}

/// Whether the store answers through the client's pool: an inspect succeeds.
async fn guard_release(client: &lease_core::LeaseClient, name: &LeaseName) -> bool {
    client.store().inspect(name).await.is_ok()
}

fn run(db: Db, driver: Driver) {
    let Some(target) = Target::private(db) else {
        return;
    };
    let counts =
        runtime().block_on(async { with_driver!(driver, db, |f| killed(f, &target).await) });
    counts.conclude();
}

#[test]
fn postgres_connections_killed() {
    run(Db::Postgres, Driver::Sqlx);
}

#[test]
fn postgres_connections_killed_diesel() {
    run(Db::Postgres, Driver::Diesel);
}

#[test]
fn mariadb_connections_killed() {
    run(Db::MariaDb, Driver::Sqlx);
}

#[test]
fn mariadb_connections_killed_diesel() {
    run(Db::MariaDb, Driver::Diesel);
}
