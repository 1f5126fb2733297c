//! Adopting an existing table: the story's own service already has a `leases` table of its
//! own shape (no fence, a holder that cannot be `NULL`) holding a live lease, an older version
//! of the store may have left the small counter fences it counted, and a table of another kind
//! may sit under the name a store is given. Each case runs on any SQL store
//! (lease-sql's [`SqlStore`] over a driver's [`Execute`]) and reaches the database only through
//! the store's executor, so every driver runs the same cases.

use std::time::{Duration, Instant, SystemTime};

use lease_core::{
    BoxError, Error, ErrorChain, HolderId, LeaseName, LeaseStore, Runtime, StoreErrorKind, Ttl,
};
use lease_sql::{Dialect, Execute, Query, SqlStore};

/// The holder of the story's service's live lease.
pub const SEED_HOLDER: &str = "seed-service";

/// The story's table as its service made it on `dialect`: `name` primary key, `holder` not
/// null, `taken_at` with a default, `expires_at`, and no fence. (On MariaDB, `text` cannot be a
/// key, so names are `varchar` with the server's collation; on SQLite, times are Unix
/// milliseconds, as SQLite has no time type.)
pub fn story_table(dialect: Dialect, table: &str) -> String {
    match dialect {
        Dialect::Postgres => format!(
            "CREATE TABLE {table} (name text PRIMARY KEY, holder text NOT NULL, \
             taken_at timestamptz NOT NULL DEFAULT now(), expires_at timestamptz NOT NULL)"
        ),
        Dialect::MySql => format!(
            "CREATE TABLE {table} (name varchar(255) PRIMARY KEY, holder varchar(255) NOT NULL, \
             taken_at datetime(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), expires_at datetime(6) NOT NULL)"
        ),
        _ => format!(
            "CREATE TABLE {table} (name TEXT PRIMARY KEY, holder TEXT NOT NULL, \
             taken_at INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)), \
             expires_at INTEGER NOT NULL)"
        ),
    }
}

/// The story's service's rows: `report` held by [`SEED_HOLDER`] for another hour, `digest`
/// expired a minute ago, one statement each. Times by the database's clock, in UTC.
pub fn story_rows(dialect: Dialect, table: &str) -> [String; 2] {
    let (live, expired) = match dialect {
        Dialect::Postgres => (
            "now() + interval '1 hour'".to_owned(),
            "now() - interval '1 minute'".to_owned(),
        ),
        Dialect::MySql => (
            "UTC_TIMESTAMP(6) + INTERVAL 1 HOUR".to_owned(),
            "UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE".to_owned(),
        ),
        _ => {
            let now = "CAST(unixepoch('subsec') * 1000 AS INTEGER)";
            (format!("{now} + 3600000"), format!("{now} - 60000"))
        }
    };
    [
        format!(
            "INSERT INTO {table} (name, holder, expires_at) VALUES ('report', '{SEED_HOLDER}', {live})"
        ),
        format!(
            "INSERT INTO {table} (name, holder, expires_at) VALUES ('digest', 'old-instance', {expired})"
        ),
    ]
}

/// Moves `report`'s expiry to a second ago, as if the story's service had stopped renewing it.
fn expire_report(dialect: Dialect, table: &str) -> String {
    let past = match dialect {
        Dialect::Postgres => "now() - interval '1 second'".to_owned(),
        Dialect::MySql => "UTC_TIMESTAMP(6) - INTERVAL 1 SECOND".to_owned(),
        _ => "CAST(unixepoch('subsec') * 1000 AS INTEGER) - 1000".to_owned(),
    };
    format!("UPDATE {table} SET expires_at = {past} WHERE name = 'report'")
}

/// After an upgrade: the story's live lease `report` is still held by its holder, with most of
/// its hour left, and excludes ours; its expired `digest` is free, with a fence above zero.
async fn story_leases_survived<X: Execute>(store: &SqlStore<X>, ttl: Ttl) -> Result<(), BoxError> {
    let report = store
        .inspect(&name("report"))
        .await?
        .ok_or("the story's live lease is gone")?;
    if report.holder.as_str() != SEED_HOLDER || report.is_expired() {
        return Err(format!("the story's live lease reads {report:?}").into());
    }
    let left = report.expires_at.duration_since(report.taken_at);
    if !left.is_ok_and(|left| left > Duration::from_secs(50 * 60)) {
        return Err(format!("the live lease lost time in the upgrade: {report:?}").into());
    }
    if let Some(fence) = store
        .try_acquire(&name("report"), &HolderId::generate(), ttl)
        .await?
    {
        return Err(format!("took the story's live lease with fence {fence}").into());
    }
    let digest = store
        .try_acquire(&name("digest"), &HolderId::generate(), ttl)
        .await?
        .ok_or("the story's expired lease was not free")?;
    if digest.get() == 0 {
        return Err("a fence of zero".into());
    }
    Ok(())
}

/// Once the story's service stops renewing (its `report` expired by the database's clock),
/// the lease is ours to take, with a fence above zero, and to give back.
async fn story_lease_is_ours_once_expired<X: Execute>(
    store: &SqlStore<X>,
    dialect: Dialect,
    table: &str,
    ttl: Ttl,
) -> Result<(), BoxError> {
    store
        .executor()
        .batch(&expire_report(dialect, table))
        .await?;
    let me = HolderId::generate();
    let taken = store
        .try_acquire(&name("report"), &me, ttl)
        .await?
        .ok_or("the story's lease was not free once expired")?;
    if taken.get() == 0 {
        return Err("a fence of zero after the story's lease".into());
    }
    if !store.release(&name("report"), &me, Duration::ZERO).await? {
        return Err("could not release the lease taken over".into());
    }
    Ok(())
}

fn name(name: &str) -> LeaseName {
    LeaseName::new(name).expect("a valid name")
}

/// Creates the story's table as `table`, with its two rows (`report` held by [`SEED_HOLDER`]
/// for another hour), through the store's executor.
///
/// # Errors
/// The database's, when a statement fails.
///
/// # Cancel safety
/// Dropped, it leaves the table as far as it got, for the caller to drop.
pub async fn create_story_table<X: Execute>(
    store: &SqlStore<X>,
    table: &str,
) -> Result<(), BoxError> {
    let dialect = store.statements().dialect();
    store.executor().batch(&story_table(dialect, table)).await?;
    for row in story_rows(dialect, table) {
        store.executor().batch(&row).await?;
    }
    Ok(())
}

/// Creates the story's table as `table` ([`create_story_table`]) and answers the SQL that
/// upgrades it, as `verify` prints it for a migration.
///
/// # Errors
/// The database's, or when `verify` answers anything but a mismatch with its upgrade.
///
/// # Cancel safety
/// Dropped, it leaves the table as far as it got, for the caller to drop.
pub async fn story_upgrade<X: Execute>(
    store: &SqlStore<X>,
    table: &str,
) -> Result<String, BoxError> {
    create_story_table(store, table).await?;
    match store.verify().await {
        Err(Error::SchemaMismatch {
            upgrade: Some(sql), ..
        }) => Ok(sql),
        other => Err(format!("verify of the story's table answered {other:?}").into()),
    }
}

/// The story's live lease `report` is still held by its holder, and excludes ours.
///
/// # Errors
/// A description of what differs, or the store's error.
///
/// # Cancel safety
/// Cancel safe: it only reads, and an acquisition it makes takes nothing (the lease is held).
pub async fn story_lease_still_held<X: Execute>(store: &SqlStore<X>) -> Result<(), BoxError> {
    let report = store
        .inspect(&name("report"))
        .await?
        .ok_or("the story's live lease is gone")?;
    if report.holder.as_str() != SEED_HOLDER || report.is_expired() {
        return Err(format!("the story's live lease reads {report:?}").into());
    }
    if let Some(fence) = store
        .try_acquire(&name("report"), &HolderId::generate(), Ttl::from_secs(30)?)
        .await?
    {
        return Err(format!("took the story's live lease with fence {fence}").into());
    }
    Ok(())
}

/// Two stores on one pool upgrade the story's table at the same moment, as instances starting
/// together do: both answer `Ok`, one of them `true`, and the table fits with the story's live
/// lease still held. The later one's SQL, made from the shape before the earlier one's
/// upgrade, fails on the upgraded table; `upgrade` must read the table again rather than fail.
/// Whether the two meet so depends on timing: `lease-sqlx/tests/adoption.rs` makes it certain
/// with an upgrade made stale on purpose.
///
/// # Errors
/// A description of the first thing that went otherwise.
///
/// # Cancel safety
/// Dropped, it leaves `table` as far as it got, for the caller to drop.
pub async fn simultaneous_upgrades_converge<X: Execute + Clone>(
    store: &SqlStore<X>,
    table: &str,
) -> Result<(), BoxError> {
    create_story_table(store, table).await?;
    let other = SqlStore::<X>::with_table(store.executor().clone(), table)?;
    let (one, two) = futures::join!(store.upgrade(), other.upgrade());
    match (one, two) {
        (Ok(one), Ok(two)) if one || two => {}
        other => return Err(format!("the two upgrades answered {other:?}").into()),
    }
    store.verify().await?;
    story_lease_still_held(store).await
}

