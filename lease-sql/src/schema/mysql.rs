//! MariaDB's schema check: the catalog query and which types fit.

use super::{Column, Fit, Fix};

/// One row per column of the table `?` (in the schema `?` when given, else the connection's
/// database): its name and `type;nullable;default;key`. `key` says the column alone is the
/// primary key, or the first column of a unique key. Times carry their precision
/// (`datetime(6)`).
pub(super) fn columns(schema: bool) -> String {
    let schema = if schema { "?" } else { "DATABASE()" };
    format!(
        "SELECT CAST(c.COLUMN_NAME AS CHAR),\n       \
             CAST(CONCAT_WS(';',\n           \
                 IF(c.DATA_TYPE IN ('datetime', 'timestamp', 'time'), CONCAT(c.DATA_TYPE, '(', c.DATETIME_PRECISION, ')'), c.DATA_TYPE),\n           \
                 c.IS_NULLABLE,\n           \
                 IF(c.COLUMN_DEFAULT IS NOT NULL OR c.EXTRA LIKE '%auto_increment%' OR c.EXTRA LIKE '%GENERATED%', '1', '0'),\n           \
                 IF(c.COLUMN_KEY = 'UNI' OR (c.COLUMN_KEY = 'PRI' AND (\n               \
                     SELECT COUNT(*) FROM information_schema.KEY_COLUMN_USAGE k\n               \
                     WHERE k.TABLE_SCHEMA = c.TABLE_SCHEMA AND k.TABLE_NAME = c.TABLE_NAME AND k.CONSTRAINT_NAME = 'PRIMARY'\n           \
                 ) = 1), '1', '0')\n       \
             ) AS CHAR)\n\
         FROM information_schema.COLUMNS c\n\
         WHERE c.TABLE_NAME = ? AND c.TABLE_SCHEMA = {schema}\n\
         ORDER BY c.ORDINAL_POSITION"
    )
}

pub(super) fn fit(column: Column, data_type: &str) -> Fit {
    let collated = matches!(data_type, "varchar" | "char");
    match column {
        Column::Name | Column::Holder if data_type == "varbinary" => Fit::Fits,
        Column::Name if collated => Fit::Upgrade(Fix::BinaryName),
        Column::Holder if collated => Fit::Upgrade(Fix::BinaryHolder),
        Column::Name => Fit::Wrong("VARBINARY(255)"),
        Column::Holder => Fit::Wrong("VARBINARY(1024)"),
        Column::Fence => match data_type {
            "bigint" => Fit::Fits,
            "int" | "mediumint" | "smallint" | "tinyint" => Fit::Upgrade(Fix::WidenFence),
            _ => Fit::Wrong("BIGINT"),
        },
        Column::TakenAt | Column::ExpiresAt if data_type == "datetime(6)" => Fit::Fits,
        Column::TakenAt if data_type.starts_with("datetime(") => Fit::Upgrade(Fix::PreciseTakenAt),
        Column::ExpiresAt if data_type.starts_with("datetime(") => {
            Fit::Upgrade(Fix::PreciseExpiresAt)
        }
        Column::TakenAt | Column::ExpiresAt => Fit::Wrong("DATETIME(6), in UTC"),
    }
}

/// One `ALTER TABLE` (after the `UPDATE` that a `NOT NULL` fence needs). `MODIFY` keeps the
/// primary key; converting `VARCHAR` to `VARBINARY` keeps each value's bytes.
pub(super) fn upgrade(t: &str, fixes: &[Fix]) -> String {
    let mut before = String::new();
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
                before = format!("UPDATE {t} SET fence = 0 WHERE fence IS NULL;\n");
                push("MODIFY fence BIGINT NOT NULL");
            }
            Fix::BinaryName => push("MODIFY name VARBINARY(255) NOT NULL"),
            Fix::HolderNullable | Fix::BinaryHolder => push("MODIFY holder VARBINARY(1024) NULL"),
            Fix::PreciseTakenAt => push("MODIFY taken_at DATETIME(6) NOT NULL"),
            Fix::PreciseExpiresAt => push("MODIFY expires_at DATETIME(6) NOT NULL"),
        }
    }
    format!("{before}ALTER TABLE {t}\n    {};", actions.join(",\n    "))
}
