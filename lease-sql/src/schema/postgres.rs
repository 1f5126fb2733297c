//! PostgreSQL's schema check: the catalog query and which types fit.

use super::{Column, Facts, Fit, Fix};

/// One row per column of the table `$1` names (quoted, resolved by the search path as the
/// store's statements are): its name and
/// `type;nullable;default;key;;storage;nondeterministic;collated_key`, where `key` says the
/// column alone is the primary key or a unique index without a predicate, checked at once
/// (not `DEFERRABLE`) and valid (not left half-built by a failed `CREATE INDEX CONCURRENTLY`):
/// what `ON CONFLICT (name)` needs. A `varchar` carries its declared length
/// (`character varying(36)`), a `timestamptz` its declared precision (`timestamp(3) with time
/// zone`; `timestamp with time zone` without one); other types are named without theirs.
/// `storage` is the table's persistence, `permanent`,
/// `unlogged` or `temporary`; the empty part before it is MariaDB's character set.
/// `nondeterministic` is the column's collation where it is nondeterministic (an ICU collation
/// created with `deterministic = false`, under which `Sweep` and `sweep`, or texts that differ
/// in accents, may be equal), `collated_key` a unique index on the column alone, of the kind
/// `key` counts, whose collation is nondeterministic and not the column's, as
/// `index collate collation` (the first by name); each empty where there is none. No rows
/// when the table does not exist.
pub(super) const COLUMNS: &str = "\
SELECT a.attname::text,
       concat_ws(';',
           format_type(a.atttypid, CASE WHEN a.atttypid IN ('character varying'::regtype, 'timestamptz'::regtype) THEN a.atttypmod END),
           CASE WHEN a.attnotnull THEN 'NO' ELSE 'YES' END,
           CASE WHEN a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '' THEN '1' ELSE '0' END,
           CASE WHEN EXISTS (
               SELECT 1 FROM pg_index i
               WHERE i.indrelid = a.attrelid AND i.indisunique AND i.indnkeyatts = 1
                   AND i.indkey[0] = a.attnum AND i.indpred IS NULL
                   AND i.indimmediate AND i.indisvalid
           ) THEN '1' ELSE '0' END,
           '',
           (SELECT CASE c.relpersistence WHEN 'p' THEN 'permanent' WHEN 'u' THEN 'unlogged' ELSE 'temporary' END
            FROM pg_class c WHERE c.oid = a.attrelid),
           coalesce((SELECT quote_ident(co.collname::text) FROM pg_collation co
                     WHERE co.oid = a.attcollation AND NOT co.collisdeterministic), ''),
           coalesce((SELECT i.indexrelid::regclass::text || ' collate ' || quote_ident(co.collname::text)
                     FROM pg_index i JOIN pg_collation co ON co.oid = i.indcollation[0]
                     WHERE i.indrelid = a.attrelid AND i.indisunique AND i.indnkeyatts = 1
                         AND i.indkey[0] = a.attnum AND i.indpred IS NULL
                         AND i.indimmediate AND i.indisvalid
                         AND i.indcollation[0] <> a.attcollation AND NOT co.collisdeterministic
                     ORDER BY 1 LIMIT 1), '')
       )::text
FROM pg_attribute a
WHERE a.attrelid = to_regclass($1::text) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum";

/// What is wrong with a table that keeps its rows as `storage` says (`None`: not read):
/// only a permanent table survives a crash and reaches a standby. An `UNLOGGED` table is
/// emptied by crash recovery and is empty on a promoted standby, so every lease would be free
/// while its holders still run; a temporary one is the session's own, which the pool's other
/// connections never see.
pub(super) fn unfit_storage(storage: Option<&str>, table: &str) -> Option<String> {
    match storage? {
        "permanent" => None,
        "unlogged" => Some(format!(
            "the table is UNLOGGED: a crash empties it and a standby has none of its rows, so \
             every lease would be free while its holder still runs its work; make it logged \
             (ALTER TABLE {table} SET LOGGED) when no service uses it"
        )),
        other => Some(format!(
            "the table is {other}, seen by one session only: the store needs a table every \
             connection of its pool sees"
        )),
    }
}

/// Whether `column`, of text that fits, compares by a nondeterministic collation: the fix that
/// makes it compare bytes, and the collation. Under one, `Sweep` and `sweep` may be one lease
/// (one row, one holder).
pub(super) fn nondeterministic(column: Column, facts: &Facts) -> Option<(Fix, &str)> {
    let collation = facts.nondeterministic.as_deref()?;
    let fix = match column {
        Column::Name => Fix::BinaryName,
        Column::Holder => Fix::BinaryHolder,
        Column::Fence | Column::TakenAt | Column::ExpiresAt => return None,
    };
    Some((fix, collation))
}

/// What is wrong with a table whose name has a unique index by a nondeterministic collation
/// beside the key (`key`: `index collate collation`, `None`: none): the store's
/// `ON CONFLICT (name)` takes every such index for its target, so an acquisition of `sweep`
/// finds the row of `Sweep` and answers as its holder does. The column's type is not what is
/// wrong, so no upgrade of it helps: the index is the user's to drop or rebuild.
pub(super) fn unfit_key(key: Option<&str>) -> Option<String> {
    // The index's name, quoted as it needs, may hold ` collate `; the collation's is the last.
    let (index, collation) = key?.rsplit_once(" collate ")?;
    Some(format!(
        "the unique index {index} on name compares by the nondeterministic collation \
         {collation}, so names that differ in case or accents would be one lease there (the \
         store's ON CONFLICT (name) answers for every unique index on name); drop it, or build \
         it again with COLLATE \"C\", when no service uses it"
    ))
}