/// On the story's table with a live row: without the check, the first acquisition fails on the
/// database (the control: this is what a user met); `setup` and `verify` refuse the table with
/// [`Error::SchemaMismatch`] carrying the upgrade; `upgrade` applies it, after which the table
/// verifies, the story's live lease still excludes our holders until it expires, the expired one
/// is taken at once, and every fence is above zero. `store` is on `table`, which the case
/// creates and leaves for the caller to drop.
///
/// # Errors
/// A description of the first thing that went otherwise.
///
/// # Cancel safety
/// Dropped, it leaves `table` as far as it got, for the caller to drop as after the case: in the
/// story's shape, or upgraded, as an upgrade cut off ran entirely or not at all.
pub async fn story_table_is_refused_then_upgraded<X: Execute>(
    store: &SqlStore<X>,
    table: &str,
) -> Result<(), BoxError> {
    let dialect = store.statements().dialect();
    create_story_table(store, table).await?;
    let ttl = Ttl::from_secs(30)?;

    // The control: the store's statements do not work on this table. The error reads cleanly:
    // its Display names the operation and the lease, its cause says the database's message
    // once, without the driver's decorations.
    match store
        .try_acquire(&name("digest"), &HolderId::generate(), ttl)
        .await
    {
        Err(error @ Error::Store { .. }) => {
            let line = ErrorChain(&error).to_string();
            let clean = error.to_string() == "lease store failed to acquire lease \"digest\""
                && line.matches("fence").count() == 1
                && !line.contains(" at line ")
                && !line.contains("error returned from database");
            if !clean {
                return Err(format!("the store's error reads {line:?}").into());
            }
        }
        other => return Err(format!("acquiring on the story's table answered {other:?}").into()),
    }

    for (what, result) in [
        ("setup", store.setup().await),
        ("verify", store.verify().await),
    ] {
        match result {
            Err(Error::SchemaMismatch {
                table: named,
                mismatch,
                upgrade: Some(sql),
                other_kind: false,
            }) => {
                if named != table || !mismatch.contains("column fence is missing") {
                    return Err(format!("{what} named {named}: {mismatch}").into());
                }
                if !mismatch.contains("holder is NOT NULL") {
                    return Err(format!("{what} missed the holder: {mismatch}").into());
                }
                if !sql.contains("fence") {
                    return Err(format!("{what}'s upgrade adds no fence: {sql}").into());
                }
            }
            other => return Err(format!("{what} on the story's table answered {other:?}").into()),
        }
    }

    if !store.upgrade().await? {
        return Err("upgrade changed nothing".into());
    }
    store.verify().await?;
    store.setup().await?;
    if store.upgrade().await? {
        return Err("a second upgrade changed the table again".into());
    }

    story_leases_survived(store, ttl).await?;
    let fresh = store
        .try_acquire(&name("fresh"), &HolderId::generate(), ttl)
        .await?
        .ok_or("a new lease was not free")?;
    if fresh.get() == 0 {
        return Err("a fence of zero for a new lease".into());
    }
    // Once the story's service stops renewing, its lease is ours to take.
    story_lease_is_ours_once_expired(store, dialect, table, ttl).await
}

/// The story's table as a MariaDB port of it has it: a `VARCHAR` name, a `TEXT` holder, and
/// `TIMESTAMP` times (which MariaDB reads and writes in the session's time zone), no fence.
pub fn mariadb_port_table(table: &str) -> String {
    format!(
        "CREATE TABLE {table} (name VARCHAR(255) PRIMARY KEY, holder TEXT NOT NULL, \
         taken_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, expires_at TIMESTAMP NOT NULL)"
    )
}

/// The story's rows in the MariaDB port of its table (see [`story_rows`]), written in UTC: a
/// `TIMESTAMP` takes its value in the session's time zone.
fn mariadb_port_rows(table: &str) -> String {
    let [live, expired] = story_rows(Dialect::MySql, table);
    format!("SET time_zone = '+00:00';\n{live};\n{expired}")
}

/// The session time zone the upgrade of the MariaDB port runs in: west of UTC, so a conversion
/// in it would move the live lease's expiry into the past.
const WEST: &str = "SET time_zone = '-05:00';";

/// On the MariaDB port of the story's table (see [`mariadb_port_table`]) holding a live lease:
/// `setup` and `verify` refuse it with SQL that makes the holder `VARBINARY(1024)` and the
/// times UTC `DATETIME(6)`; that SQL, run in a session five hours west of UTC, keeps every
/// instant, so the live lease still excludes our holders until it expires, and fences start
/// above zero. The control runs the same SQL without its time zone lines on a second table:
/// there the live lease comes out expired and is taken, which the checks above would catch.
/// `store` is on `table`, a plain MariaDB table name (no schema): the case creates the table
/// and leaves it for the caller to drop (the control's table it drops itself).
///
/// # Errors
/// A description of the first thing that went otherwise, or that the store is not MariaDB's.
///
/// # Cancel safety
/// Not cancel safe: dropped before it has dropped the control's copy, `{table}_tz`, it leaves that
/// table behind as well, which the caller, who drops `table`, does not know of. `table` it leaves
/// as far as it got.
pub async fn mariadb_port_is_refused_then_upgraded_in_utc<X: Execute + Clone>(
    store: &SqlStore<X>,
    table: &str,
) -> Result<(), BoxError> {
    if store.statements().dialect() != Dialect::MySql {
        return Err("the MariaDB port of the story's table needs a MariaDB store".into());
    }
    let run = |sql: String| async move { store.executor().batch(&sql).await };
    run(mariadb_port_table(table)).await?;
    run(mariadb_port_rows(table)).await?;
    let ttl = Ttl::from_secs(30)?;

    let mut upgrade = None;
    for (what, result) in [
        ("setup", store.setup().await),
        ("verify", store.verify().await),
    ] {
        match result {
            Err(Error::SchemaMismatch {
                mismatch,
                upgrade: Some(sql),
                ..
            }) => {
                for (needed, why) in [
                    ("column fence is missing", "the fence"),
                    ("column holder is text", "the text holder"),
                    ("column expires_at is timestamp", "the timestamps"),
                ] {
                    if !mismatch.contains(needed) {
                        return Err(format!("{what} missed {why}: {mismatch}").into());
                    }
                }
                for needed in [
                    "SET time_zone = '+00:00';",
                    "MODIFY holder VARBINARY(1024) NULL",
                    "MODIFY taken_at DATETIME(6) NOT NULL",
                    "MODIFY expires_at DATETIME(6) NOT NULL",
                ] {
                    if !sql.contains(needed) {
                        return Err(format!("{what}'s upgrade has no {needed}: {sql}").into());
                    }
                }
                upgrade = Some(sql);
            }
            other => return Err(format!("{what} on the MariaDB port answered {other:?}").into()),
        }
    }
    let upgrade = upgrade.ok_or("no upgrade SQL")?;

    let control = mariadb_port_converted_in_the_sessions_zone(store, table, &upgrade).await;
    run(format!("DROP TABLE IF EXISTS {table}_tz")).await?;
    control?;

    run(format!("{WEST}\n{upgrade}")).await?;
    store.verify().await?;
    if store.upgrade().await? {
        return Err("upgrade found more to change after the printed SQL".into());
    }
    story_leases_survived(store, ttl).await?;
    story_lease_is_ours_once_expired(store, Dialect::MySql, table, ttl).await
}

/// The control of [`mariadb_port_is_refused_then_upgraded_in_utc`]: `upgrade` for `table`
/// without its time zone lines, run west of UTC on a copy of the port (`{table}_tz`, left for
/// the caller to drop), converts the times as that session shows them, and the live lease
/// comes out expired: a holder of ours takes it.
async fn mariadb_port_converted_in_the_sessions_zone<X: Execute + Clone>(
    store: &SqlStore<X>,
    table: &str,
    upgrade: &str,
) -> Result<(), BoxError> {
    let copy = format!("{table}_tz");
    let control = store.clone().on(&copy)?;
    let run = |sql: String| async move { store.executor().batch(&sql).await };
    run(mariadb_port_table(&copy)).await?;
    run(mariadb_port_rows(&copy)).await?;
    let in_session_zone = upgrade
        .lines()
        .filter(|line| !line.contains("time_zone"))
        .collect::<Vec<_>>()
        .join("\n")
        .replace(&format!("`{table}`"), &format!("`{copy}`"));
    run(format!("{WEST}\n{in_session_zone}")).await?;
    control.verify().await?;
    let taken = control
        .try_acquire(&name("report"), &HolderId::generate(), Ttl::from_secs(30)?)
        .await?;
    if taken.is_none() {
        return Err(format!(
            "the control: converted in the session's zone, the live lease still excluded us, \
             so the case could not tell a conversion in UTC from one without ({in_session_zone})"
        )
        .into());
    }
    Ok(())
}

/// Rows an older version of the store wrote in today's table, with the fences it counted
/// (`previous + 1`): `report` expired (fence 7), `digest` released (fence 5), `ledger` held
/// by `old-instance` for another hour (fence 9), one statement each. Times by the database's
/// clock, in UTC (SQLite: Unix milliseconds, as the table keeps them).
fn counter_rows(dialect: Dialect, table: &str) -> [String; 3] {
    let (now, ahead, behind) = match dialect {
        Dialect::Postgres => (
            "now()".to_owned(),
            "now() + interval '1 hour'".to_owned(),
            "now() - interval '1 minute'".to_owned(),
        ),
        Dialect::MySql => (
            "UTC_TIMESTAMP(6)".to_owned(),
            "UTC_TIMESTAMP(6) + INTERVAL 1 HOUR".to_owned(),
            "UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE".to_owned(),
        ),
        _ => {
            let now = "CAST(round(unixepoch('subsec') * 1000) AS INTEGER)";
            (
                now.to_owned(),
                format!("{now} + 3600000"),
                format!("{now} - 60000"),
            )
        }
    };
    let row = |name: &str, holder: &str, fence: u64, expires: &str| {
        format!(
            "INSERT INTO {table} (name, holder, fence, taken_at, expires_at) \
             VALUES ('{name}', {holder}, {fence}, {behind}, {expires})"
        )
    };
    [
        row("report", "'old-instance'", 7, &behind),
        row("digest", "NULL", 5, &now),
        row("ledger", "'old-instance'", 9, &ahead),
    ]
}

/// The fences [`counter_rows`] granted.
const COUNTER_FENCES: [u64; 3] = [7, 5, 9];

/// Whether `fence` is above every fence in `granted`.
fn above_all(fence: u64, granted: &[u64]) -> bool {
    granted.iter().all(|&before| fence > before)
}

