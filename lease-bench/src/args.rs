//! [`Options`]: what to measure, read from the command line.

use std::time::Duration;

use crate::backend::Backend;
use crate::scenario::Scenario;
use crate::url;

/// The usage text `--help` prints.
pub const USAGE: &str = "\
lease-bench: the lease stores measured beside the bare statements and advisory locks

USAGE:
    cargo run --release -p lease-bench -- [OPTIONS]

OPTIONS:
    --scenario LIST      scenarios to run, comma-separated (default: all):
                         cycles, contended, many, handover, fenced, growth
    --backend LIST       backends to run, comma-separated (default: all): memory,
                         sqlx-postgres, sqlx-mariadb, sqlx-sqlite,
                         diesel-postgres, diesel-mariadb, diesel-sqlite
    --postgres-url URL   use this PostgreSQL server instead of a private one
                         (WAL figures are only taken on a private server)
    --mysql-url URL      use this MariaDB server instead of a private one
    --repetitions N      repetitions of every throughput measurement (the cycles,
                         contended, fenced and growth scenarios); figures are medians
                         (default 3); handover and many take fixed samples
    --seconds S          length of one throughput measurement, 0.001 to 86400
                         (default 2)
    --leases LIST        lease counts of the many-leases scenario (default 1000,10000,100000)
    --markdown FILE      also write every table, the machine and the command as Markdown
    --chart FILE         write the cycles-per-second chart as SVG (needs the cycles
                         scenario)
    --delay-ms MS        delay every chunk to and from the PostgreSQL and MariaDB servers
                         by MS milliseconds (0.001 to 60000) through a proxy, as across
                         a network (a round trip takes 2 x MS longer); a URL given with
                         it must name 127.0.0.1 or localhost, where the proxy forwards
    --smoke              a seconds-long run of every scenario, to check the program works:
                         shortens --repetitions, --seconds and --leases where they are
                         not given; its figures mean nothing
    -h, --help           print this text
";

/// What to measure and where.
#[derive(Debug, Clone)]
pub struct Options {
    /// The scenarios, in the order given.
    pub scenarios: Vec<Scenario>,
    /// The backends, in the order given.
    pub backends: Vec<Backend>,
    /// An existing PostgreSQL server, instead of a private one.
    pub postgres_url: Option<String>,
    /// An existing MariaDB server, instead of a private one.
    pub mysql_url: Option<String>,
    /// Repetitions of every throughput measurement (the cycles, contended, fenced and growth
    /// scenarios; handover and many take samples of fixed counts).
    pub repetitions: usize,
    /// The length of one throughput measurement.
    pub measure: Duration,
    /// Lease counts of the many-leases scenario.
    pub leases: Vec<usize>,
    /// Where to write the Markdown report.
    pub markdown: Option<String>,
    /// Where to write the SVG chart.
    pub chart: Option<String>,
    /// The seconds-long mode for CI.
    pub smoke: bool,
    /// A delay added to every chunk between the program and its PostgreSQL and MariaDB
    /// servers, in each direction (a proxy's): a round trip takes twice as long more, as across
    /// a network.
    pub delay: Option<Duration>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            scenarios: Scenario::ALL.to_vec(),
            backends: Backend::ALL.to_vec(),
            postgres_url: None,
            mysql_url: None,
            repetitions: 3,
            measure: Duration::from_secs(2),
            leases: vec![1_000, 10_000, 100_000],
            markdown: None,
            chart: None,
            smoke: false,
            delay: None,
        }
    }
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Command {
    /// Run with these options.
    Run(Box<Options>),
    /// Print the usage.
    Help,
}

/// Reads `text`, given with `flag`, as a length of time: a number of `unit`s from `shortest` to
/// `longest`, so that no length rounds to nothing or overflows the clock.
fn length(
    flag: &str,
    text: &str,
    unit: Duration,
    (shortest, longest): (f64, f64),
) -> Result<Duration, String> {
    text.parse()
        .ok()
        .filter(|number: &f64| (shortest..=longest).contains(number))
        .map(|number| unit.mul_f64(number))
        .ok_or_else(|| format!("{flag} takes a number from {shortest} to {longest}, not {text:?}"))
}

