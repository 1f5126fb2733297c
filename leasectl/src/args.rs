//! The command line, as clap reads it: the database, the table and one command.

use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use lease_core::LeaseName;

/// The whole command line.
#[derive(Debug, Parser)]
#[command(
    name = "leasectl",
    version,
    about = "Inspect and free the leases in a service's lease table, in the database's own time",
    long_about = "Inspect and free the leases in a service's lease table (PostgreSQL, MariaDB or \
                  SQLite, as lease-sqlx and lease-diesel make it), in the database's own time; \
                  check a table, and print its migrations.",
    after_help = "\
Database URLs:
  postgres://user:password@host:5432/database   (or postgresql://)
  mysql://user:password@host:3306/database      (or mariadb://)
  sqlite:path/to/file.db                        (or sqlite://path/to/file.db)

Exit codes: 0 done (also nothing to release: the lease expired or was released meanwhile),
1 failed (unreachable database, unknown lease, a lease that changed hands before its release
or is no longer held with the --fence given, a release that matched nothing, a table that does
not fit), 2 usage (bad arguments, URL or lease name, release without --yes).

Examples:
  DATABASE_URL=postgres://app@db/app leasectl list
  leasectl --database-url sqlite:leases.db --table jobs_leases show sweep
  leasectl list --output json | jq '.leases[].holder'
  leasectl migrations --dialect postgres --layout sqlx --dir migrations"
)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) target: Target,

    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The lease table when none is named.
pub(crate) const DEFAULT_TABLE: &str = "leases";

/// Where the leases are.
#[derive(Debug, Clone, Args)]
pub(crate) struct Target {
    /// The database, as sqlx-cli and diesel-cli read it.
    #[arg(
        long,
        short = 'd',
        global = true,
        env = "DATABASE_URL",
        hide_env_values = true,
        value_name = "URL"
    )]
    pub(crate) database_url: Option<String>,

    /// The lease table, as `name` or `schema.name` (empty: the default).
    #[arg(
        long,
        short = 't',
        global = true,
        env = "LEASE_TABLE",
        default_value = DEFAULT_TABLE,
        value_name = "NAME"
    )]
    pub(crate) table: String,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Every lease: holder, fence, taken and expiry times, and when it expires.
    #[command(after_help = "Examples:\n  leasectl list\n  leasectl list --output json")]
    List {
        #[command(flatten)]
        output: OutputArg,
    },

    /// One lease.
    #[command(
        after_help = "Examples:\n  leasectl show sweep\n  leasectl show uptime:node-a --output json"
    )]
    Show {
        /// The lease's name.
        #[arg(value_parser = parse_lease_name)]
        name: LeaseName,

        #[command(flatten)]
        output: OutputArg,
    },

    /// Give a lease back on its holder's behalf (only if that holder still holds it)
    ///
    /// The next instance can take it at once. Its holder finds out at its next renewal and
    /// stops.
    #[command(
        after_help = "Examples:\n  leasectl release sweep                 (shows the lease; nothing is released)\n  leasectl release sweep --fence 7 --yes (releases it if fence 7 still holds it)"
    )]
    Release {
        /// The lease's name.
        #[arg(value_parser = parse_lease_name)]
        name: LeaseName,

        /// Release only the holding with this fence, the one `show` or a refused `release`
        /// printed: if the lease was taken again since, nothing is released.
        #[arg(long, value_name = "FENCE")]
        fence: Option<u64>,

        /// Confirm the release; without it nothing is released and the lease is shown.
        #[arg(long, short = 'y')]
        yes: bool,
    },

    /// The list again and again, until interrupted (Ctrl-C) or after `--count` lists.
    #[command(
        after_help = "Examples:\n  leasectl watch --interval 5s\n  leasectl watch --count 3 --output json   (one JSON document a line)"
    )]
    Watch {
        /// How long between two lists: `500ms`, `2s`, `1m` (from 100ms to 1h).
        #[arg(long, short = 'i', default_value = "2s", value_parser = parse_interval)]
        interval: Duration,

        /// Stop after this many lists (default: until interrupted).
        #[arg(long, short = 'n', value_parser = clap::value_parser!(u64).range(1..))]
        count: Option<u64>,

        #[command(flatten)]
        output: OutputArg,
    },

    /// Delete the rows of leases free for longer than `--released-for`
    ///
    /// Deletes the rows of leases that have been free (released or expired) for longer than
    /// `--released-for`, by the database's clock; held leases are never touched. Needs the
    /// `DELETE` privilege on the table. Fences keep increasing for a name taken again.
    #[command(
        after_help = "Examples:\n  leasectl prune --released-for 7d\n  leasectl prune --released-for 12h"
    )]
    Prune {
        /// How long a lease must have been free, with its unit: `30m`, `12h`, `7d`.
        #[arg(long, value_name = "DURATION", value_parser = parse_free_for)]
        released_for: Duration,
    },

    /// Check that the table fits the store; if not, print the SQL that fixes it
    ///
    /// Checks that the table has the columns, types and key the store needs; when it does not,
    /// says what differs and prints the SQL that fixes it (an earlier lease table is upgraded
    /// in place, keeping its leases).
    #[command(after_help = "Example:\n  leasectl --table leases check")]
    Check,

    /// Print the lease table's migration (up and down), or write its files
    ///
    /// Prints the migration for a migration tool, or writes its files into a migrations
    /// directory. Needs no database.
    #[command(
        after_help = "Examples:\n  leasectl migrations --dialect postgres --layout sqlx\n  leasectl --table jobs_leases migrations --dialect mariadb --layout diesel --dir migrations"
    )]
    Migrations {
        /// The database the SQL is for.
        #[arg(long, value_enum)]
        dialect: DialectArg,

        /// The migration tool's layout.
        #[arg(long, value_enum, default_value = "sqlx")]
        layout: LayoutArg,

        /// Write the files into this migrations directory instead of printing them.
        #[arg(long, value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
    },
}