/// A table whose rows carry the small counter fences an older version of the store wrote
/// (`previous + 1`) needs no migration: it verifies as it is, its live lease still excludes our
/// holders, and the next acquisitions of its expired and released leases get fences above every
/// fence the older version granted (the database's clock in microseconds is far above any
/// counter), which keep increasing from there. The control: the older version's rule, applied to the same rows,
/// answers a fence (8 for `report`) that the same check refuses, as it is below `ledger`'s 9.
/// `store` is on `table`, which the case creates and leaves for the caller to drop.
///
/// # Errors
/// A description of the first thing that went otherwise.
///
/// # Cancel safety
/// Dropped, it leaves `table` as far as it got, with the older version's rows and the leases it
/// took, for the caller to drop as after the case.
pub async fn counter_fences_are_overtaken<X: Execute>(
    store: &SqlStore<X>,
    table: &str,
) -> Result<(), BoxError> {
    let dialect = store.statements().dialect();
    store.setup().await?;
    for row in counter_rows(dialect, table) {
        store.executor().batch(&row).await?;
    }
    store.verify().await?;
    if store.upgrade().await? {
        return Err("a table of counter fences was upgraded".into());
    }
    let ttl = Ttl::from_secs(30)?;
    let counter_next = COUNTER_FENCES[0] + 1;
    if above_all(counter_next, &COUNTER_FENCES) {
        return Err("the check would let a counter's next fence through".into());
    }

    if let Some(fence) = store
        .try_acquire(&name("ledger"), &HolderId::generate(), ttl)
        .await?
    {
        return Err(format!("took the older version's live lease with fence {fence}").into());
    }
    let me = HolderId::generate();
    let mut report = 0;
    for lease in ["report", "digest"] {
        let fence = store
            .try_acquire(&name(lease), &me, ttl)
            .await?
            .ok_or_else(|| format!("{lease}, free in the older version's rows, was not free"))?
            .get();
        if !above_all(fence, &COUNTER_FENCES) {
            return Err(format!("{lease} got fence {fence}, not above {COUNTER_FENCES:?}").into());
        }
        if lease == "report" {
            report = fence;
        }
    }
    // Released and taken again, the lease's fence keeps increasing. (Two leases may share a
    // fence: each lease's fences increase, and SQLite's clock counts milliseconds.)
    if !store.release(&name("report"), &me, Duration::ZERO).await? {
        return Err("could not release report".into());
    }
    let again = store
        .try_acquire(&name("report"), &HolderId::generate(), ttl)
        .await?
        .ok_or("report was not free once released")?
        .get();
    if again <= report {
        return Err(format!("report got fence {again} again, not above its {report}").into());
    }
    let row = store
        .inspect(&name("report"))
        .await?
        .ok_or("report is not held")?;
    if row.fence.get() != again {
        return Err(format!("report's row reads {row:?}, not fence {again}").into());
    }
    Ok(())
}

/// A table of another kind under the store's name is refused by `setup`, `verify` and
/// `upgrade`, without SQL to fix it and before any lease statement runs: its rows stay as
/// they were. `store` is on `table`, which the case creates and leaves for the caller to drop.
///
/// # Errors
/// A description of the first thing that went otherwise.
///
/// # Cancel safety
/// Dropped, it leaves `table` as far as it got, for the caller to drop as after the case; the
/// refusals it waits for write nothing.
pub async fn unrelated_table_is_refused<X: Execute>(
    store: &SqlStore<X>,
    table: &str,
) -> Result<(), BoxError> {
    let run = |sql: String| async move { store.executor().batch(&sql).await };
    run(format!(
        "CREATE TABLE {table} (id INTEGER PRIMARY KEY, email VARCHAR(100) NOT NULL)"
    ))
    .await?;
    run(format!(
        "INSERT INTO {table} (id, email) VALUES (1, 'a@example.com')"
    ))
    .await?;
    for (what, result) in [
        ("setup", store.setup().await),
        ("verify", store.verify().await),
        ("upgrade", store.upgrade().await.map(|_| ())),
    ] {
        match result {
            Err(Error::SchemaMismatch {
                mismatch,
                upgrade: None,
                other_kind: true,
                ..
            }) if mismatch.contains("column name is missing")
                && mismatch.contains("column email is NOT NULL without a default") => {}
            other => return Err(format!("{what} on an unrelated table answered {other:?}").into()),
        }
    }
    // Still one row, still without our columns: nothing was written.
    match store.verify().await {
        Err(Error::SchemaMismatch { upgrade: None, .. }) => Ok(()),
        other => Err(format!("after the refusals, verify answered {other:?}").into()),
    }
}

/// Without a table, `verify` refuses with the SQL that creates it, and `upgrade` does not
/// create it; `setup` does, after which both pass.
///
/// # Errors
/// A description of the first thing that went otherwise.
///
/// # Cancel safety
/// Dropped, it leaves the store's table made if `setup` ran, which it did entirely or not at all;
/// after the case, the table is there.
pub async fn missing_table_is_refused_by_verify<X: Execute>(
    store: &SqlStore<X>,
) -> Result<(), BoxError> {
    match store.verify().await {
        Err(Error::SchemaMismatch {
            mismatch,
            upgrade: Some(sql),
            ..
        }) if mismatch == "the table does not exist" && sql.starts_with("CREATE TABLE") => {}
        other => return Err(format!("verify without a table answered {other:?}").into()),
    }
    if !matches!(store.upgrade().await, Err(Error::SchemaMismatch { .. })) {
        return Err("upgrade without a table did not refuse".into());
    }
    store.setup().await?;
    store.verify().await?;
    Ok(())
}

/// A failed upgrade leaves no transaction open on the store's pooled connections.
///
/// On SQLite the upgrade of the story's table rebuilds it in one script, `SAVEPOINT` to
/// `RELEASE` (a transaction of its own outside any other); a view over the table fails its
/// rename part-way, before the `RELEASE`. The
/// connection must not go back to the pool inside that transaction, holding the database's
/// write lock: every writer would wait for it, and what the store's next statements on it
/// wrote would roll back when the pool finally dropped it. So the case then begins and
/// commits a transaction on every connection of a pool of two: each must succeed. On
/// PostgreSQL and MariaDB the upgrade is statements the server ends with their error (or that
/// succeed despite the view); the case checks the same there.
///
/// # Errors
/// When the upgrade succeeds on SQLite (the case would test nothing), or a transaction after
/// it cannot begin or commit.
pub async fn failed_upgrade_leaves_no_transaction_open<X: Execute>(
    store: &SqlStore<X>,
    table: &str,
) -> Result<(), BoxError> {
    let dialect = store.statements().dialect();
    let run = |sql: String| async move { store.executor().batch(&sql).await };
    create_story_table(store, table).await?;
    let view = format!("{table}_view");
    run(format!("CREATE VIEW {view} AS SELECT name FROM {table}")).await?;
    let checked = async {
        let upgraded = store.upgrade().await;
        if dialect == Dialect::Sqlite && upgraded.is_ok() {
            return Err::<(), BoxError>("the view did not fail SQLite's rebuild".into());
        }
        let begin = match dialect {
            Dialect::Sqlite => "BEGIN IMMEDIATE; COMMIT;",
            _ => "BEGIN; COMMIT;",
        };
        // Twice the pool's size, so each connection takes one at least once the first are
        // back (the pools hand out their idle connections in turn).
        for attempt in 0..4 {
            store.executor().batch(begin).await.map_err(|error| {
                format!("a transaction after the failed upgrade ({attempt}): {error}")
            })?;
        }
        Ok(())
    }
    .await;
    run(format!("DROP VIEW {view}")).await?;
    checked
}

/// MariaDB: a lease table whose times MariaDB sets to the current time whenever a statement
/// changes the row without setting them (`ON UPDATE CURRENT_TIMESTAMP(6)`), and whose fence
/// may be `NULL`, with `report` held by [`SEED_HOLDER`] for another hour, its fence `NULL`. The
/// control: a renewal moves the time a lease of the store's was taken. `verify` refuses the
/// table with the SQL that drops the attribute; after `upgrade` `report` is still held (the
/// upgrade's `UPDATE` of the `NULL` fence left its expiry alone, where MariaDB would have set it
/// to now and freed the lease), and a renewal leaves the time taken where it was. `store` is
/// on `table`, which the case creates and leaves for the caller to drop.
///
/// # Errors
/// A description of the first thing that went otherwise, or that the store is not MariaDB's.
///
/// # Cancel safety
/// Dropped, it leaves `table` as far as it got, for the caller to drop as after the case.
pub async fn mariadb_times_set_on_update_are_refused_then_kept<X: Execute>(
    store: &SqlStore<X>,
    table: &str,
) -> Result<(), BoxError> {
    if store.statements().dialect() != Dialect::MySql {
        return Err("ON UPDATE CURRENT_TIMESTAMP needs a MariaDB store".into());
    }
    store
        .executor()
        .batch(&format!(
            "CREATE TABLE {table} (name VARBINARY(255) NOT NULL PRIMARY KEY, \
             holder VARBINARY(1024) NULL, fence BIGINT NULL, \
             taken_at DATETIME(6) NOT NULL ON UPDATE CURRENT_TIMESTAMP(6), \
             expires_at DATETIME(6) NOT NULL ON UPDATE CURRENT_TIMESTAMP(6)) ENGINE=InnoDB;\n\
             INSERT INTO {table} (name, holder, fence, taken_at, expires_at) VALUES ('report', \
             '{SEED_HOLDER}', NULL, UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE, \
             UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)"
        ))
        .await?;
    let ttl = Ttl::from_secs(30)?;
    let (ours, holder) = (name("ours"), HolderId::generate());
    store
        .try_acquire(&ours, &holder, ttl)
        .await?
        .ok_or("a fresh name was refused")?;
    let before = taken_at(store, &ours).await?;
    if !store.renew(&ours, &holder, ttl).await? {
        return Err("a lease of ours was not renewed".into());
    }
    if taken_at(store, &ours).await? == before {
        return Err(
            "the control: a renewal left the time taken where it was on a table that sets it \
             on every update, so the case would show nothing"
                .into(),
        );
    }
    // `report`'s times as the table keeps them, whatever the session's time zone.
    let report_times = Query::new(
        format!(
            "SELECT CAST(taken_at AS CHAR), CAST(expires_at AS CHAR) FROM {table} \
             WHERE name = 'report'"
        ),
        Vec::new(),
    );
    let before_upgrade = store.executor().text_pairs(report_times.clone()).await?;
    match store.verify().await {
        Err(Error::SchemaMismatch {
            mismatch,
            upgrade: Some(_),
            other_kind: false,
            ..
        }) if mismatch.contains("ON UPDATE CURRENT_TIMESTAMP") => {}
        other => {
            return Err(format!("verify of times set on every update answered {other:?}").into());
        }
    }
    if !store.upgrade().await? {
        return Err("upgrade changed nothing".into());
    }
    store.verify().await?;
    let after_upgrade = store.executor().text_pairs(report_times).await?;
    if after_upgrade != before_upgrade {
        return Err(format!(
            "the upgrade moved the times of the lease held for another hour from \
             {before_upgrade:?} to {after_upgrade:?}"
        )
        .into());
    }
    let report = name("report");
    if let Some(fence) = store
        .try_acquire(&report, &HolderId::generate(), ttl)
        .await?
    {
        return Err(format!(
            "the lease held for another hour was taken after the upgrade, fence {fence}: the \
             upgrade's UPDATE of its fence set its expiry to now"
        )
        .into());
    }
    let before = taken_at(store, &ours).await?;
    if !store.renew(&ours, &holder, ttl).await? {
        return Err("a lease of ours was not renewed after the upgrade".into());
    }
    let after = taken_at(store, &ours).await?;
    if after != before {
        return Err(format!(
            "after the upgrade a renewal moved the time taken from {before:?} to {after:?}"
        )
        .into());
    }
    Ok(())
}

