//! What the figures were measured on: the machine, the date and the command.

use std::fmt::Write as _;

use crate::args::Options;
use crate::servers::Servers;

/// The machine, the date, the command and where each backend ran, as Markdown.
pub fn describe(options: &Options, servers: &Servers) -> String {
    let mut out = String::from("## Run\n\n");
    let _ = writeln!(out, "- date: {}", today());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let _ = writeln!(
        out,
        "- machine: {cores} cores, {} ({})",
        cpu_model().unwrap_or_else(|| "unknown CPU".to_owned()),
        std::env::consts::ARCH
    );
    let args: Vec<String> = std::env::args().skip(1).collect();
    let _ = writeln!(
        out,
        "- command: `cargo run --release -p lease-bench --{}{}`",
        if args.is_empty() { "" } else { " " },
        args.join(" ")
    );
    if cfg!(debug_assertions) {
        out.push_str("- built without optimisations: these figures are not for comparison\n");
    }
    if options.smoke {
        out.push_str("- smoke run: seconds long, its figures mean nothing\n");
    }
    for backend in &options.backends {
        let _ = writeln!(out, "- {}: {}", backend.key(), servers.describe(*backend));
    }
    out
}

/// Today's date (UTC) as `YYYY-MM-DD`.
fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (year, month, day) = civil_from_days((secs / 86_400) as i64);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The calendar date of a day counted from 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|line| line.starts_with("model name"))
        .and_then(|line| line.split(':').nth(1))
        .map(|model| model.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::civil_from_days;

    #[test]
    fn dates_from_day_numbers() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }
}