/// `--output`.
#[derive(Debug, Clone, Copy, Args)]
pub(crate) struct OutputArg {
    /// Text for people, or JSON for scripts (see the README for its shape).
    #[arg(long, short = 'o', value_enum, default_value = "text")]
    pub(crate) output: Output,
}

/// How answers are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Output {
    /// Aligned columns and fields, for people.
    Text,
    /// One JSON document, of a stable shape.
    Json,
}

/// `--dialect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum DialectArg {
    /// PostgreSQL 14 or later.
    Postgres,
    /// MariaDB 10.5 or later.
    #[value(alias = "mysql")]
    Mariadb,
    /// SQLite 3.42 or later.
    Sqlite,
}

/// `--layout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LayoutArg {
    /// `sqlx migrate`: `<version>_<name>.up.sql` and `.down.sql`.
    Sqlx,
    /// diesel's migrations: `<version>_<name>/up.sql` and `down.sql`.
    Diesel,
}

/// The shortest and the longest interval of `watch`.
pub(crate) const INTERVALS: (Duration, Duration) =
    (Duration::from_millis(100), Duration::from_secs(3600));

/// A lease name, checked as the command line is read: an invalid one is a usage error before
/// any connection is tried, not after a wait on a database that does not answer.
/// The message names the reason alone: clap's own line around it quotes the value already.
fn parse_lease_name(text: &str) -> Result<LeaseName, String> {
    LeaseName::new(text).map_err(|error| match error {
        lease_core::Error::InvalidName { reason, .. } => format!("invalid lease name: {reason}"),
        error => error.to_string(),
    })
}

/// `500ms`, `2s`, `1m`, `1h` or `7d` (a number alone is seconds). The messages do not repeat
/// the text: clap's own line around them quotes it.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| "not a duration such as 500ms, 2s, 1m, 1h or 7d".to_owned())?;
    let secs = |factor: u64| Duration::from_secs(number.saturating_mul(factor));
    Ok(match unit {
        "ms" => Duration::from_millis(number),
        "s" | "" => secs(1),
        "m" => secs(60),
        "h" => secs(3600),
        "d" => secs(86_400),
        _ => return Err(format!("unknown unit {unit:?}: use ms, s, m, h or d")),
    })
}