/// When `store` says the lease `name` was taken.
async fn taken_at<X: Execute>(
    store: &SqlStore<X>,
    name: &LeaseName,
) -> Result<SystemTime, BoxError> {
    store
        .inspect(name)
        .await?
        .map(|info| info.taken_at)
        .ok_or_else(|| format!("inspect found no lease {name}").into())
}

/// MariaDB: a table whose fence is `BIGINT UNSIGNED` (the catalog's `DATA_TYPE` reads `bigint`
/// for it, and sqlx reads no `i64` from it: every acquisition would commit and then fail to read
/// its fence, leaving the lease taken by nobody). `verify` refuses it with the `MODIFY` that
/// makes the fence signed; after `upgrade` a lease is taken and read back with its fence.
///
/// # Errors
/// When `verify` accepts the table, `upgrade` changes nothing, or a lease cannot be taken and
/// read back after it.
pub async fn mariadb_unsigned_fence_is_refused_then_upgraded<X: Execute>(
    store: &SqlStore<X>,
    table: &str,
) -> Result<(), BoxError> {
    store
        .executor()
        .batch(&format!(
            "CREATE TABLE {table} (\n    \
                 name VARBINARY(255) NOT NULL PRIMARY KEY,\n    \
                 holder VARBINARY(1024) NULL,\n    \
                 fence BIGINT UNSIGNED NOT NULL,\n    \
                 taken_at DATETIME(6) NOT NULL,\n    \
                 expires_at DATETIME(6) NOT NULL\n\
             )"
        ))
        .await?;
    match store.verify().await {
        Err(Error::SchemaMismatch {
            mismatch,
            upgrade: Some(sql),
            ..
        }) if mismatch.contains("signed 64-bit")
            && sql.contains("MODIFY fence BIGINT NOT NULL") => {}
        other => return Err(format!("verify of an unsigned fence answered {other:?}").into()),
    }
    if !store.upgrade().await? {
        return Err("upgrade changed nothing".into());
    }
    let digest = name("digest");
    let fence = store
        .try_acquire(&digest, &HolderId::generate(), Ttl::from_secs(30)?)
        .await?
        .ok_or("a new lease was not free")?;
    let info = store
        .inspect(&digest)
        .await?
        .ok_or("the lease taken is not listed")?;
    if info.fence != fence {
        return Err(format!("took fence {fence}, read back {}", info.fence).into());
    }
    Ok(())
}

/// MariaDB: a table whose holder is `VARCHAR(1500)` in `latin1`, `NOT NULL`, holding an
/// expired lease whose holder is 1500 characters (`é`, which `latin1` keeps in one byte and
/// UTF-8 in two). `verify` refuses it with SQL that converts the holder to UTF-8 text of the
/// same 1500 characters and then to bytes as wide as that text may take, not to the store's
/// own `VARBINARY(1024)`, which would cut the holder (or, in strict mode, fail the upgrade);
/// after `upgrade` the row's holder is the same 3000 bytes of UTF-8, the table passes
/// `verify`, and the lease is taken by a holder of ours.
///
/// # Errors
/// When `verify` accepts the table or its SQL narrows the holder, `upgrade` fails or changes
/// nothing, or the holder read back after it is not the one written.
pub async fn mariadb_wide_holder_keeps_its_width<X: Execute>(
    store: &SqlStore<X>,
    table: &str,
) -> Result<(), BoxError> {
    const WIDE: i64 = 1500;
    if store.statements().dialect() != Dialect::MySql {
        return Err("the wide latin1 holder needs a MariaDB store".into());
    }
    store
        .executor()
        .batch(&format!(
            "CREATE TABLE {table} (\n    \
                 name VARBINARY(255) NOT NULL PRIMARY KEY,\n    \
                 holder VARCHAR({WIDE}) CHARACTER SET latin1 NOT NULL,\n    \
                 fence BIGINT NOT NULL,\n    \
                 taken_at DATETIME(6) NOT NULL,\n    \
                 expires_at DATETIME(6) NOT NULL\n\
             );\n\
             INSERT INTO {table} VALUES ('digest', REPEAT('\u{e9}', {WIDE}), 7, \
                 UTC_TIMESTAMP(6) - INTERVAL 2 MINUTE, UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE);"
        ))
        .await?;
    match store.verify().await {
        Err(Error::SchemaMismatch {
            mismatch,
            upgrade: Some(sql),
            ..
        }) if mismatch.contains("column holder holds latin1 text")
            && sql.contains(&format!(
                "MODIFY holder VARCHAR({WIDE}) CHARACTER SET utf8mb4"
            ))
            && sql.contains(&format!("MODIFY holder VARBINARY({}) NULL", 4 * WIDE)) => {}
        other => return Err(format!("verify of a wide latin1 holder answered {other:?}").into()),
    }
    if !store.upgrade().await? {
        return Err("upgrade changed nothing".into());
    }
    store.verify().await?;
    let kept = store
        .executor()
        .int_pairs(Query::new(
            format!(
                "SELECT LENGTH(holder), holder = CAST(REPEAT('\u{e9}', {WIDE}) AS BINARY) \
                 FROM {table} WHERE name = 'digest'"
            ),
            Vec::new(),
        ))
        .await?;
    if kept != [(2 * WIDE, 1)] {
        return Err(format!(
            "the holder of {WIDE} characters came out as (bytes, the same) {kept:?}, not \
             [({}, 1)]",
            2 * WIDE
        )
        .into());
    }
    let fence = store
        .try_acquire(&name("digest"), &HolderId::generate(), Ttl::from_secs(30)?)
        .await?
        .ok_or("the expired lease was not free")?;
    if fence.get() <= 7 {
        return Err(format!("took the expired lease at fence {fence}, not above 7").into());
    }
    Ok(())
}

/// A table whose only key on `name` covers part of it is refused: on PostgreSQL and SQLite a
/// partial unique index (`WHERE holder IS NOT NULL`), which is no conflict target for the
/// store's `ON CONFLICT (name)` (every acquisition would fail); on MariaDB a primary key on a
/// prefix (`name(4)`), under which two names that share the prefix collide (taking one would
/// take over the other's row).
///
/// # Errors
/// When `verify` accepts the table, or refuses it for another reason.
pub async fn partial_key_on_name_is_refused<X: Execute>(
    store: &SqlStore<X>,
    table: &str,
) -> Result<(), BoxError> {
    let sql = match store.statements().dialect() {
        Dialect::Postgres => format!(
            "CREATE TABLE {table} (name text COLLATE \"C\" NOT NULL, holder text, \
             fence bigint NOT NULL, taken_at timestamptz NOT NULL, expires_at timestamptz NOT NULL);\n\
             CREATE UNIQUE INDEX {table}_name ON {table} (name) WHERE holder IS NOT NULL;"
        ),
        Dialect::MySql => format!(
            "CREATE TABLE {table} (name VARBINARY(255) NOT NULL, holder VARBINARY(1024) NULL, \
             fence BIGINT NOT NULL, taken_at DATETIME(6) NOT NULL, expires_at DATETIME(6) NOT NULL, \
             PRIMARY KEY (name(4)))"
        ),
        Dialect::Sqlite => format!(
            "CREATE TABLE {table} (name TEXT NOT NULL, holder TEXT, fence INTEGER NOT NULL, \
             taken_at INTEGER NOT NULL, expires_at INTEGER NOT NULL);\n\
             CREATE UNIQUE INDEX {table}_name ON {table} (name) WHERE holder IS NOT NULL;"
        ),
        other => return Err(format!("no partial key written for {other:?}").into()),
    };
    store.executor().batch(&sql).await?;
    match store.verify().await {
        Err(Error::SchemaMismatch { mismatch, .. })
            if mismatch.contains("column name is not the primary key") =>
        {
            Ok(())
        }
        other => Err(format!("verify of a partial key on name answered {other:?}").into()),
    }
}

/// A lease table whose `expires_at` may be `NULL`, holding a row without an expiry (written by
/// the service's own code, not by a store), is refused with the SQL that fills the missing
/// times and makes them `NOT NULL`; after the upgrade the row's lease is free (the store's
/// statements never match a `NULL` expiry: unfilled, the lease could never be taken), and the
/// next acquisition takes it with a greater fence.
///
/// # Errors
/// When `verify` accepts the table, the upgrade fails or changes nothing, or the lease without
/// an expiry cannot be taken after it.
pub async fn nullable_expiry_is_filled_then_free<X: Execute>(
    store: &SqlStore<X>,
    table: &str,
) -> Result<(), BoxError> {
    let (create, now) = match store.statements().dialect() {
        Dialect::Postgres => (
            format!(
                "CREATE TABLE {table} (name text COLLATE \"C\" NOT NULL PRIMARY KEY, holder text, \
                 fence bigint NOT NULL, taken_at timestamptz NOT NULL, expires_at timestamptz)"
            ),
            "now()",
        ),
        Dialect::MySql => (
            format!(
                "CREATE TABLE {table} (name VARBINARY(255) NOT NULL PRIMARY KEY, \
                 holder VARBINARY(1024) NULL, fence BIGINT NOT NULL, \
                 taken_at DATETIME(6) NOT NULL, expires_at DATETIME(6) NULL)"
            ),
            "UTC_TIMESTAMP(6)",
        ),
        Dialect::Sqlite => (
            format!(
                "CREATE TABLE {table} (name TEXT NOT NULL PRIMARY KEY, holder TEXT, \
                 fence INTEGER NOT NULL, taken_at INTEGER NOT NULL, expires_at INTEGER)"
            ),
            "CAST(unixepoch('subsec') * 1000 AS INTEGER)",
        ),
        other => return Err(format!("no table written for {other:?}").into()),
    };
    store.executor().batch(&create).await?;
    store
        .executor()
        .batch(&format!(
            "INSERT INTO {table} (name, holder, fence, taken_at, expires_at) \
             VALUES ('report', 'old-instance', 3, {now}, NULL)"
        ))
        .await?;
    match store.verify().await {
        Err(Error::SchemaMismatch {
            mismatch,
            upgrade: Some(_),
            ..
        }) if mismatch.contains("column expires_at may be NULL") => {}
        other => return Err(format!("verify of a nullable expiry answered {other:?}").into()),
    }
    if !store.upgrade().await? {
        return Err("upgrade changed nothing".into());
    }
    store.verify().await?;
    let report = name("report");
    let fence = store
        .try_acquire(&report, &HolderId::generate(), Ttl::from_secs(30)?)
        .await?
        .ok_or("the lease without an expiry was not free after the upgrade")?;
    if fence.get() <= 3 {
        return Err(format!("took fence {fence} over the row's fence 3").into());
    }
    Ok(())
}

