//! Bad input, fuzzed with proptest, against every backend (memory, SQLite, PostgreSQL,
//! MariaDB): names, TTLs and table names. Valid ones round-trip through the store exactly;
//! invalid ones get their typed error, and never reach a store: for names a counting store
//! shows no call was made, for TTLs and table names the invalid value cannot even be built.
//!
//! Validity is decided here by an oracle written from the design's rules, not by calling the
//! library's own validation, so a wrong rule in the library shows up as a failed case.

use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

use lease_core::runtime::TokioRuntime;
use lease_core::{
    Error, HolderId, LeaseClient, LeaseName, LeaseStore, MemoryStore, NameError, Ttl,
};
use lease_reliability::counting::CountingStore;
use lease_reliability::db::{Db, remove_sqlite};
use lease_reliability::factory::StoreFactory;
use lease_reliability::report::Counts;
use lease_reliability::scenario::runtime;
use lease_reliability::{Driver, with_driver};
use lease_tests::env;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

const MAX_TTL_MS: u64 = 365 * 24 * 60 * 60 * 1000;

/// The design's rule: non-empty, at most 255 bytes of UTF-8, no NUL.
fn name_is_valid(name: &str) -> bool {
    !name.is_empty() && name.len() <= 255 && !name.contains('\0')
}

/// The design's rule: at least 1 ms and at most the bound, in whole milliseconds.
fn ttl_is_valid(ttl: Duration) -> bool {
    (1..=u128::from(MAX_TTL_MS)).contains(&ttl.as_millis())
}