const SECOND: Duration = Duration::from_secs(1);
const MILLISECOND: Duration = Duration::from_millis(1);
/// The lengths `--seconds` takes: from a millisecond to a day.
const MEASURE_SECONDS: (f64, f64) = (0.001, 86_400.0);
/// The delays `--delay-ms` takes: from a microsecond to a minute.
const DELAY_MS: (f64, f64) = (0.001, 60_000.0);

/// Reads the arguments (without the program's name).
///
/// # Errors
/// A message naming the argument that is wrong.
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Command, String> {
    let mut options = Options::default();
    // What `--smoke` leaves as given.
    let (mut repetitions_given, mut seconds_given, mut leases_given) = (false, false, false);
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| args.next().ok_or_else(|| format!("{flag} needs a value"));
        match arg.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "--smoke" => options.smoke = true,
            "--scenario" => options.scenarios = list(&value(&arg)?, Scenario::parse)?,
            "--backend" => options.backends = list(&value(&arg)?, Backend::parse)?,
            "--postgres-url" => options.postgres_url = Some(value(&arg)?),
            "--mysql-url" => options.mysql_url = Some(value(&arg)?),
            "--repetitions" => {
                options.repetitions = number(&arg, &value(&arg)?)?.max(1);
                repetitions_given = true;
            }
            "--seconds" => {
                options.measure = length(&arg, &value(&arg)?, SECOND, MEASURE_SECONDS)?;
                seconds_given = true;
            }
            "--delay-ms" => {
                options.delay = Some(length(&arg, &value(&arg)?, MILLISECOND, DELAY_MS)?);
            }
            "--leases" => {
                options.leases = list(&value(&arg)?, |text| number("--leases", text))?;
                leases_given = true;
            }
            "--markdown" => options.markdown = Some(value(&arg)?),
            "--chart" => options.chart = Some(value(&arg)?),
            other => return Err(format!("unknown argument {other:?}; see --help")),
        }
    }
    if options.smoke {
        // Long enough for every code path to run once, short enough for CI.
        if !seconds_given {
            options.measure = Duration::from_millis(100);
        }
        if !repetitions_given {
            options.repetitions = 1;
        }
        if !leases_given {
            options.leases = vec![200];
        }
    }
    if options.chart.is_some() && !options.scenarios.contains(&Scenario::Cycles) {
        return Err(
            "--chart draws the cycles scenario, which --scenario leaves out; add cycles or drop --chart"
                .to_owned(),
        );
    }
    if options.delay.is_some() {
        for (flag, url) in [
            ("--postgres-url", &options.postgres_url),
            ("--mysql-url", &options.mysql_url),
        ] {
            if let Some(url) = url {
                reachable_through_the_proxy(flag, url)?;
            }
        }
    }
    Ok(Command::Run(Box::new(options)))
}

/// Refuses `url`, given with `flag`, unless its host is loopback: `--delay-ms`'s proxy forwards
/// to 127.0.0.1 and gives the program a URL naming 127.0.0.1, so any other host would silently
/// be replaced by this machine.
fn reachable_through_the_proxy(flag: &str, url: &str) -> Result<(), String> {
    match url::host(url) {
        Some(host) if url::is_loopback(host) => Ok(()),
        Some(host) => Err(format!(
            "--delay-ms reaches the server through a proxy on this machine that forwards to 127.0.0.1, but {flag} names the host {host:?}; give 127.0.0.1 or localhost, or leave out --delay-ms"
        )),
        None => Err(format!(
            "--delay-ms reaches the server through a proxy that forwards to 127.0.0.1, but {flag} names no host"
        )),
    }
}

fn list<T>(text: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    let items: Vec<T> = text
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(parse)
        .collect::<Result<_, _>>()?;
    if items.is_empty() {
        return Err(format!("an empty list: {text:?}"));
    }
    Ok(items)
}