/// A lease table whose `name` and `holder` are declared shorter than the store writes them:
/// PostgreSQL `varchar(64)` and `varchar(16)`, MariaDB `VARBINARY(64)` and `VARBINARY(16)`
/// (every holder, `host:pid:` and 16 hexadecimal digits, is longer than 16 bytes). The control:
/// on that table an acquisition fails on the database ("value too long"; MariaDB in strict
/// mode, without which it would store a cut holder that two acquisitions could share).
/// `verify` refuses it with the SQL that widens both columns; after `upgrade` a lease with the
/// longest name (255 bytes) is taken by a holder and read back whole. On SQLite, which ignores
/// declared lengths, the same table fits and the same lease is taken as it is. `store` is on
/// `table`, which the case creates and leaves for the caller to drop.
///
/// # Errors
/// A description of the first thing that went otherwise.
///
/// # Cancel safety
/// Dropped, it leaves `table` as far as it got, for the caller to drop as after the case.
pub async fn short_name_and_holder_are_refused_then_widened<X: Execute>(
    store: &SqlStore<X>,
    table: &str,
) -> Result<(), BoxError> {
    let dialect = store.statements().dialect();
    let create = match dialect {
        Dialect::Postgres => format!(
            "CREATE TABLE {table} (name varchar(64) COLLATE \"C\" NOT NULL PRIMARY KEY, \
             holder varchar(16), fence bigint NOT NULL, taken_at timestamptz NOT NULL, \
             expires_at timestamptz NOT NULL)"
        ),
        Dialect::MySql => format!(
            "CREATE TABLE {table} (name VARBINARY(64) NOT NULL PRIMARY KEY, \
             holder VARBINARY(16) NULL, fence BIGINT NOT NULL, taken_at DATETIME(6) NOT NULL, \
             expires_at DATETIME(6) NOT NULL)"
        ),
        Dialect::Sqlite => format!(
            "CREATE TABLE {table} (name VARCHAR(64) NOT NULL PRIMARY KEY, holder VARCHAR(16), \
             fence INTEGER NOT NULL, taken_at INTEGER NOT NULL, expires_at INTEGER NOT NULL)"
        ),
        other => return Err(format!("no table written for {other:?}").into()),
    };
    store.executor().batch(&create).await?;
    let ttl = Ttl::from_secs(30)?;
    let longest = name(&"n".repeat(LeaseName::MAX_LEN));
    let take_longest = async || {
        let holder = HolderId::generate();
        let fence = store
            .try_acquire(&longest, &holder, ttl)
            .await?
            .ok_or("the longest name was not free")?;
        let info = store
            .inspect(&longest)
            .await?
            .ok_or("the lease taken is not listed")?;
        if info.holder != holder || info.fence != fence || info.name != longest {
            return Err::<(), BoxError>(format!("took {fence} as {holder}, read {info:?}").into());
        }
        Ok(())
    };
    if dialect == Dialect::Sqlite {
        store.verify().await?;
        return take_longest().await;
    }

    // The control: the store's statements fail on this table.
    match store
        .try_acquire(&name("digest"), &HolderId::generate(), ttl)
        .await
    {
        Err(Error::Store { .. }) => {}
        other => return Err(format!("acquiring with a 16-byte holder answered {other:?}").into()),
    }
    match store.verify().await {
        Err(Error::SchemaMismatch {
            mismatch,
            upgrade: Some(sql),
            ..
        }) => {
            for column in ["name", "holder"] {
                if !mismatch.contains(&format!("column {column} is ")) {
                    return Err(format!("verify missed the short {column}: {mismatch}").into());
                }
            }
            let widened: &[&str] = match dialect {
                Dialect::Postgres => &[
                    "ALTER COLUMN name TYPE text COLLATE \"C\"",
                    "ALTER COLUMN holder TYPE text",
                ],
                _ => &[
                    "MODIFY name VARBINARY(255) NOT NULL",
                    "MODIFY holder VARBINARY(1024) NULL",
                ],
            };
            for needed in widened {
                if !sql.contains(needed) {
                    return Err(format!("the upgrade has no {needed}: {sql}").into());
                }
            }
        }
        other => return Err(format!("verify of a 16-byte holder answered {other:?}").into()),
    }
    if !store.upgrade().await? {
        return Err("upgrade changed nothing".into());
    }
    store.verify().await?;
    take_longest().await
}

/// How long [`upgrade_gives_up_on_a_locked_table`]'s other transaction holds the table.
const HOLD: Duration = Duration::from_secs(20);
/// How soon the upgrade must give up on a table held for [`HOLD`]: its wait is 5 s.
const GIVES_UP_WITHIN: Duration = Duration::from_secs(15);

/// The story's table (see [`story_table`]), read by another transaction that stays open for
/// 20 s (PostgreSQL: the message `SELECT ... FROM table; SELECT pg_sleep(20)`, one implicit
/// transaction holding its `ACCESS SHARE` lock; MariaDB: `START TRANSACTION`, a read, a
/// 20 s `SLEEP`, holding the table's metadata lock), sent on a connection of `store`'s pool
/// (which needs two). Once that transaction holds the table, `upgrade` fails within 15 s (it
/// waits 5 s for the lock) with a transient store error whose cause says to run it again
/// when no long transaction holds the table; the table is unchanged (`verify` still finds no
/// fence); once the transaction has ended, `upgrade` runs. Without the bound, the upgrade's
/// `ALTER TABLE` waits the 20 s out, every statement on the table queued behind it, and then
/// succeeds. `store` is on `table`, which the case creates and leaves for the caller to drop.
///
/// # Errors
/// A description of the first thing that went otherwise, or that the store is SQLite's.
///
/// # Cancel safety
/// Dropped, it leaves `table` as far as it got (the upgrade ran entirely or not at all); the
/// other transaction ends on its own within 20 s.
pub async fn upgrade_gives_up_on_a_locked_table<X: Execute, R: Runtime>(
    store: &SqlStore<X>,
    table: &str,
    runtime: R,
) -> Result<(), BoxError> {
    let secs = HOLD.as_secs();
    let marker = format!("{table}_held");
    let (hold, held) = match store.statements().dialect() {
        Dialect::Postgres => (
            format!("SELECT count(*) FROM {table}; SELECT pg_sleep({secs}) AS {marker};"),
            format!(
                "SELECT count(*) FROM pg_locks WHERE relation = to_regclass('{table}') \
                 AND granted AND pid <> pg_backend_pid()"
            ),
        ),
        Dialect::MySql => (
            format!(
                "START TRANSACTION; SELECT COUNT(*) FROM {table}; SELECT SLEEP({secs}) AS {marker}; \
                 COMMIT;"
            ),
            mariadb_sleeping(&marker),
        ),
        other => return Err(format!("no lock held on {other:?}").into()),
    };
    create_story_table(store, table).await?;
    upgrade_gives_up_while_held(store, &hold, &held, "column fence is missing", runtime).await
}

/// MariaDB: an earlier lease table whose `fence` may be `NULL`, one row without a fence, which
/// another transaction has written (a service of the old version renewing it) and keeps open
/// for 20 s. The upgrade's `UPDATE` that fills the missing fence waits for that row's lock:
/// bounded to 5 s like the `ALTER TABLE`'s wait for the table, so `upgrade` fails within 15 s
/// with a transient store error whose cause says to run it again, the table's fence still
/// nullable; without the bound it would wait `innodb_lock_wait_timeout` (50 s by default),
/// every renewal of the rows it locked queued behind it. Once the transaction has ended,
/// `upgrade` runs. `store` is on `table` (its pool needs two connections), which the case
/// creates and leaves for the caller to drop.
///
/// # Errors
/// A description of the first thing that went otherwise, or that the store is not MariaDB's.
///
/// # Cancel safety
/// Dropped, it leaves `table` as far as it got; the other transaction ends on its own within
/// 20 s.
pub async fn mariadb_upgrade_gives_up_on_a_written_row<X: Execute, R: Runtime>(
    store: &SqlStore<X>,
    table: &str,
    runtime: R,
) -> Result<(), BoxError> {
    if store.statements().dialect() != Dialect::MySql {
        return Err("a written row's lock is MariaDB's case".into());
    }
    let secs = HOLD.as_secs();
    let marker = format!("{table}_held");
    store
        .executor()
        .batch(&format!(
            "CREATE TABLE {table} (name VARBINARY(255) NOT NULL PRIMARY KEY, \
             holder VARBINARY(1024) NULL, fence BIGINT NULL, taken_at DATETIME(6) NOT NULL, \
             expires_at DATETIME(6) NOT NULL);\n\
             INSERT INTO {table} VALUES ('report', 'old-service', NULL, UTC_TIMESTAMP(6), \
             UTC_TIMESTAMP(6) + INTERVAL 1 HOUR);"
        ))
        .await?;
    let hold = format!(
        "START TRANSACTION; UPDATE {table} SET expires_at = expires_at WHERE name = 'report'; \
         SELECT SLEEP({secs}) AS {marker}; COMMIT;"
    );
    let held = mariadb_sleeping(&marker);
    upgrade_gives_up_while_held(store, &hold, &held, "column fence", runtime).await
}

/// MariaDB: how many other sessions sleep in a statement that names `marker` (a transaction
/// that holds the table, in its `SLEEP`).
fn mariadb_sleeping(marker: &str) -> String {
    format!(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'User sleep' \
         AND INFO LIKE '%{marker}%' AND ID <> CONNECTION_ID()"
    )
}

