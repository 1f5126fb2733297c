//! The default way to run the program, on private servers it starts itself, through the
//! delaying proxy: the smoke tests give every run the test servers' URLs, so only here do the
//! private PostgreSQL, its WAL figures and the proxy run. Asserts nothing about speed.

use std::process::Command;

use lease_tests::env;

/// The contended scenario on a private PostgreSQL reached through the proxy: the report says
/// where it ran, and every row of its table has a WAL figure, not the `-` of a server that is
/// not private.
#[test]
fn a_private_postgres_through_the_proxy_gives_wal_figures() {
    let output = Command::new(env!("CARGO_BIN_EXE_lease-bench"))
        .args([
            "--smoke",
            "--scenario",
            "contended",
            "--backend",
            "sqlx-postgres",
        ])
        .args(["--delay-ms", "0.5"])
        .output()
        .expect("the benchmark program starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Where PostgreSQL's server programs are missing (a failure where every backend must run).
    if let Some(why) = [&stdout, &stderr].iter().find_map(|text| {
        text.lines()
            .find(|line| line.contains("no private PostgreSQL server"))
    }) {
        return env::skip_or_fail("postgres (private server)", why);
    }
    assert!(
        output.status.success(),
        "lease-bench failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stdout.contains("- sqlx-postgres: private server")
            && stdout.contains("reached through a proxy that delays every chunk by 500 µs"),
        "the run does not say it ran on a private server through the proxy:\n{stdout}"
    );
    let rows = table_rows(
        &stdout,
        "### Contended acquire on one held name: sqlx-postgres",
    );
    let header = &rows[0];
    let column = header
        .iter()
        .position(|cell| cell == "WAL bytes per failed attempt")
        .unwrap_or_else(|| panic!("no WAL column in {header:?}"));
    let figures: Vec<&String> = rows[2..].iter().map(|row| &row[column]).collect();
    assert!(!figures.is_empty(), "the table has no rows:\n{stdout}");
    for figure in figures {
        assert!(
            figure.replace(',', "").parse::<f64>().is_ok(),
            "a WAL cell is {figure:?}, not a figure:\n{stdout}"
        );
    }
}

/// The cells of the Markdown table that follows `heading` in `report`, header and separator
/// rows included.
fn table_rows(report: &str, heading: &str) -> Vec<Vec<String>> {
    let (_, after) = report
        .split_once(heading)
        .unwrap_or_else(|| panic!("no {heading:?} in:\n{report}"));
    let rows: Vec<Vec<String>> = after
        .lines()
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            line.trim_matches('|')
                .split('|')
                .map(|cell| cell.trim().to_owned())
                .collect()
        })
        .collect();
    assert!(rows.len() >= 2, "no table after {heading:?} in:\n{report}");
    rows
}
