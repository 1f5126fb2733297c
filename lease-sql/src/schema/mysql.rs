//! MariaDB's schema check: the catalog query and which types fit.

use super::{Column, Facts, Fit, Fix};

/// One row per column of the table `?` (in the schema `?` when given, else the connection's
/// database): its name and `type;nullable;default;key`. `key` says the column alone, whole,
/// is the primary key or a unique key: a key on a prefix of it (`PRIMARY KEY (name(4))`) would
/// let two names that share the prefix collide. Times carry their precision
/// (`datetime(6)`), strings their declared length (`varbinary(36)`: bytes, `varchar(36)`:
/// characters), and unsigned integers say so (`bigint unsigned`: `DATA_TYPE` alone reads
/// `bigint` for them, and sqlx reads no `i64` from such a column); a time that MariaDB sets to
/// the current time whenever its row changes says so after its precision
/// (`datetime(6) on update`: `ON UPDATE CURRENT_TIMESTAMP`). A character column adds its
/// character set as a fifth part (`varchar(255);NO;0;1;latin1`; empty for any other column),
/// and every column the table's storage engine as a sixth (`InnoDB`, `MyISAM`; empty for a
/// view; a session's temporary table of the same name, which MariaDB 11.2 and later list
/// too, is left out; a system-versioned table is read as any other).
pub(super) fn columns(schema: bool) -> String {
    let schema = if schema { "?" } else { "DATABASE()" };
    format!(
        "SELECT CAST(c.COLUMN_NAME AS CHAR),\n       \
             CAST(CONCAT_WS(';',\n           \
                 IF(c.DATA_TYPE IN ('datetime', 'timestamp', 'time'), CONCAT(c.DATA_TYPE, '(', c.DATETIME_PRECISION, ')', IF(c.EXTRA LIKE '%on update%', ' on update', '')),\n              \
                 IF(c.DATA_TYPE IN ('varbinary', 'binary', 'varchar', 'char'), CONCAT(c.DATA_TYPE, '(', c.CHARACTER_MAXIMUM_LENGTH, ')'),\n              \
                     IF(c.COLUMN_TYPE LIKE '%unsigned%', CONCAT(c.DATA_TYPE, ' unsigned'), c.DATA_TYPE))),\n           \
                 c.IS_NULLABLE,\n           \
                 IF(c.COLUMN_DEFAULT IS NOT NULL OR c.EXTRA LIKE '%auto_increment%' OR c.EXTRA LIKE '%GENERATED%', '1', '0'),\n           \
                 IF(EXISTS (\n               \
                     SELECT 1 FROM information_schema.STATISTICS s\n               \
                     WHERE s.TABLE_SCHEMA = c.TABLE_SCHEMA AND s.TABLE_NAME = c.TABLE_NAME AND s.COLUMN_NAME = c.COLUMN_NAME\n                   \
                         AND s.NON_UNIQUE = 0 AND s.SUB_PART IS NULL\n                   \
                         AND (SELECT COUNT(*) FROM information_schema.STATISTICS o\n                        \
                              WHERE o.TABLE_SCHEMA = s.TABLE_SCHEMA AND o.TABLE_NAME = s.TABLE_NAME AND o.INDEX_NAME = s.INDEX_NAME) = 1\n           \
                 ), '1', '0'),\n           \
                 IFNULL(c.CHARACTER_SET_NAME, ''),\n           \
                 IFNULL((SELECT t.ENGINE FROM information_schema.TABLES t\n                   \
                         WHERE t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME AND t.TABLE_TYPE <> 'TEMPORARY'), '')\n       \
             ) AS CHAR)\n\
         FROM information_schema.COLUMNS c\n\
         WHERE c.TABLE_NAME = ? AND c.TABLE_SCHEMA = {schema}\n\
         ORDER BY c.ORDINAL_POSITION"
    )
}