/// Runs `hold` (a transaction that holds `store`'s table for [`HOLD`]) on a connection of the
/// store's pool and, once `held` (a count of such holders) counts one, the upgrade: it must
/// fail within [`GIVES_UP_WITHIN`] with a transient store error whose cause says to run it
/// again, `verify` must still find the mismatch naming `still`; once `hold` has ended, the
/// upgrade must run and the table verify.
async fn upgrade_gives_up_while_held<X: Execute, R: Runtime>(
    store: &SqlStore<X>,
    hold: &str,
    held: &str,
    still: &str,
    runtime: R,
) -> Result<(), BoxError> {
    let holding = store.executor().batch(hold);
    let checked = async {
        let waited = Instant::now();
        loop {
            let rows = store.executor().ints(Query::new(held, Vec::new())).await?;
            if rows.first().is_some_and(|&count| count > 0) {
                break;
            }
            if waited.elapsed() > Duration::from_secs(10) {
                return Err::<(), BoxError>("the other transaction never held the table".into());
            }
            runtime.sleep(Duration::from_millis(50)).await;
        }
        let started = Instant::now();
        let upgraded = store.upgrade().await;
        let took = started.elapsed();
        match upgraded {
            Err(
                ref error @ Error::Store {
                    kind: StoreErrorKind::Transient,
                    ..
                },
            ) if took < GIVES_UP_WITHIN => {
                let line = ErrorChain(error).to_string();
                if !line.contains("run the upgrade again when no long transaction holds the table")
                {
                    return Err(format!("the failed upgrade reads {line:?}").into());
                }
            }
            other => {
                return Err(format!(
                    "upgrade of a table another transaction held answered {other:?} after \
                     {took:?}"
                )
                .into());
            }
        }
        match store.verify().await {
            Err(Error::SchemaMismatch { mismatch, .. }) if mismatch.contains(still) => Ok(()),
            other => Err(format!("after the failed upgrade, verify answered {other:?}").into()),
        }
    };
    let (held, checked) = futures::future::join(holding, checked).await;
    checked?;
    held?;
    if !store.upgrade().await? {
        return Err("once the other transaction ended, upgrade changed nothing".into());
    }
    store.verify().await?;
    Ok(())
}

/// SQLite: a lease table whose service wrote its times in Unix seconds (`unixepoch()`), with
/// `report` held by [`SEED_HOLDER`] for another hour and `digest` expired a minute ago. The
/// control: the store's statements, comparing milliseconds, read the live `report` as long
/// expired and hand it to another holder. `verify` refuses the table, saying its times look
/// like seconds, with the SQL that makes them milliseconds; after `upgrade` the live lease
/// still excludes our holders with its hour left, and the expired one is taken. `store` is on
/// `table`, which the case creates and leaves for the caller to drop.
///
/// # Errors
/// A description of the first thing that went otherwise, or that the store is not SQLite's.
///
/// # Cancel safety
/// Dropped, it leaves `table` as far as it got, for the caller to drop as after the case.
pub async fn sqlite_times_in_seconds_are_refused_then_converted<X: Execute>(
    store: &SqlStore<X>,
    table: &str,
) -> Result<(), BoxError> {
    if store.statements().dialect() != Dialect::Sqlite {
        return Err("times in seconds are SQLite's".into());
    }
    let run = |sql: String| async move { store.executor().batch(&sql).await };
    run(format!(
        "CREATE TABLE {table} (name TEXT NOT NULL PRIMARY KEY, holder TEXT, \
         fence INTEGER NOT NULL DEFAULT 0, taken_at INTEGER NOT NULL DEFAULT (unixepoch()), \
         expires_at INTEGER NOT NULL)"
    ))
    .await?;
    let rows = format!(
        "DELETE FROM {table};\n\
         INSERT INTO {table} (name, holder, expires_at) VALUES \
         ('report', '{SEED_HOLDER}', unixepoch() + 3600), ('digest', 'old-instance', unixepoch() - 60);"
    );
    run(rows.clone()).await?;
    let ttl = Ttl::from_secs(30)?;

    // The control: the live lease, read in milliseconds, is taken.
    if store
        .try_acquire(&name("report"), &HolderId::generate(), ttl)
        .await?
        .is_none()
    {
        return Err(
            "the control: the live lease in seconds excluded us, so the case could not \
                    tell a check of the unit from none"
                .into(),
        );
    }
    run(rows).await?;

    for (what, result) in [
        ("setup", store.setup().await),
        ("verify", store.verify().await),
    ] {
        match result {
            Err(Error::SchemaMismatch {
                mismatch,
                upgrade: Some(sql),
                ..
            }) if mismatch.contains(
                "the times look like Unix seconds (taken_at in 2 rows, expires_at in 2 rows",
            ) && sql.contains("expires_at * 1000") => {}
            other => return Err(format!("{what} of times in seconds answered {other:?}").into()),
        }
    }
    if !store.upgrade().await? {
        return Err("upgrade changed nothing".into());
    }
    store.verify().await?;
    if store.upgrade().await? {
        return Err("a second upgrade changed the table again".into());
    }
    story_leases_survived(store, ttl).await
}

/// SQLite: a lease table whose service wrote its times in Unix microseconds, with `report`
/// expired a minute ago by that service's reading. The control: the store's statements,
/// comparing milliseconds, read it as held for millennia and never hand it over. `setup` and
/// `verify` refuse the table, saying its times look finer than milliseconds, without SQL (only
/// who wrote them knows their unit), and accept it once they are milliseconds. `store` is on
/// `table`, which the case creates and leaves for the caller to drop.
///
/// # Errors
/// A description of the first thing that went otherwise, or that the store is not SQLite's.
///
/// # Cancel safety
/// Dropped, it leaves `table` as far as it got, for the caller to drop as after the case.
pub async fn sqlite_times_finer_than_milliseconds_are_refused<X: Execute>(
    store: &SqlStore<X>,
    table: &str,
) -> Result<(), BoxError> {
    if store.statements().dialect() != Dialect::Sqlite {
        return Err("times without a declared unit are SQLite's".into());
    }
    let run = |sql: String| async move { store.executor().batch(&sql).await };
    run(format!(
        "CREATE TABLE {table} (name TEXT NOT NULL PRIMARY KEY, holder TEXT, \
         fence INTEGER NOT NULL, taken_at INTEGER NOT NULL, expires_at INTEGER NOT NULL);\n\
         INSERT INTO {table} VALUES ('report', 'old-instance', 1, \
         (unixepoch() - 120) * 1000000, (unixepoch() - 60) * 1000000);"
    ))
    .await?;
    let ttl = Ttl::from_secs(30)?;
    if store
        .try_acquire(&name("report"), &HolderId::generate(), ttl)
        .await?
        .is_some()
    {
        return Err(
            "the control: the expired lease in microseconds was taken, so the case could not \
             tell a check of the unit from none"
                .into(),
        );
    }
    for (what, result) in [
        ("setup", store.setup().await),
        ("verify", store.verify().await),
    ] {
        match result {
            Err(Error::SchemaMismatch {
                mismatch,
                upgrade: None,
                other_kind: false,
                ..
            }) if mismatch.contains(
                "the times look finer than milliseconds (taken_at in 1 row, expires_at in 1 row",
            ) => {}
            other => {
                return Err(format!("{what} of times in microseconds answered {other:?}").into());
            }
        }
    }
    // Converted by hand, as the message says: accepted, and the expired lease is taken.
    run(format!(
        "UPDATE {table} SET taken_at = taken_at / 1000, expires_at = expires_at / 1000"
    ))
    .await?;
    store.verify().await?;
    match store
        .try_acquire(&name("report"), &HolderId::generate(), ttl)
        .await?
    {
        Some(_) => Ok(()),
        None => Err("the lease expired a minute ago was not taken once converted".into()),
    }
}

/// A table with the store's columns and key that keeps its rows where the store's guarantees do
/// not hold is refused, without SQL to run, and accepted once converted, which shows that the
/// storage alone was refused. On PostgreSQL an `UNLOGGED` table (a crash empties it, a standby
/// has none of its rows: every lease free while its holder runs) and then a `DEFERRABLE`
/// primary key on `name` (no conflict target for `ON CONFLICT`: every acquisition fails); on
/// MariaDB a MyISAM table (no transactions: a fenced check's row lock ends with its statement,
/// so a takeover no longer waits for the fenced transaction, and Galera does not replicate it).
/// SQLite has one way to keep a table and is not asked.
///
/// # Errors
/// When `verify` accepts a table it should refuse or refuses it for another reason, offers SQL
/// for it, or refuses the converted table.
pub async fn unsafe_storage_is_refused<X: Execute>(
    store: &SqlStore<X>,
    table: &str,
) -> Result<(), BoxError> {
    let create = store.statements().create_table();
    let (unsafe_create, unsafe_word, convert) = match store.statements().dialect() {
        Dialect::Postgres => (
            create.replacen("CREATE TABLE", "CREATE UNLOGGED TABLE", 1),
            "UNLOGGED",
            format!("ALTER TABLE {table} SET LOGGED"),
        ),
        Dialect::MySql => (
            create.replacen("ENGINE = InnoDB", "ENGINE = MyISAM", 1),
            "storage engine is myisam",
            format!("ALTER TABLE {table} ENGINE = InnoDB"),
        ),
        other => return Err(format!("no unsafe storage written for {other:?}").into()),
    };
    if unsafe_create == create {
        return Err(format!("the store's DDL did not change: {create}").into());
    }
    store.executor().batch(&unsafe_create).await?;
    // A lease table all the same: the refusal says how to change it, not to use another.
    refused_for(store, unsafe_word, false).await?;
    store.executor().batch(&convert).await?;
    store.verify().await?;

    if store.statements().dialect() == Dialect::Postgres {
        store
            .executor()
            .batch(&format!(
                "DROP TABLE {table};\n{}",
                create.replacen("PRIMARY KEY", "PRIMARY KEY DEFERRABLE", 1)
            ))
            .await?;
        refused_for(store, "column name is not the primary key", true).await?;
    }
    Ok(())
}