fn number(flag: &str, text: &str) -> Result<usize, String> {
    text.replace('_', "")
        .parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{flag} takes positive whole numbers, not {text:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Options, String> {
        match parse(args.iter().map(|arg| (*arg).to_owned()))? {
            Command::Run(options) => Ok(*options),
            Command::Help => Err("help".to_owned()),
        }
    }

    #[test]
    fn reads_lists_and_numbers() {
        let options = run(&[
            "--backend",
            "memory,sqlx-sqlite",
            "--scenario",
            "many",
            "--leases",
            "1_000,20",
            "--repetitions",
            "5",
        ])
        .unwrap();
        assert_eq!(options.backends, [Backend::Memory, Backend::SqlxSqlite]);
        assert_eq!(options.scenarios, [Scenario::Many]);
        assert_eq!(options.leases, [1000, 20]);
        assert_eq!(options.repetitions, 5);
    }

    #[test]
    fn delay_is_read_in_milliseconds() {
        let options = run(&["--delay-ms", "0.25"]).unwrap();
        assert_eq!(options.delay, Some(Duration::from_micros(250)));
        assert!(run(&["--delay-ms", "-1"]).is_err());
        assert!(run(&["--delay-ms", "x"]).is_err());
        assert!(run(&["--delay-ms", "1e9"]).is_err());
    }

    #[test]
    fn lengths_that_round_to_nothing_or_overflow_are_refused() {
        assert_eq!(
            run(&["--seconds", "0.5"]).unwrap().measure,
            Duration::from_millis(500)
        );
        assert_eq!(
            run(&["--seconds", "86400"]).unwrap().measure,
            Duration::from_secs(86_400)
        );
        for seconds in ["1e20", "1e19", "1e-10", "0", "-1", "NaN", "inf"] {
            let refused = run(&["--seconds", seconds]).unwrap_err();
            assert!(
                refused.contains("--seconds takes a number from 0.001 to 86400"),
                "{seconds}: {refused}"
            );
        }
    }

    #[test]
    fn smoke_shortens_everything_not_given() {
        let options = run(&["--smoke"]).unwrap();
        assert!(options.measure <= Duration::from_millis(100));
        assert_eq!(options.repetitions, 1);
        assert_eq!(options.leases, [200]);
        assert_eq!(options.scenarios, Scenario::ALL);

        // Given before or after `--smoke`, a value is kept.
        let options = run(&[
            "--repetitions",
            "4",
            "--smoke",
            "--seconds",
            "3",
            "--leases",
            "50",
        ])
        .unwrap();
        assert_eq!(options.repetitions, 4);
        assert_eq!(options.measure, Duration::from_secs(3));
        assert_eq!(options.leases, [50]);

        let options = run(&["--smoke", "--seconds", "0.5"]).unwrap();
        assert_eq!(options.measure, Duration::from_millis(500));
        assert_eq!(options.repetitions, 1);
        assert_eq!(options.leases, [200]);
    }

    #[test]
    fn a_chart_needs_the_cycles_scenario() {
        let error = run(&["--scenario", "many,fenced", "--chart", "c.svg"]).unwrap_err();
        assert!(error.contains("--chart"), "{error}");
        assert!(run(&["--scenario", "many,cycles", "--chart", "c.svg"]).is_ok());
        assert!(run(&["--chart", "c.svg"]).is_ok());
        assert!(run(&["--scenario", "many"]).is_ok());
    }

    #[test]
    fn a_delayed_server_must_be_on_loopback() {
        for url in [
            "postgres://postgres@127.0.0.1:5432/test",
            "postgres://u:p@localhost:5432/test",
        ] {
            assert!(
                run(&["--delay-ms", "1", "--postgres-url", url]).is_ok(),
                "{url}"
            );
        }
        let error = run(&[
            "--postgres-url",
            "postgres://postgres@db.example:5432/test",
            "--delay-ms",
            "1",
        ])
        .unwrap_err();
        assert!(error.contains("--postgres-url"), "{error}");
        assert!(error.contains("\"db.example\""), "{error}");
        let error = run(&[
            "--delay-ms",
            "1",
            "--mysql-url",
            "mysql://root@10.0.0.5:3306/test",
        ])
        .unwrap_err();
        assert!(error.contains("--mysql-url"), "{error}");
        assert!(error.contains("\"10.0.0.5\""), "{error}");
        // Loopback, but not where the proxy forwards.
        assert!(
            run(&[
                "--delay-ms",
                "1",
                "--postgres-url",
                "postgres://u@[::1]:5432/test"
            ])
            .is_err()
        );
        // Without a delay, any host is reached directly.
        assert!(run(&["--mysql-url", "mysql://root@10.0.0.5:3306/test"]).is_ok());
    }

    #[test]
    fn refuses_what_it_does_not_know() {
        assert!(run(&["--backend", "oracle"]).is_err());
        assert!(run(&["--leases", "0"]).is_err());
        assert!(run(&["--seconds"]).is_err());
        assert!(run(&["--frobnicate"]).is_err());
        assert_eq!(run(&["--help"]).unwrap_err(), "help");
    }
}