/// What is wrong with a table whose storage engine is `storage` (`None`: not read): the
/// store's guarantees are InnoDB's. Another engine has no transactions, so a fenced check's row
/// lock ends with its own statement and a takeover no longer waits for the fenced transaction,
/// and a Galera cluster does not replicate it, so each node would hold leases of its own.
pub(super) fn unfit_storage(storage: Option<&str>, table: &str) -> Option<String> {
    match storage? {
        "innodb" => None,
        other => Some(format!(
            "the table's storage engine is {other}, the store needs InnoDB (transactions and \
             row locks, which fenced writes rely on, and what Galera replicates); convert it \
             (ALTER TABLE {table} ENGINE=InnoDB) when no service uses it"
        )),
    }
}

/// Which types fit, by the type without a string's length (the check reads that itself) nor a
/// time's ` on update` ([`set_on_update`] reads that).
pub(super) fn fit(column: Column, data_type: &str) -> Fit {
    let data_type = data_type.trim_end_matches(" on update");
    let collated = matches!(data_type, "varchar" | "char");
    // A holder of text: its bytes fit VARBINARY(1024) (a longer one makes the upgrade fail, in
    // strict mode, rather than lose bytes). A name of text cannot be a key by itself.
    let text = matches!(data_type, "tinytext" | "text" | "mediumtext" | "longtext");
    match column {
        Column::Name | Column::Holder if data_type == "varbinary" => Fit::Fits,
        Column::Name if collated => Fit::Upgrade(Fix::BinaryName),
        Column::Holder if collated || text => Fit::Upgrade(Fix::BinaryHolder),
        Column::Name => Fit::Wrong("VARBINARY(255)"),
        Column::Holder => Fit::Wrong("VARBINARY(1024)"),
        Column::Fence => match data_type.trim_end_matches(" unsigned") {
            "bigint" if data_type == "bigint" => Fit::Fits,
            "bigint" | "int" | "mediumint" | "smallint" | "tinyint" => {
                Fit::Upgrade(Fix::WidenFence)
            }
            _ => Fit::Wrong("BIGINT"),
        },
        Column::TakenAt | Column::ExpiresAt if data_type == "datetime(6)" => Fit::Fits,
        Column::TakenAt if data_type.starts_with("datetime(") => Fit::Upgrade(Fix::PreciseTakenAt),
        Column::ExpiresAt if data_type.starts_with("datetime(") => {
            Fit::Upgrade(Fix::PreciseExpiresAt)
        }
        Column::TakenAt if data_type.starts_with("timestamp(") => Fit::Upgrade(Fix::UtcTakenAt),
        Column::ExpiresAt if data_type.starts_with("timestamp(") => Fit::Upgrade(Fix::UtcExpiresAt),
        Column::TakenAt | Column::ExpiresAt => Fit::Wrong("DATETIME(6), in UTC"),
    }
}

/// Whether `column` is a time MariaDB sets to the current time whenever a statement changes
/// its row without setting it (`ON UPDATE CURRENT_TIMESTAMP`): the fix that drops that, beside
/// whatever its type needs (a `TIMESTAMP` that older servers declare so by default is also
/// made a UTC `DATETIME(6)`, by the same `MODIFY`).
pub(super) fn set_on_update(column: Column, facts: &Facts) -> Option<Fix> {
    if !facts.data_type.ends_with(" on update") {
        return None;
    }
    match column {
        Column::TakenAt => Some(Fix::NoOnUpdateTakenAt),
        Column::ExpiresAt => Some(Fix::NoOnUpdateExpiresAt),
        Column::Name | Column::Holder | Column::Fence => None,
    }
}

/// The character sets whose bytes are the UTF-8 the store sends (`utf8mb3`, and `ascii`, are
/// subsets of `utf8mb4`; `utf8` is `utf8mb3`'s older name).
const UTF8: [&str; 5] = ["utf8mb4", "utf8mb3", "utf8", "ascii", "binary"];

/// Whether `column` (a name or holder of text that is upgraded to bytes) needs its text
/// converted to UTF-8 first: the fix, and the column's character set, when that is another.
pub(super) fn recode(column: Column, facts: &Facts) -> Option<(Fix, &str)> {
    let charset = facts.charset.as_deref()?;
    let fix = match column {
        Column::Name => Fix::Utf8Name,
        Column::Holder => Fix::Utf8Holder,
        Column::Fence | Column::TakenAt | Column::ExpiresAt => return None,
    };
    (!UTF8.contains(&charset)).then_some((fix, charset))
}