/// A PostgreSQL lease table whose times were declared in whole seconds (`timestamptz(0)`,
/// which rounds every time written to it by up to half a second either way, so an expiry may
/// be stored before the holder's deadline): `verify` refuses it, saying the store needs
/// microseconds, with the `ALTER` that gives both columns theirs; `upgrade` runs it, keeping
/// the lease held in the table with its holder and fence, and `verify` then accepts the table.
/// `store` is on `table`, which the case creates and leaves for the caller to drop.
///
/// # Errors
/// A description of the first thing that went otherwise, or that the store is not
/// PostgreSQL's.
///
/// # Cancel safety
/// Dropped, it leaves `table` as far as it got, for the caller to drop as after the case.
pub async fn postgres_coarse_times_are_refused_then_upgraded<X: Execute>(
    store: &SqlStore<X>,
    _table: &str,
) -> Result<(), BoxError> {
    if store.statements().dialect() != Dialect::Postgres {
        return Err("times declared in whole seconds need a PostgreSQL store".into());
    }
    let create = store.statements().create_table();
    let coarse = create.replace("timestamptz", "timestamptz(0)");
    if coarse == create {
        return Err(format!("the store's DDL names no timestamptz: {create}").into());
    }
    store.executor().batch(&coarse).await?;
    let (report, holder) = (name("report"), HolderId::generate());
    let fence = store
        .try_acquire(&report, &holder, Ttl::from_secs(600)?)
        .await?
        .ok_or("report was held in a new table")?;
    match store.verify().await {
        Err(Error::SchemaMismatch {
            mismatch,
            upgrade: Some(sql),
            other_kind: false,
            ..
        }) if mismatch.contains("the store needs microseconds")
            && sql.contains("ALTER COLUMN taken_at TYPE timestamptz")
            && sql.contains("ALTER COLUMN expires_at TYPE timestamptz")
            && !sql.contains("timestamptz(") => {}
        other => {
            return Err(format!(
                "verify answered {other:?}, where it should refuse times in whole seconds \
                 with the SQL that gives them microseconds"
            )
            .into());
        }
    }
    if !store.upgrade().await? {
        return Err("upgrade found nothing to do on times in whole seconds".into());
    }
    store.verify().await?;
    match store.inspect(&report).await? {
        Some(info) if info.holder == holder && info.fence == fence => Ok(()),
        other => Err(format!(
            "after the upgrade report reads {other:?}, not held by {holder} with fence {fence}"
        )
        .into()),
    }
}

/// `store`'s `verify` refuses its table with a mismatch that says `why`, and no SQL, as a
/// table of another kind than a lease table when `other_kind`.
async fn refused_for<X: Execute>(
    store: &SqlStore<X>,
    why: &str,
    other_kind: bool,
) -> Result<(), BoxError> {
    match store.verify().await {
        Err(Error::SchemaMismatch {
            mismatch,
            upgrade: None,
            other_kind: found,
            ..
        }) if mismatch.contains(why) && found == other_kind => Ok(()),
        other => Err(format!(
            "verify answered {other:?}, where it should refuse{}: {why}",
            if other_kind {
                " as another kind of table"
            } else {
                " a lease table"
            }
        )
        .into()),
    }
}

/// A PostgreSQL lease table adopted from a service that marked "held until released" with an
/// expiry of `'infinity'` (and a `taken_at` of `'-infinity'`): `inspect` and `list` read the
/// row, its times at the latest and earliest the store's microseconds hold, not expired, its
/// holder and fence as written, beside a row of the store's own; the lease stays held (no other
/// holder takes it) until its holder releases it, after which the next holder takes it with a
/// greater fence. Without the bound on the times they read (the control), every read of the
/// table fails: `'infinity'` has no microseconds. `store` is on `table`, which the case creates
/// with `setup` and leaves for the caller to drop.
///
/// # Errors
/// A description of the first thing that went otherwise, or that the store is not
/// PostgreSQL's.
///
/// # Cancel safety
/// Dropped, it leaves `table` as far as it got, for the caller to drop as after the case.
pub async fn postgres_infinite_times_are_read<X: Execute>(
    store: &SqlStore<X>,
    table: &str,
) -> Result<(), BoxError> {
    if store.statements().dialect() != Dialect::Postgres {
        return Err("an expiry of 'infinity' needs a PostgreSQL store".into());
    }
    store.setup().await?;
    let ttl = Ttl::from_secs(30)?;
    let ours = name("ours");
    store
        .try_acquire(&ours, &HolderId::generate(), ttl)
        .await?
        .ok_or("a fresh table refused a lease")?;
    store
        .executor()
        .batch(&format!(
            "INSERT INTO {table} (name, holder, fence, taken_at, expires_at) \
             VALUES ('{name}', '{SEED_HOLDER}', 7, '-infinity', 'infinity')",
            name = name("forever").as_str()
        ))
        .await?;
    let forever = name("forever");
    // The control: the times read as microseconds without their bound fail.
    let unbounded = format!("SELECT (extract(epoch FROM expires_at) * 1000000)::int8 FROM {table}");
    if store.executor().batch(&unbounded).await.is_ok() {
        return Err(
            "the control read 'infinity' as microseconds: the case would show nothing".into(),
        );
    }
    let read = store
        .inspect(&forever)
        .await?
        .ok_or("inspect found no lease held until released")?;
    let latest = lease_sql::time_from_micros(i64::MAX);
    let earliest = lease_sql::time_from_micros(i64::MIN);
    if (
        read.holder.as_str(),
        read.fence.get(),
        read.taken_at,
        read.expires_at,
    ) != (SEED_HOLDER, 7, earliest, latest)
        || read.is_expired()
    {
        return Err(format!(
            "inspect read the lease held until released as {read:?}, where it holds \
             '{SEED_HOLDER}', fence 7, taken at the earliest time, expiring at the latest"
        )
        .into());
    }
    let listed = store.list().await?;
    let names: Vec<&str> = listed.iter().map(|info| info.name.as_str()).collect();
    let times = |info: &lease_core::LeaseInfo| {
        (
            info.holder.clone(),
            info.fence,
            info.taken_at,
            info.expires_at,
        )
    };
    if names != [forever.as_str(), ours.as_str()] || times(&listed[0]) != times(&read) {
        return Err(format!("list read {listed:?}, where it should read both leases").into());
    }
    let other = HolderId::generate();
    if let Some(fence) = store.try_acquire(&forever, &other, ttl).await? {
        return Err(format!("a lease held until released was taken, fence {fence}").into());
    }
    let seed = HolderId::from_stored(SEED_HOLDER.to_owned());
    if !store.release(&forever, &seed, Duration::ZERO).await? {
        return Err("its holder could not release the lease held until released".into());
    }
    let fence = store
        .try_acquire(&forever, &other, ttl)
        .await?
        .ok_or("the lease held until released was not free after its release")?;
    if fence.get() <= 7 {
        return Err(format!("took fence {fence} over the row's fence 7").into());
    }
    Ok(())
}

/// The part of the cases of a table whose names compare without case that reads the same on
/// every database: on `store`'s table, fresh and empty, `Sweep` and `sweep` are one lease (the
/// control); `verify` refuses the table, the refusal holding `why`, with the SQL that upgrades
/// it; after `upgrade` the two names are two leases, the lease held before the upgrade is
/// still its holder's, and one `renew_many` renews both.
async fn one_lease_until_upgraded<X: Execute>(
    store: &SqlStore<X>,
    why: &str,
) -> Result<(), BoxError> {
    let ttl = Ttl::from_secs(30)?;
    let (first, second) = (HolderId::generate(), HolderId::generate());
    let (upper, lower) = (name("Sweep"), name("sweep"));
    store
        .try_acquire(&upper, &first, ttl)
        .await?
        .ok_or("a fresh table refused a lease")?;
    if store.try_acquire(&lower, &second, ttl).await?.is_some() {
        return Err(
            "the control: `sweep` was taken beside `Sweep` on a table that compares names \
             without case, so the case would show nothing"
                .into(),
        );
    }
    match store.verify().await {
        Err(Error::SchemaMismatch {
            mismatch,
            upgrade: Some(_),
            other_kind: false,
            ..
        }) if mismatch.contains(why) => {}
        other => return Err(format!("verify of a name without case answered {other:?}").into()),
    }
    if !store.upgrade().await? {
        return Err("upgrade changed nothing".into());
    }
    store.verify().await?;
    store
        .try_acquire(&lower, &second, ttl)
        .await?
        .ok_or("after the upgrade `sweep` was still one lease with `Sweep`")?;
    if let Some(fence) = store.try_acquire(&upper, &second, ttl).await? {
        return Err(format!("the lease held through the upgrade was taken, fence {fence}").into());
    }
    let renewed = store
        .renew_many(&[(upper, first), (lower, second)], ttl)
        .await?;
    if renewed != [true, true] {
        return Err(format!("renew_many of both names answered {renewed:?}").into());
    }
    Ok(())
}

