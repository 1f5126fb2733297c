//! Least privilege, on private PostgreSQL and MariaDB servers: an account allowed only
//! `SELECT, INSERT, UPDATE, DELETE` on the lease table (and another without even `DELETE`, as
//! the stores' READMEs promise) runs every operation of holding leases (`try_acquire`, `renew`,
//! `renew_many`, `release`, `inspect`, `list`) and a whole `run_exclusive`. `prune` deletes
//! rows: the first account prunes, the second is refused with "permission denied", as the
//! READMEs say (give `DELETE` to the operator's account). Schema setup fails for both, with a
//! clear "permission denied" error, for a new table and for the existing one alike (`CREATE
//! TABLE IF NOT EXISTS` checks the right to create before it looks for the table).

use std::time::Duration;

use lease_core::{Error, HolderId, LeaseName, LeaseStore, Operation, RunOutcome, Ttl};
use lease_reliability::admin::{Admin, Grant};
use lease_reliability::db::{Db, Target};
use lease_reliability::factory::StoreFactory;
use lease_reliability::report::Counts;
use lease_reliability::scenario::{Timing, runtime};
use lease_reliability::{Driver, with_driver};
use lease_tests::env;

/// Whether `result` is a failure of `operation` that says permission was denied.
fn denied<T>(result: &Result<T, Error>, operation: Operation) -> bool {
    match result {
        Err(Error::Store {
            operation: failed,
            source,
            ..
        }) if *failed == operation => {
            let mut message = source.to_string();
            let mut cause = source.source();
            while let Some(inner) = cause {
                message.push_str(&inner.to_string());
                cause = inner.source();
            }
            message.to_lowercase().contains("denied")
        }
        _ => false,
    }
}

async fn least<F: StoreFactory>(factory: F, target: &Target, delete: bool) -> Counts {
    // The set, and the narrower one the stores' READMEs promise is enough.
    let (scenario, account) = if delete {
        ("least-privilege", "lease_rows_only")
    } else {
        ("least-privilege-no-delete", "lease_no_delete")
    };
    let mut counts = Counts::new(scenario, factory.label());
    let admin = Admin::connect(target).await.unwrap();
    let table = env::unique_table("privilege");
    let owner = factory.connect(&target.url, &table, 1).await.unwrap();
    factory.setup(&owner).await.unwrap();
    let grant = if delete {
        Grant::Rows(&table)
    } else {
        Grant::RowsWithoutDelete(&table)
    };
    let app_url = admin.create_user(account, grant).await.unwrap();
    let app = factory.connect(&app_url, &table, 2).await.unwrap();

    // Every operation of the store.
    let ttl = Ttl::from_secs(30).unwrap();
    let (sweep, alerts) = (
        LeaseName::new("sweep").unwrap(),
        LeaseName::new("alerts").unwrap(),
    );
    let (one, two) = (HolderId::generate(), HolderId::generate());
    let first = app.try_acquire(&sweep, &one, ttl).await.unwrap();
    counts.expect(first.is_some(), || "try_acquire took nothing".into());
    counts.expect(
        app.try_acquire(&sweep, &two, ttl).await.unwrap().is_none(),
        || "a second holder took a held lease".into(),
    );
    counts.expect(app.renew(&sweep, &one, ttl).await.unwrap(), || {
        "renew failed".into()
    });
    app.try_acquire(&alerts, &two, ttl).await.unwrap().unwrap();
    let renewed = app
        .renew_many(
            &[(sweep.clone(), one.clone()), (alerts.clone(), one.clone())],
            ttl,
        )
        .await
        .unwrap();
    counts.expect(renewed == [true, false], || {
        format!("renew_many answered {renewed:?}")
    });
    let info = app.inspect(&sweep).await.unwrap();
    counts.expect(info.is_some_and(|i| i.holder == one), || {
        "inspect lost the holder".into()
    });
    let list = app.list().await.unwrap();
    counts.expect(list.len() == 2, || format!("list shows {list:?}"));
    counts.expect(
        app.release(&sweep, &one, Duration::ZERO).await.unwrap(),
        || "release failed".into(),
    );
    let again = app.try_acquire(&sweep, &one, ttl).await.unwrap();
    counts.expect(again > first, || {
        format!("fence went from {first:?} to {again:?}")
    });
    counts.expect(
        app.release(&alerts, &two, Duration::from_secs(10))
            .await
            .unwrap(),
        || "release with a minimum hold failed".into(),
    );
    counts.expect(
        app.try_acquire(&alerts, &one, ttl).await.unwrap().is_none(),
        || "a lease kept for its minimum hold was taken".into(),
    );
    counts.operations += 12;

    // A whole run through a client.
    let client = Timing::for_ttl(Duration::from_secs(4)).client(app.clone());
    let run = client
        .run_exclusive("mail-checks", |lease| async move { lease.fence() })
        .await
        .unwrap();
    counts.expect(matches!(run, Some(RunOutcome::Finished(_))), || {
        format!("run_exclusive ended as {run:?}")
    });
    counts.operations += 1;

    // Pruning: free rows go, the held and the kept stay (only `mail-checks` is free: `sweep` is
    // held again, `alerts` kept for its minimum hold). It needs `DELETE`.
    let pruned = app.prune(Duration::ZERO).await;
    if delete {
        counts.expect(matches!(pruned, Ok(1)), || {
            format!("prune as {account} answered {pruned:?}, one row expected")
        });
        let left = app.list().await.map(|rows| rows.len());
        counts.expect(matches!(left, Ok(2)), || {
            format!("after the prune the table holds {left:?} rows, two expected")
        });
        counts.operations += 1;
    } else {
        counts.expect(denied(&pruned, Operation::Prune), || {
            format!("prune as {account}, without DELETE, answered {pruned:?}")
        });
        counts.faults += 1;
    }
    counts.operations += 1;

    // Schema setup: a table it may not create, and the one that exists.
    let other = factory.on_table(&app, &format!("{table}_new")).unwrap();
    let refused = factory.setup(&other).await;
    counts.expect(denied(&refused, Operation::Setup), || {
        format!("setup of a new table as {account} answered {refused:?}")
    });
    let existing = factory.setup(&app).await;
    eprintln!(
        "{}: setup as {account}: new table {refused:?}; existing table {existing:?}",
        counts.backend
    );
    // Even on the table that exists: `CREATE TABLE IF NOT EXISTS` needs the right to create.
    counts.expect(denied(&existing, Operation::Setup), || {
        format!("setup of the existing table as {account} answered {existing:?}")
    });
    counts.operations += 2;
    counts.faults += 2;
    factory
        .execute(&owner, &format!("DROP TABLE {table}"))
        .await
        .unwrap();
    counts
}

fn run(db: Db, driver: Driver) {
    let Some(target) = Target::private(db) else {
        return;
    };
    let rt = runtime();
    for delete in [true, false] {
        let counts =
            rt.block_on(async { with_driver!(driver, db, |f| least(f, &target, delete).await) });
        counts.conclude();
    }
}

#[test]
fn postgres_least_privilege() {
    run(Db::Postgres, Driver::Sqlx);
}

#[test]
fn postgres_least_privilege_diesel() {
    run(Db::Postgres, Driver::Diesel);
}

#[test]
fn mariadb_least_privilege() {
    run(Db::MariaDb, Driver::Sqlx);
}

#[test]
fn mariadb_least_privilege_diesel() {
    run(Db::MariaDb, Driver::Diesel);
}