/// How wide the holder stays through an upgrade that changes it: the store's
/// `VARBINARY(1024)`, or the column's own width where that is wider, so no holder already in
/// the table is cut (or, in strict mode, fails the upgrade). `holder` is the column's declared
/// type as the catalog query reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct HolderWidth {
    /// Characters of the UTF-8 text a holder of another character set is converted to first.
    chars: u64,
    /// Bytes of the `VARBINARY` it ends as.
    bytes: u64,
}

impl HolderWidth {
    /// Most bytes a character of `utf8mb4` takes: the bytes of a `VARCHAR(n)` once it is UTF-8.
    const UTF8_BYTES: u64 = 4;
    /// The width of the store's own holder column (`VARBINARY(1024)` in its `CREATE TABLE`).
    pub(super) const STORE: u64 = 1024;
    /// The widest holder kept, in bytes: InnoDB's rows hold at most 65,535 bytes of columns,
    /// the other columns included. A wider column is made this wide (a holder longer than
    /// that fails the upgrade in strict mode), not one the `ALTER` is certain to refuse.
    const WIDEST: u64 = 60_000;

    /// The width for a holder declared `holder`: a `VARBINARY(n)` or `BINARY(n)` keeps its `n`
    /// bytes, a `VARCHAR(n)` or `CHAR(n)` its `n` characters as UTF-8 text and then `4n` bytes
    /// (the most its text takes as UTF-8), anything narrower than the store's holder, and a
    /// `TEXT`, become the store's width (a `TEXT` holder longer than that fails the upgrade in
    /// strict mode); no holder is made wider than 60,000 bytes (15,000 characters as text).
    pub(super) fn of(holder: &str) -> Self {
        let least = Self::STORE;
        let (data_type, length) = super::declared_length(holder);
        let (chars, bytes) = match (data_type, length) {
            ("varbinary" | "binary", Some(n)) => (n, n),
            ("varchar" | "char", Some(n)) => (n, n.saturating_mul(Self::UTF8_BYTES)),
            _ => (least, least),
        };
        Self {
            chars: chars.clamp(least, Self::WIDEST / Self::UTF8_BYTES),
            bytes: bytes.clamp(least, Self::WIDEST),
        }
    }
}