/// SQLite: a lease table whose service wrote times that are no integers (`unixepoch('subsec')
/// * 1000`, as a service in a language with floating-point time may), which SQLite keeps as
/// `REAL` in an `INTEGER` column, and one lease "held until released" by the greatest
/// millisecond an `INTEGER` holds, too far out for microseconds: `report` held by
/// [`SEED_HOLDER`] for another hour with fence 3, `forever` with fence 7. The control: SQLite
/// reads both times, made microseconds, as `REAL`. `inspect` and `list` read them (the hour
/// to the millisecond, `forever` at the latest time the store's microseconds hold), and both
/// leases exclude another holder. Then a table in seconds with a fraction
/// (`unixepoch('subsec')`), `{table}_seconds`: after its `upgrade` its times are whole
/// milliseconds. `store` is on `table`, which the case creates with `setup` and leaves for the
/// caller to drop; the case drops `{table}_seconds`.
///
/// # Errors
/// A description of the first thing that went otherwise, or that the store is not SQLite's.
///
/// # Cancel safety
/// Dropped, it leaves `table` and `{table}_seconds` as far as it got, for the caller to drop.
pub async fn sqlite_real_times_are_read<X: Execute + Clone>(
    store: &SqlStore<X>,
    table: &str,
) -> Result<(), BoxError> {
    if store.statements().dialect() != Dialect::Sqlite {
        return Err("times kept as REAL need a SQLite store".into());
    }
    store.setup().await?;
    let (report, forever) = (name("report"), name("forever"));
    store
        .executor()
        .batch(&format!(
            "INSERT INTO {table} (name, holder, fence, taken_at, expires_at) VALUES \
             ('{report}', '{SEED_HOLDER}', 3, CAST(unixepoch() AS INTEGER) * 1000 + 0.5, \
              CAST(unixepoch() AS INTEGER) * 1000 + 3600000.5), \
             ('{forever}', '{SEED_HOLDER}', 7, CAST(unixepoch() AS INTEGER) * 1000, \
              9223372036854775807)",
            report = report.as_str(),
            forever = forever.as_str()
        ))
        .await?;
    let kinds = store
        .executor()
        .text_pairs(Query::new(
            format!(
                "SELECT typeof(taken_at * 1000), typeof(expires_at * 1000) FROM {table} \
                 ORDER BY name"
            ),
            Vec::new(),
        ))
        .await?;
    let real = |kind: &str| kind == "real";
    if kinds.len() != 2 || !real(&kinds[0].1) || !real(&kinds[1].0) || !real(&kinds[1].1) {
        return Err(format!(
            "the control: SQLite read the times made microseconds as {kinds:?}, not REAL, so \
             the case would show nothing"
        )
        .into());
    }
    let now = SystemTime::now();
    let read = store
        .inspect(&report)
        .await?
        .ok_or("inspect found no lease with REAL times")?;
    let left = read.expires_at.duration_since(now).unwrap_or_default();
    if (read.holder.as_str(), read.fence.get()) != (SEED_HOLDER, 3)
        || read.is_expired()
        || left < Duration::from_secs(3500)
        || left > Duration::from_secs(3700)
        || read.expires_at.duration_since(read.taken_at).ok() != Some(Duration::from_secs(3600))
    {
        return Err(format!(
            "inspect read the lease with REAL times as {read:?}, where it holds \
             '{SEED_HOLDER}', fence 3, for another hour"
        )
        .into());
    }
    let far = store
        .inspect(&forever)
        .await?
        .ok_or("inspect found no lease held until released")?;
    if far.expires_at != lease_sql::time_from_micros(i64::MAX) || far.fence.get() != 7 {
        return Err(format!(
            "inspect read the lease held until released as {far:?}, where it holds fence 7 \
             to the latest time"
        )
        .into());
    }
    let listed = store.list().await?;
    let names: Vec<&str> = listed.iter().map(|info| info.name.as_str()).collect();
    if names != [forever.as_str(), report.as_str()] {
        return Err(format!("list read {listed:?}, where it should read both leases").into());
    }
    let other = HolderId::generate();
    let ttl = Ttl::from_secs(30)?;
    for lease in [&report, &forever] {
        if let Some(fence) = store.try_acquire(lease, &other, ttl).await? {
            return Err(format!("{lease} was taken while held, fence {fence}").into());
        }
    }
    let seconds = format!("{table}_seconds");
    let converted = seconds_with_a_fraction(store, &seconds).await;
    store
        .executor()
        .batch(&format!("DROP TABLE IF EXISTS {seconds}"))
        .await?;
    converted
}

/// A lease table `table` in seconds with a fraction, upgraded: its times must then be whole
/// milliseconds.
async fn seconds_with_a_fraction<X: Execute + Clone>(
    store: &SqlStore<X>,
    table: &str,
) -> Result<(), BoxError> {
    let on_table = store.clone().on(table)?;
    on_table.setup().await?;
    store
        .executor()
        .batch(&format!(
            "INSERT INTO {table} (name, holder, fence, taken_at, expires_at) VALUES \
             ('report', '{SEED_HOLDER}', 3, unixepoch() + 0.0004, unixepoch() + 3600.0004)"
        ))
        .await?;
    if on_table.verify().await.is_ok() {
        return Err("a table in seconds with a fraction was accepted".into());
    }
    if !on_table.upgrade().await? {
        return Err("upgrade of a table in seconds changed nothing".into());
    }
    let kinds = store
        .executor()
        .text_pairs(Query::new(
            format!("SELECT typeof(taken_at), typeof(expires_at) FROM {table}"),
            Vec::new(),
        ))
        .await?;
    if kinds != [("integer".to_owned(), "integer".to_owned())] {
        return Err(format!(
            "after the upgrade, seconds with a fraction were kept as {kinds:?}, not whole \
             milliseconds"
        )
        .into());
    }
    Ok(())
}

/// A PostgreSQL lease table whose `name` compares by a nondeterministic collation (an ICU
/// collation created with `deterministic = false`, as a service may have made its keys
/// case-blind). The control first: on that table `Sweep` and `sweep` are one lease, its holder
/// keeping the other name from everybody. `verify` refuses it with the `ALTER TABLE` that makes
/// the name compare bytes; after `upgrade` the two names are two leases, the lease held before
/// the upgrade is still its holder's, and one `renew_many` renews both. Then a table with a
/// byte-wise key beside a unique index on `name` by that collation (`{table}_beside`): its
/// control shows the two names one lease there too, and `verify` refuses it without SQL (no
/// change of the column drops the index). `store` is on `table`, a plain table name, which the
/// case creates; the case drops it at its end, with `{table}_beside` and the collation
/// `{table}_ci` it made, whatever its outcome.
///
/// # Errors
/// A description of the first thing that went otherwise, or that the store is not
/// PostgreSQL's, or that the server has no ICU collations.
///
/// # Cancel safety
/// Dropped, it leaves `table`, `{table}_beside` and `{table}_ci` as far as it got, for the
/// caller to drop.
pub async fn postgres_nondeterministic_name_is_refused_then_altered<X: Execute + Clone>(
    store: &SqlStore<X>,
    table: &str,
) -> Result<(), BoxError> {
    if store.statements().dialect() != Dialect::Postgres {
        return Err("a nondeterministic collation needs a PostgreSQL store".into());
    }
    let (collation, beside) = (format!("{table}_ci"), format!("{table}_beside"));
    let outcome = nondeterministic_name(store, table, &collation, &beside).await;
    let dropped = store
        .executor()
        .batch(&format!(
            "DROP TABLE IF EXISTS {beside}; DROP TABLE IF EXISTS {table}; \
             DROP COLLATION IF EXISTS {collation}"
        ))
        .await;
    outcome?;
    dropped
}

/// [`postgres_nondeterministic_name_is_refused_then_altered`] but its clearing up.
async fn nondeterministic_name<X: Execute + Clone>(
    store: &SqlStore<X>,
    table: &str,
    collation: &str,
    beside: &str,
) -> Result<(), BoxError> {
    let columns = "holder text, fence bigint NOT NULL, taken_at timestamptz NOT NULL, \
                   expires_at timestamptz NOT NULL";
    store
        .executor()
        .batch(&format!(
            "CREATE COLLATION {collation} \
                 (provider = icu, locale = 'und-u-ks-level2', deterministic = false);\n\
             CREATE TABLE {table} (name text COLLATE {collation} NOT NULL PRIMARY KEY, {columns})"
        ))
        .await?;
    one_lease_until_upgraded(store, "nondeterministic collation").await?;
    let ttl = Ttl::from_secs(30)?;
    let (first, second) = (HolderId::generate(), HolderId::generate());
    let (upper, lower) = (name("Sweep"), name("sweep"));
    store
        .executor()
        .batch(&format!(
            "CREATE TABLE {beside} (name text COLLATE \"C\" NOT NULL PRIMARY KEY, {columns});\n\
             CREATE UNIQUE INDEX {beside}_blind ON {beside} (name COLLATE {collation})"
        ))
        .await?;
    let on_beside = store.clone().on(beside)?;
    on_beside
        .try_acquire(&upper, &first, ttl)
        .await?
        .ok_or("a fresh table refused a lease")?;
    if on_beside.try_acquire(&lower, &second, ttl).await?.is_some() {
        return Err(
            "the control: `sweep` was taken beside `Sweep` on a table with a unique index that \
             compares names without case, so the case would show nothing"
                .into(),
        );
    }
    match on_beside.verify().await {
        Err(Error::SchemaMismatch {
            mismatch,
            upgrade: None,
            other_kind: false,
            ..
        }) if mismatch.contains("nondeterministic collation") => Ok(()),
        other => Err(format!(
            "verify of a binary key beside an index by a nondeterministic collation answered \
             {other:?}"
        )
        .into()),
    }
}

/// A SQLite lease table whose `name` compares by a collation (`TEXT COLLATE NOCASE PRIMARY
/// KEY`, as a service may have declared it). The control first: on that table `Sweep` and
/// `sweep` are one lease, its holder keeping the other name from everybody. `verify` refuses it
/// with the SQL that rebuilds it (the store compares bytes); after `upgrade` the two names are
/// two leases, the lease held before the upgrade is still its holder's, and one `renew_many`
/// renews both. Then a table with a binary key beside a unique index on `name COLLATE NOCASE`
/// (`{table}_beside`, which the case drops): refused too, as names collide in that index.
/// `store` is on `table`, a plain table name, which the case creates and leaves for the caller
/// to drop.
///
/// # Errors
/// A description of the first thing that went otherwise, or that the store is not SQLite's.
///
/// # Cancel safety
/// Dropped, it leaves `table` as far as it got, for the caller to drop as after the case, and
/// `{table}_beside` where it got that far.
pub async fn sqlite_collated_name_is_refused_then_rebuilt<X: Execute + Clone>(
    store: &SqlStore<X>,
    table: &str,
) -> Result<(), BoxError> {
    if store.statements().dialect() != Dialect::Sqlite {
        return Err("a name compared without case needs a SQLite store".into());
    }
    store
        .executor()
        .batch(&format!(
            "CREATE TABLE {table} (name TEXT COLLATE NOCASE NOT NULL PRIMARY KEY, holder TEXT, \
             fence INTEGER NOT NULL, taken_at INTEGER NOT NULL, expires_at INTEGER NOT NULL)"
        ))
        .await?;
    one_lease_until_upgraded(store, "compared by a collation").await?;
    let beside = format!("{table}_beside");
    store
        .executor()
        .batch(&format!(
            "CREATE TABLE {beside} (name TEXT NOT NULL PRIMARY KEY, holder TEXT, \
             fence INTEGER NOT NULL, taken_at INTEGER NOT NULL, expires_at INTEGER NOT NULL);\n\
             CREATE UNIQUE INDEX {beside}_nocase ON {beside} (name COLLATE NOCASE);"
        ))
        .await?;
    let verdict = store.clone().on(&beside)?.verify().await;
    store
        .executor()
        .batch(&format!("DROP TABLE {beside}"))
        .await?;
    match verdict {
        Err(Error::SchemaMismatch {
            mismatch,
            upgrade: Some(_),
            ..
        }) if mismatch.contains("compared by a collation") => Ok(()),
        other => Err(format!(
            "verify of a binary key beside an index without case answered {other:?}"
        )
        .into()),
    }
}