/// `--released-for`: with a unit, and more than zero. A number alone, seconds elsewhere, is
/// refused here: `7` meant as days would delete the rows freed seven seconds ago. Zero, surely
/// a slip, deletes every free row, the one freed this instant too; the README advises days
/// (the margin a clock set back needs), which the tool leaves to the operator above zero.
fn parse_free_for(text: &str) -> Result<Duration, String> {
    if !text.trim().is_empty() && text.trim().bytes().all(|byte| byte.is_ascii_digit()) {
        return Err("needs a unit, such as 30m, 12h or 7d".to_owned());
    }
    let free_for = parse_duration(text)?;
    if free_for.is_zero() {
        return Err(
            "must be more than 0 (free rows are pruned after days, not at once)".to_owned(),
        );
    }
    Ok(free_for)
}

/// A duration within [`INTERVALS`].
fn parse_interval(text: &str) -> Result<Duration, String> {
    let interval = parse_duration(text)?;
    let (shortest, longest) = INTERVALS;
    if interval < shortest || interval > longest {
        return Err(format!(
            "the interval must be from {shortest:?} to {longest:?}"
        ));
    }
    Ok(interval)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(line: &str) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("leasectl").chain(line.split_whitespace()))
    }

    #[test]
    fn a_prune_needs_a_unit_and_more_than_zero() {
        assert_eq!(parse_free_for("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_free_for("10ms"), Ok(Duration::from_millis(10)));
        for bare in ["7", " 7 ", "0"] {
            assert_eq!(
                parse_free_for(bare),
                Err("needs a unit, such as 30m, 12h or 7d".to_owned()),
                "{bare:?}"
            );
        }
        assert!(parse_free_for("0d").unwrap_err().contains("more than 0"));
        // Elsewhere a number alone is seconds.
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn options_go_before_or_after_the_command() {
        let cli = parse("--table jobs.leases -d sqlite:a.db show sweep -o json").unwrap();
        assert_eq!(cli.target.table, "jobs.leases");
        assert_eq!(cli.target.database_url.as_deref(), Some("sqlite:a.db"));
        match cli.command {
            Command::Show { name, output } => {
                assert_eq!(name.as_str(), "sweep");
                assert_eq!(output.output, Output::Json);
            }
            other => panic!("{other:?}"),
        }
        let cli = parse("release sweep --yes --database-url sqlite:b.db").unwrap();
        assert!(matches!(cli.command, Command::Release { yes: true, .. }));
        assert_eq!(cli.target.database_url.as_deref(), Some("sqlite:b.db"));
    }

    #[test]
    fn watch_bounds_its_interval_and_count() {
        let cli = parse("watch --interval 500ms --count 2").unwrap();
        match cli.command {
            Command::Watch {
                interval, count, ..
            } => {
                assert_eq!(interval, Duration::from_millis(500));
                assert_eq!(count, Some(2));
            }
            other => panic!("{other:?}"),
        }
        for bad in [
            "watch --interval 10ms",
            "watch --interval 2w",
            "watch --interval 2d",
            "watch --interval 2h",
            "watch --count 0",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_interval("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_interval("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert!(parse_duration("-1s").is_err());
        assert!(parse_free_for("0").is_err());
        assert!(parse_free_for("0ms").is_err());
        assert_eq!(parse_free_for("1ms"), Ok(Duration::from_millis(1)));
        assert!(parse("prune").is_err());
    }

    #[test]
    fn rejects_what_it_cannot_run() {
        for line in [
            "",
            "drop",
            "show",
            "release",
            "list extra",
            "list --force",
            "list --yes",
            "list --output yaml",
            "migrations --dialect oracle",
            "migrations",
        ] {
            assert!(parse(line).is_err(), "{line:?}");
        }
    }
}
