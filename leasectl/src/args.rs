//! The command line: `leasectl [--table NAME] <URL> <list | show NAME | release NAME --yes>`.

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Command {
    /// Every lease in the table.
    List,
    /// One lease.
    Show(String),
    /// Give one lease back on its holder's behalf; `yes` confirms it.
    Release { name: String, yes: bool },
}

/// A parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Args {
    pub(crate) url: String,
    pub(crate) table: Option<String>,
    pub(crate) command: Command,
}

/// What the command line asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Parsed {
    Run(Args),
    Help,
}

pub(crate) const USAGE: &str = "\
usage: leasectl [--table NAME] <URL> <COMMAND>

Inspect the lease table of a service, in the database's own time.

commands:
  list                  every lease: holder, fence, taken and expiry times, expires in
  show <NAME>           one lease
  release <NAME> --yes  give a lease back on its holder's behalf (only if that holder
                        still holds it), so the next instance can take it at once

URL:
  postgres://user:password@host:5432/database   (or postgresql://)
  mysql://user:password@host:3306/database      (or mariadb://)
  sqlite:path/to/file.db                        (or sqlite://path/to/file.db)

options:
  --table NAME          the lease table, as `name` or `schema.name` (default: leases)
  --yes                 confirm a release
  -h, --help            this text

exit codes: 0 done, 1 failed (unreachable database, unknown lease, nothing released),
2 usage (bad arguments or URL, release without --yes)";

/// Parses the arguments after the program name.
pub(crate) fn parse(args: impl IntoIterator<Item = String>) -> Result<Parsed, String> {
    let mut table = None;
    let mut yes = false;
    let mut positional = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => return Ok(Parsed::Help),
            "help" if positional.is_empty() => return Ok(Parsed::Help),
            "--yes" | "-y" => yes = true,
            "--table" => {
                let value = args.next().ok_or("--table needs a table name")?;
                table = Some(value);
            }
            _ if arg.starts_with("--table=") => {
                table = Some(arg["--table=".len()..].to_owned());
            }
            _ if arg.starts_with('-') && arg.len() > 1 => {
                return Err(format!("unknown option {arg}"));
            }
            _ => positional.push(arg),
        }
    }
    let mut positional = positional.into_iter();
    let url = positional.next().ok_or("missing the database URL")?;
    let command = match positional.next().as_deref() {
        None => return Err("missing the command: list, show or release".to_owned()),
        Some("list") => Command::List,
        Some("show") => Command::Show(positional.next().ok_or("show needs a lease name")?),
        Some("release") => Command::Release {
            name: positional.next().ok_or("release needs a lease name")?,
            yes,
        },
        Some(other) => {
            return Err(format!(
                "unknown command {other:?}: expected list, show or release"
            ));
        }
    };
    if let Some(extra) = positional.next() {
        return Err(format!("unexpected argument {extra:?}"));
    }
    if yes && !matches!(command, Command::Release { .. }) {
        return Err("--yes only confirms a release".to_owned());
    }
    Ok(Parsed::Run(Args {
        url,
        table,
        command,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(line: &str) -> Result<Parsed, String> {
        parse(line.split_whitespace().map(str::to_owned))
    }

    #[test]
    fn parses_every_command_with_options_anywhere() {
        assert_eq!(
            parse_str("sqlite:a.db list"),
            Ok(Parsed::Run(Args {
                url: "sqlite:a.db".to_owned(),
                table: None,
                command: Command::List,
            }))
        );
        assert_eq!(
            parse_str("--table jobs.leases postgres://h/db show sweep"),
            Ok(Parsed::Run(Args {
                url: "postgres://h/db".to_owned(),
                table: Some("jobs.leases".to_owned()),
                command: Command::Show("sweep".to_owned()),
            }))
        );
        assert_eq!(
            parse_str("mysql://h/db release uptime:node-a --yes --table=t"),
            Ok(Parsed::Run(Args {
                url: "mysql://h/db".to_owned(),
                table: Some("t".to_owned()),
                command: Command::Release {
                    name: "uptime:node-a".to_owned(),
                    yes: true,
                },
            }))
        );
        assert_eq!(parse_str("--help"), Ok(Parsed::Help));
        assert_eq!(parse_str("sqlite:a.db list -h"), Ok(Parsed::Help));
    }

    #[test]
    fn rejects_what_it_cannot_run() {
        for (line, expected) in [
            ("", "missing the database URL"),
            ("sqlite:a.db", "missing the command"),
            ("sqlite:a.db drop", "unknown command"),
            ("sqlite:a.db show", "show needs a lease name"),
            ("sqlite:a.db release", "release needs a lease name"),
            ("sqlite:a.db list extra", "unexpected argument"),
            ("sqlite:a.db list --force", "unknown option --force"),
            ("sqlite:a.db list --yes", "--yes only confirms a release"),
            ("sqlite:a.db list --table", "--table needs a table name"),
        ] {
            let error = parse_str(line).unwrap_err();
            assert!(error.contains(expected), "{line:?}: {error}");
        }
    }
}