/// One `ALTER TABLE` (after the `UPDATE`s that `NOT NULL` columns need). `MODIFY` keeps the
/// primary key; converting `VARCHAR` or `TEXT` to `VARBINARY` keeps each value's bytes, and a
/// holder keeps its width where that is wider than the store's ([`HolderWidth`]).
///
/// So a name or holder of another character set than UTF-8 (`latin1`: `café` is the byte
/// `E9` where the store sends `C3 A9`) is first converted to UTF-8 text, by an `ALTER TABLE`
/// of its own before the one that makes it bytes: `VARCHAR` in `utf8mb4`
/// with the collation `utf8mb4_nopad_bin`, which compares bytes without padding, so no two
/// names that were distinct become one key on the way, whatever the column's collation was.
/// Run again on a table whose upgrade finished (another instance's, at the same time), it
/// reads the `VARBINARY` column's UTF-8 bytes as the same text, and changes no value.
///
/// A `TIMESTAMP` holds an instant (seconds since the epoch, in UTC) and MariaDB converts it to
/// `DATETIME` as the session's time zone shows it; the store's `DATETIME(6)` holds UTC wall
/// time, compared with `UTC_TIMESTAMP(6)`. So the conversion runs with the session at `+00:00`
/// (an offset, which needs no time zone tables and has no daylight saving gaps or repeated
/// hours): each row gets the UTC wall time of the same instant, and a live lease expires when
/// it did before, as its holder expects. The session's zone is put back afterwards, for the
/// pooled connection's next user (an upgrade that fails or is dropped half-way may leave it at
/// `+00:00`, which the store's own statements, on `UTC_TIMESTAMP(6)`, do not read). The range of
/// `TIMESTAMP` (1970 to 2038) fits `DATETIME`.
///
/// The `ALTER TABLE` waits for the table's metadata lock at most
/// [`LOCK_WAIT`](super::lock_wait::LOCK_WAIT) (`WAIT n`, for that statement alone), then fails
/// with the table as it was.
pub(super) fn upgrade(t: &str, fixes: &[Fix], holder: HolderWidth) -> String {
    let zoned = fixes
        .iter()
        .any(|fix| matches!(fix, Fix::UtcTakenAt | Fix::UtcExpiresAt));
    let (open, close) = if zoned {
        (
            "SET @lease_time_zone = @@session.time_zone;\nSET time_zone = '+00:00';\n",
            "\nSET time_zone = @lease_time_zone;",
        )
    } else {
        ("", "")
    };
    let wait = super::lock_wait::mysql();
    let recoded: Vec<String> = fixes
        .iter()
        .filter_map(|fix| match fix {
            Fix::Utf8Name => Some(
                "MODIFY name VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL"
                    .to_owned(),
            ),
            Fix::Utf8Holder => Some(format!(
                "MODIFY holder VARCHAR({}) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NULL",
                holder.chars
            )),
            _ => None,
        })
        .collect();
    let binary_holder = format!("MODIFY holder VARBINARY({}) NULL", holder.bytes);
    let mut before = if recoded.is_empty() {
        String::new()
    } else {
        format!("ALTER TABLE {t}{wait}\n    {};\n", recoded.join(",\n    "))
    };
    // An `UPDATE` before the `ALTER` assigns a time MariaDB would otherwise set to the current
    // time (`ON UPDATE CURRENT_TIMESTAMP`) its own value: an expiry set to now frees the lease.
    let keep_times = if fixes
        .iter()
        .any(|fix| matches!(fix, Fix::NoOnUpdateTakenAt | Fix::NoOnUpdateExpiresAt))
    {
        ", taken_at = taken_at, expires_at = expires_at"
    } else {
        ""
    };
    let mut actions: Vec<&str> = Vec::new();
    let mut push = |action| {
        if !actions.contains(&action) {
            actions.push(action);
        }
    };
    for fix in fixes {
        match fix {
            Fix::AddFence => push("ADD COLUMN fence BIGINT NOT NULL DEFAULT 0"),
            Fix::WidenFence => push("MODIFY fence BIGINT NOT NULL"),
            Fix::FenceNotNull => {
                before.push_str(&format!(
                    "{}UPDATE {t} SET fence = 0{keep_times} WHERE fence IS NULL;\n",
                    super::lock_wait::mysql_statement()
                ));
                push("MODIFY fence BIGINT NOT NULL");
            }
            Fix::Utf8Name | Fix::BinaryName | Fix::WidenName => {
                push("MODIFY name VARBINARY(255) NOT NULL")
            }
            Fix::HolderNullable | Fix::Utf8Holder | Fix::BinaryHolder | Fix::WidenHolder => {
                push(binary_holder.as_str())
            }
            // A MODIFY without `ON UPDATE` drops it.
            Fix::PreciseTakenAt
            | Fix::UtcTakenAt
            | Fix::TakenAtNotNull
            | Fix::NoOnUpdateTakenAt => push("MODIFY taken_at DATETIME(6) NOT NULL"),
            Fix::PreciseExpiresAt
            | Fix::UtcExpiresAt
            | Fix::ExpiresAtNotNull
            | Fix::NoOnUpdateExpiresAt => push("MODIFY expires_at DATETIME(6) NOT NULL"),
            // SQLite's alone.
            Fix::MillisecondTimes => {}
        }
    }
    if fixes
        .iter()
        .any(|fix| matches!(fix, Fix::TakenAtNotNull | Fix::ExpiresAtNotNull))
    {
        // `UTC_TIMESTAMP(6)`: a `TIMESTAMP` column reads it in the session's zone, `+00:00`
        // whenever the upgrade converts one.
        before.push_str(&super::lock_wait::mysql_statement());
        before.push_str(&super::fill_times(t, "UTC_TIMESTAMP(6)"));
    }
    format!(
        "{open}{before}ALTER TABLE {t}{wait}\n    {};{close}",
        actions.join(",\n    ")
    )
}
