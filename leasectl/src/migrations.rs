//! `leasectl migrations`: the lease table's migration for a migration tool, printed or written.

use std::path::{Path, PathBuf};

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
        if let Err(error) = write_new(&path, &file.contents, &mut made) {
            // What this run made goes too, a file cut short by the failure included: no half
            // of a migration is left.
            for made in made.iter().rev() {
                let _ = if made.is_dir() {
                    std::fs::remove_dir(made)
                } else {
                    std::fs::remove_file(made)
                };
            }
            return Err(Failure::Failed(format!(
                "cannot write {}: {error}; nothing was written",
                path.display()
            )));
        }
        written.push_str(&format!("wrote {}\n", path.display()));
    }
    Ok(written)
}

/// Writes `contents` to a new file at `path`, making the directories it needs, and records in
/// `made` each directory and the file as soon as it made them: also those of a write that
/// failed half-way.
fn write_new(path: &Path, contents: &str, made: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        // The directories missing, outermost first, as `create_dir_all` makes them.
        let mut missing: Vec<&Path> = parent
            .ancestors()
            .take_while(|ancestor| !ancestor.as_os_str().is_empty() && !ancestor.exists())
            .collect();
        missing.reverse();
        for directory in missing {
            match std::fs::create_dir(directory) {
                Ok(()) => made.push(directory.to_owned()),
                // Made meanwhile by another: not this run's to remove.
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(error) => return Err(error),
            }
        }
    }
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    made.push(path.to_owned());
    std::io::Write::write_all(&mut out, contents.as_bytes())
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
