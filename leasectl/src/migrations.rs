//! `leasectl migrations`: the lease table's migration for a migration tool, printed or written.

use std::path::Path;

use lease_sqlx::{Dialect, Layout, Migration, MigrationFile, TableName};

use crate::Failure;
use crate::args::{DialectArg, LayoutArg};

/// The migration's files, each after a comment line naming its path; or, with `dir`, the files
/// written there (never over an existing file) and their paths.
pub(crate) fn run(
    table: &TableName,
    dialect: DialectArg,
    layout: LayoutArg,
    dir: Option<&Path>,
) -> Result<String, Failure> {
    let dialect = match dialect {
        DialectArg::Postgres => Dialect::Postgres,
        DialectArg::Mariadb => Dialect::MySql,
        DialectArg::Sqlite => Dialect::Sqlite,
    };
    let layout = match layout {
        LayoutArg::Sqlx => Layout::Sqlx,
        LayoutArg::Diesel => Layout::Diesel,
    };
    let migration = Migration::new(dialect, table);
    let files = migration.files(layout);
    let Some(dir) = dir else {
        return Ok(files
            .iter()
            .map(|file| format!("-- {}\n{}\n", file.path, file.contents))
            .collect());
    };
    refuse_another_of_its_version(dir, &migration, layout, &files)?;
    // All or nothing: a file of the migration already there stops it before any is written,
    // so no half of a migration is left (an `up` without its `down`).
    if let Some(there) = files
        .iter()
        .map(|file| dir.join(&file.path))
        .find(|path| path.exists())
    {
        return Err(Failure::Failed(format!(
            "cannot write {}: it exists already; nothing was written",
            there.display()
        )));
    }
    let mut written = String::new();
    let mut made = Vec::new();
    for file in files {
        let path = dir.join(&file.path);
        let failed = |error: std::io::Error| {
            // The files this run wrote go too: no half of a migration is left.
            for path in &made {
                let _ = std::fs::remove_file(path);
            }
            Failure::Failed(format!("cannot write {}: {error}", path.display()))
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(failed)?;
        }
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .and_then(|mut out| std::io::Write::write_all(&mut out, file.contents.as_bytes()))
            .map_err(failed)?;
        made.push(path.clone());
        written.push_str(&format!("wrote {}\n", path.display()));
    }
    Ok(written)
}

/// Refuses a migrations directory holding another migration of `migration`'s version: the
/// tools record migrations by version, so one of the two would never run (diesel) or would
/// stop every run (sqlx). Only a table whose name hashes to another's six digits meets one.
fn refuse_another_of_its_version(
    dir: &Path,
    migration: &Migration,
    layout: Layout,
    files: &[MigrationFile],
) -> Result<(), Failure> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        // No directory yet: nothing in it.
        return Ok(());
    };
    // The tools read a version as the part before the first `_`, diesel without its dashes
    // (`2026-12-01-142942_x` and `20261201142942_x` are one version to it), sqlx as a number
    // (`020261201142942_x` too): compared as numbers without dashes, for both (a leading zero
    // diesel would tell apart is refused too, to be safe).
    let version = |text: &str| text.replace('-', "").parse::<u64>().ok();
    let ours = version(&migration.version(layout));
    let own = format!("{}_{}", migration.version(layout), migration.name());
    // What this migration's own files are named in `dir` (a file or a directory).
    let own_entries: Vec<String> = files
        .iter()
        .filter_map(|file| file.path.split('/').next().map(str::to_owned))
        .collect();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let stem = [".up.sql", ".down.sql", ".sql"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix))
            .unwrap_or(&name);
        let Some((theirs, _)) = stem.split_once('_') else {
            continue;
        };
        // Of its version, and not one of its own files (sqlx's simple `<stem>.sql` of the
        // same migration is another record of the version).
        if version(theirs) == ours && !(stem == own && own_entries.contains(&name)) {
            return Err(Failure::Failed(format!(
                "{} holds {name}, another migration of version {}: the migration tools keep one \
                 record per version; rename one of the tables, or write this one elsewhere and \
                 give it another version by hand",
                dir.display(),
                migration.version(layout)
            )));
        }
    }
    Ok(())
}