/// Which types fit, by the type without its length (the check reads a `varchar`'s length
/// itself). A `timestamptz` declared with fewer than six digits of a second rounds every time
/// written to it, up or down, by up to half its unit: an expiry stored half a second early
/// lets a takeover in while the holder's deadline, counted from the TTL, has not passed.
pub(super) fn fit(column: Column, data_type: &str) -> Fit {
    let text = matches!(data_type, "text" | "character varying");
    match column {
        Column::Name | Column::Holder if text => Fit::Fits,
        Column::Name | Column::Holder => Fit::Wrong("text"),
        Column::Fence => match data_type {
            "bigint" => Fit::Fits,
            "integer" | "smallint" => Fit::Upgrade(Fix::WidenFence),
            _ => Fit::Wrong("bigint"),
        },
        Column::TakenAt | Column::ExpiresAt => match data_type {
            "timestamp with time zone" | "timestamp(6) with time zone" => Fit::Fits,
            coarse if coarse.starts_with("timestamp(") && coarse.ends_with(") with time zone") => {
                Fit::Upgrade(if column == Column::TakenAt {
                    Fix::PreciseTakenAt
                } else {
                    Fix::PreciseExpiresAt
                })
            }
            _ => Fit::Wrong("timestamptz"),
        },
    }
}

/// One `ALTER TABLE` (after the `UPDATE`s that `NOT NULL` columns need): a single statement,
/// so the table is locked once. Adding a column with a constant default rewrites nothing, nor
/// does widening a `varchar` name or holder to `text` (a name's index is rebuilt when its
/// collation becomes the store's `"C"`). The lock is waited for at most
/// [`LOCK_WAIT`](super::lock_wait::LOCK_WAIT), set first (`SET LOCAL`: the upgrade runs as one
/// transaction).
///
/// When `UPDATE`s come first (filling a missing fence or time), the table is locked before
/// them (`LOCK TABLE ... IN ACCESS EXCLUSIVE MODE`, the lock the `ALTER TABLE` takes anyway):
/// two upgrades that ran at once would otherwise each hold the `UPDATE`'s lock and wait for the
/// other's to take the `ALTER TABLE`'s, a deadlock PostgreSQL ends by failing one of them while
/// the other has not committed yet, so that the failed one, checking the table again, would
/// still find it unchanged. Locked first, the second waits for the first to commit, then its
/// `ALTER TABLE` fails on the upgraded table, which [`SqlStore::upgrade`] then finds fitting.
///
/// [`SqlStore::upgrade`]: crate::SqlStore::upgrade
pub(super) fn upgrade(t: &str, fixes: &[Fix]) -> String {
    let mut before = super::lock_wait::postgres();
    if fixes.iter().any(|fix| {
        matches!(
            fix,
            Fix::FenceNotNull | Fix::TakenAtNotNull | Fix::ExpiresAtNotNull
        )
    }) {
        before.push_str(&format!(
            "LOCK TABLE {t} IN ACCESS EXCLUSIVE MODE;
"
        ));
    }
    let mut actions = Vec::new();
    for fix in fixes {
        match fix {
            Fix::AddFence => actions.push("ADD COLUMN fence bigint NOT NULL DEFAULT 0"),
            Fix::WidenFence => actions.push("ALTER COLUMN fence TYPE bigint"),
            Fix::FenceNotNull => {
                before.push_str(&format!("UPDATE {t} SET fence = 0 WHERE fence IS NULL;\n"));
                actions.push("ALTER COLUMN fence SET NOT NULL");
            }
            Fix::HolderNullable => actions.push("ALTER COLUMN holder DROP NOT NULL"),
            // One action per column, whether it is widened, made to compare bytes or both:
            // the database's default collation is deterministic, and the name's `"C"` orders
            // by bytes as the store's `list` does.
            Fix::WidenName | Fix::BinaryName => {
                push_once(&mut actions, "ALTER COLUMN name TYPE text COLLATE \"C\"")
            }
            Fix::WidenHolder | Fix::BinaryHolder => {
                push_once(&mut actions, "ALTER COLUMN holder TYPE text")
            }
            Fix::TakenAtNotNull => actions.push("ALTER COLUMN taken_at SET NOT NULL"),
            Fix::ExpiresAtNotNull => actions.push("ALTER COLUMN expires_at SET NOT NULL"),
            // More digits keep every time as it is: the table is not rewritten.
            Fix::PreciseTakenAt => actions.push("ALTER COLUMN taken_at TYPE timestamptz"),
            Fix::PreciseExpiresAt => actions.push("ALTER COLUMN expires_at TYPE timestamptz"),
            // MariaDB's alone.
            Fix::Utf8Name
            | Fix::Utf8Holder
            | Fix::UtcTakenAt
            | Fix::UtcExpiresAt
            | Fix::NoOnUpdateTakenAt
            | Fix::NoOnUpdateExpiresAt
            // SQLite's alone.
            | Fix::MillisecondTimes => {}
        }
    }
    if fixes
        .iter()
        .any(|fix| matches!(fix, Fix::TakenAtNotNull | Fix::ExpiresAtNotNull))
    {
        before.push_str(&super::fill_times(t, "statement_timestamp()"));
    }
    format!("{before}ALTER TABLE {t}\n    {};", actions.join(",\n    "))
}

/// Adds `action` unless it is there already.
fn push_once<'a>(actions: &mut Vec<&'a str>, action: &'a str) {
    if !actions.contains(&action) {
        actions.push(action);
    }
}