/// Plain identifiers `[A-Za-z_][A-Za-z0-9_]*` of at most 63 characters, `table` or
/// `schema.table`.
fn table_is_valid(table: &str) -> bool {
    let parts: Vec<&str> = table.split('.').collect();
    parts.len() <= 2
        && parts.iter().all(|part| {
            let mut chars = part.chars();
            part.len() <= 63
                && chars
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

fn names() -> impl Strategy<Value = String> {
    let awkward = prop::collection::vec(
        prop_oneof![
            Just('\0'),
            Just('\''),
            Just('"'),
            Just('\\'),
            Just(';'),
            Just('%'),
            Just(' '),
            Just('é'),
            Just('\u{301}'),
            Just('😀'),
            any::<char>(),
        ],
        0..40,
    )
    .prop_map(|chars| chars.into_iter().collect::<String>());
    prop_oneof![
        any::<String>(),
        awkward,
        // Around the 255-byte limit, in one-, two- and four-byte characters.
        (250_usize..260).prop_map(|n| "a".repeat(n)),
        (126_usize..130).prop_map(|n| "é".repeat(n)),
        (62_usize..66).prop_map(|n| "😀".repeat(n)),
        "\\PC{0,300}",
        Just(String::new()),
        Just("'; DROP TABLE leases; --".to_owned()),
    ]
}

fn ttls() -> impl Strategy<Value = Duration> {
    let max_nanos = MAX_TTL_MS * 1_000_000;
    prop_oneof![
        (0_u64..3_000_000).prop_map(Duration::from_nanos),
        (0_u64..120_000).prop_map(Duration::from_millis),
        (max_nanos - 5_000_000..max_nanos + 5_000_000).prop_map(Duration::from_nanos),
        any::<u64>().prop_map(Duration::from_secs),
        Just(Duration::ZERO),
        Just(Duration::MAX),
    ]
}

fn tables() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[A-Za-z_][A-Za-z0-9_]{0,40}",
        "[A-Za-z_][A-Za-z0-9_]{0,8}\\.[A-Za-z_][A-Za-z0-9_]{0,8}",
        "[A-Za-z_]{1,5}[;'\"` .\\-\u{0}][A-Za-z_]{0,5}",
        "[0-9][a-z]{0,5}",
        "[a-z]{60,70}",
        "[a-z]{1,4}\\.[a-z]{1,4}\\.[a-z]{1,4}",
    ]
}

fn config(cases: u32) -> Config {
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// Drops what a fuzzed store made.
type Cleanup = Box<dyn FnOnce()>;

/// The store of `db` on a fresh table of the shared server, as a shared dyn store, and how to
/// drop the table; `None` (reported) when the server cannot be reached.
fn store_for(
    db: Option<Db>,
    driver: Driver,
    rt: &tokio::runtime::Runtime,
) -> Option<(Arc<dyn LeaseStore>, String, Cleanup)> {
    let Some(db) = db else {
        return Some((
            Arc::new(MemoryStore::new()),
            "memory".into(),
            Box::new(|| ()),
        ));
    };
    let url = db.shared_url();
    let table = env::unique_table("fuzz");
    rt.block_on(async {
        with_driver!(driver, db, |f| {
            let store = match f.connect(&url, &table, 4).await {
                Ok(store) => store,
                Err(error) => {
                    env::skip_or_fail(db.as_str(), &error.to_string());
                    return None;
                }
            };
            f.setup(&store).await.unwrap();
            let label = f.label();
            let dropper = store.clone();
            let handle = tokio::runtime::Handle::current();
            let cleanup: Cleanup = Box::new(move || {
                handle.block_on(async {
                    let f = &f;
                    f.execute(&dropper, &format!("DROP TABLE {table}"))
                        .await
                        .unwrap();
                    f.close(&dropper).await;
                });
                remove_sqlite(&url);
            });
            Some((Arc::new(store) as Arc<dyn LeaseStore>, label, cleanup))
        })
    })
}

fn conclude(
    mut counts: Counts,
    result: Result<(), proptest::test_runner::TestError<impl std::fmt::Debug>>,
) {
    if let Err(error) = result {
        counts.violation(error.to_string());
    }
    counts.conclude();
}

fn fuzz_names(db: Option<Db>, driver: Driver) {
    let rt = runtime();
    let Some((store, label, cleanup)) = store_for(db, driver, &rt) else {
        return;
    };
    let counting = CountingStore::new(store);
    let client = LeaseClient::new(counting.clone(), TokioRuntime);
    let mut counts = Counts::new("fuzz-names", label);
    let (valid, invalid) = (Cell::new(0), Cell::new(0));
    let result = TestRunner::new(config(192)).run(&names(), |name| {
        let before = counting.calls();
        rt.block_on(async {
            match client.try_acquire(name.as_str()).await {
                Ok(Some(guard)) => {
                    valid.set(valid.get() + 1);
                    prop_assert!(name_is_valid(&name), "{name:?} was accepted");
                    let key = LeaseName::new(&name).unwrap();
                    let info = counting.inspect(&key).await.unwrap();
                    prop_assert!(
                        info.as_ref().is_some_and(|i| i.name.as_str() == name
                            && i.fence == guard.fence()
                            && &i.holder == guard.holder()),
                        "{name:?} read back as {info:?}"
                    );
                    let listed = counting.list().await.unwrap();
                    prop_assert!(listed.iter().any(|i| i.name.as_str() == name));
                    guard.release().await.unwrap();
                }
                Ok(None) => prop_assert!(false, "{name:?} was held by nobody, yet not taken"),
                Err(Error::InvalidName {
                    name: given,
                    reason,
                }) => {
                    invalid.set(invalid.get() + 1);
                    prop_assert!(!name_is_valid(&name), "{name:?} was refused: {reason}");
                    prop_assert_eq!(&given, &name);
                    let expected = if name.is_empty() {
                        NameError::Empty
                    } else if name.len() > 255 {
                        NameError::TooLong { len: name.len() }
                    } else {
                        NameError::ContainsNul
                    };
                    prop_assert_eq!(reason, expected);
                    prop_assert_eq!(counting.calls(), before, "{:?} reached the store", name);
                }
                Err(error) => prop_assert!(false, "{name:?}: {error}"),
            }
            Ok::<(), TestCaseError>(())
        })
    });
    counts.operations = valid.get() + invalid.get();
    counts.faults = invalid.get();
    cleanup();
    conclude(counts, result);
}

fn fuzz_ttls(db: Option<Db>, driver: Driver) {
    let rt = runtime();
    let Some((store, label, cleanup)) = store_for(db, driver, &rt) else {
        return;
    };
    let mut counts = Counts::new("fuzz-ttls", label);
    let (valid, invalid) = (Cell::new(0), Cell::new(0));
    let result = TestRunner::new(config(64)).run(&ttls(), |requested| {
        match Ttl::new(requested) {
            Ok(ttl) => {
                valid.set(valid.get() + 1);
                prop_assert!(ttl_is_valid(requested), "{requested:?} was accepted");
                prop_assert_eq!(u128::from(ttl.as_millis()), requested.as_millis());
                rt.block_on(async {
                    let name = LeaseName::new(format!("ttl-{}", valid.get())).unwrap();
                    let holder = HolderId::generate();
                    let fence = store.try_acquire(&name, &holder, ttl).await.unwrap();
                    prop_assert!(fence.is_some(), "{ttl:?} took nothing");
                    // Read back even when already expired: taken and expiring one TTL apart,
                    // to the store's precision.
                    let info = store.inspect(&name).await.unwrap().unwrap();
                    let length = info.expires_at.duration_since(info.taken_at).unwrap();
                    let (low, high) = (
                        ttl.get().saturating_sub(Duration::from_millis(1)),
                        ttl.get() + Duration::from_millis(1),
                    );
                    prop_assert!(
                        (low..=high).contains(&length),
                        "{ttl:?} stored as {length:?}"
                    );
                    // A TTL long enough not to lapse meanwhile renews and releases.
                    if ttl.get() >= Duration::from_secs(10) {
                        prop_assert!(store.renew(&name, &holder, ttl).await.unwrap());
                        prop_assert!(store.release(&name, &holder, Duration::ZERO).await.unwrap());
                    }
                    Ok(())
                })?;
            }
            Err(Error::InvalidTtl { requested: given }) => {
                invalid.set(invalid.get() + 1);
                prop_assert!(!ttl_is_valid(requested), "{requested:?} was refused");
                prop_assert_eq!(given, requested);
            }
            Err(error) => prop_assert!(false, "{requested:?}: {error}"),
        }
        Ok(())
    });
    counts.operations = valid.get() + invalid.get();
    counts.faults = invalid.get();
    cleanup();
    conclude(counts, result);
}

/// The schema a qualified table name can live in on each database.
fn schema_of(db: Db) -> &'static str {
    match db {
        Db::Postgres => "public",
        Db::MariaDb => "test",
        Db::Sqlite => "main",
    }
}

async fn round_trip<F: StoreFactory>(
    f: &F,
    base: &F::Store,
    table: &str,
    tried: &Cell<u64>,
) -> Result<(), TestCaseError> {
    let store = f.on_table(base, table);
    match (table_is_valid(table), store) {
        (false, Err(Error::InvalidIdentifier { identifier, .. })) => {
            prop_assert_eq!(identifier, table);
            Ok(())
        }
        (true, Ok(_)) => {
            // A name of its own for the round trip, so no other test's table is touched: the
            // same characters with a unique suffix, in the database's schema if qualified.
            let own = match table.split_once('.') {
                Some((_, t)) => format!("{}.{}", schema_of(f.db()), unique(t)),
                None => unique(table),
            };
            let store = f.on_table(base, &own).unwrap();
            f.setup(&store).await.unwrap();
            let (name, holder) = (LeaseName::new("sweep").unwrap(), HolderId::generate());
            let ttl = Ttl::from_secs(10).unwrap();
            let fence = store.try_acquire(&name, &holder, ttl).await.unwrap();
            let info = store.inspect(&name).await.unwrap();
            let quoted = match f.db() {
                Db::MariaDb => own
                    .split('.')
                    .map(|p| format!("`{p}`"))
                    .collect::<Vec<_>>()
                    .join("."),
                _ => own
                    .split('.')
                    .map(|p| format!("\"{p}\""))
                    .collect::<Vec<_>>()
                    .join("."),
            };
            f.execute(base, &format!("DROP TABLE {quoted}"))
                .await
                .unwrap();
            tried.set(tried.get() + 1);
            prop_assert!(fence.is_some() && info.is_some_and(|i| i.holder == holder));
            Ok(())
        }
        (valid, outcome) => {
            prop_assert!(
                false,
                "{table:?} (valid: {valid}) gave {:?}",
                outcome.map(drop)
            );
            Ok(())
        }
    }
}

/// `table` with a suffix no other test uses, at most 63 characters.
fn unique(table: &str) -> String {
    let suffix = env::unique_table("_fz");
    let keep = 63_usize.saturating_sub(suffix.len());
    format!("{}{suffix}", &table[..table.len().min(keep)])
}

fn fuzz_tables(db: Db, driver: Driver) {
    let rt = runtime();
    let url = db.shared_url();
    let result = rt.block_on(async {
        with_driver!(driver, db, |f| {
            let base = match f.connect(&url, "leases", 2).await {
                Ok(store) => store,
                Err(error) => {
                    env::skip_or_fail(db.as_str(), &error.to_string());
                    return None;
                }
            };
            let mut counts = Counts::new("fuzz-tables", f.label());
            let (created, cases) = (Cell::new(0), Cell::new(0));
            let handle = tokio::runtime::Handle::current();
            let result = tokio::task::block_in_place(|| {
                TestRunner::new(config(48)).run(&tables(), |table| {
                    cases.set(cases.get() + 1);
                    handle.block_on(round_trip(&f, &base, &table, &created))
                })
            });
            f.close(&base).await;
            counts.operations = cases.get();
            counts.faults = cases.get() - created.get();
            Some((counts, result))
        })
    });
    remove_sqlite(&url);
    if let Some((counts, result)) = result {
        conclude(counts, result);
    }
}

#[test]
fn memory_names() {
    fuzz_names(None, Driver::Sqlx);
}

#[test]
fn memory_ttls() {
    fuzz_ttls(None, Driver::Sqlx);
}

#[test]
fn sqlite_names() {
    fuzz_names(Some(Db::Sqlite), Driver::Sqlx);
}

#[test]
fn sqlite_names_diesel() {
    fuzz_names(Some(Db::Sqlite), Driver::Diesel);
}

#[test]
fn sqlite_ttls() {
    fuzz_ttls(Some(Db::Sqlite), Driver::Sqlx);
}

#[test]
fn sqlite_ttls_diesel() {
    fuzz_ttls(Some(Db::Sqlite), Driver::Diesel);
}

#[test]
fn sqlite_tables() {
    fuzz_tables(Db::Sqlite, Driver::Sqlx);
}

#[test]
fn sqlite_tables_diesel() {
    fuzz_tables(Db::Sqlite, Driver::Diesel);
}

#[test]
fn postgres_names() {
    fuzz_names(Some(Db::Postgres), Driver::Sqlx);
}

#[test]
fn postgres_names_diesel() {
    fuzz_names(Some(Db::Postgres), Driver::Diesel);
}

#[test]
fn postgres_ttls() {
    fuzz_ttls(Some(Db::Postgres), Driver::Sqlx);
}

#[test]
fn postgres_ttls_diesel() {
    fuzz_ttls(Some(Db::Postgres), Driver::Diesel);
}

#[test]
fn postgres_tables() {
    fuzz_tables(Db::Postgres, Driver::Sqlx);
}

#[test]
fn postgres_tables_diesel() {
    fuzz_tables(Db::Postgres, Driver::Diesel);
}

#[test]
fn mariadb_names() {
    fuzz_names(Some(Db::MariaDb), Driver::Sqlx);
}

#[test]
fn mariadb_names_diesel() {
    fuzz_names(Some(Db::MariaDb), Driver::Diesel);
}

#[test]
fn mariadb_ttls() {
    fuzz_ttls(Some(Db::MariaDb), Driver::Sqlx);
}

#[test]
fn mariadb_ttls_diesel() {
    fuzz_ttls(Some(Db::MariaDb), Driver::Diesel);
}

#[test]
fn mariadb_tables() {
    fuzz_tables(Db::MariaDb, Driver::Sqlx);
}

#[test]
fn mariadb_tables_diesel() {
    fuzz_tables(Db::MariaDb, Driver::Diesel);
}
