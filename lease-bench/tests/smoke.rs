//! The benchmark program runs: every scenario on every backend in its seconds-long smoke mode,
//! printing its tables, writing its chart and its Markdown. Asserts nothing about speed. One
//! test per backend, so the backends run side by side.

use std::process::Command;

use lease_tests::env;

/// Whether something answers at the host and port of `url`.
fn reachable(url: &str) -> Result<(), String> {
    let rest = url.split("://").nth(1).ok_or("no scheme")?;
    let authority = rest.split('/').next().unwrap_or(rest);
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    let addrs = std::net::ToSocketAddrs::to_socket_addrs(host_port)
        .map_err(|e| format!("{host_port}: {e}"))?;
    for addr in addrs {
        if std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(2)).is_ok() {
            return Ok(());
        }
    }
    Err(format!("nothing answers at {host_port}"))
}

/// Runs every scenario on `backend` in smoke mode, one program per backend so the backends run
/// side by side, and checks its tables, chart and Markdown. `server` is the URL of the server
/// it needs, if any, and the backend's name for a skip.
fn every_scenario_runs_on(backend: &str, server: Option<(&str, String)>) {
    if let Some((name, url)) = &server
        && let Err(why) = reachable(url)
    {
        return env::skip_or_fail(name, &why);
    }
    let dir = std::env::temp_dir().join(format!(
        "lease-bench-smoke-{}-{backend}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let (chart, markdown) = (dir.join("chart.svg"), dir.join("results.md"));

    let output = Command::new(env!("CARGO_BIN_EXE_lease-bench"))
        .arg("--smoke")
        .args(["--backend", backend])
        .args(["--postgres-url", &env::postgres_url()])
        .args(["--mysql-url", &env::mysql_url()])
        .arg("--chart")
        .arg(&chart)
        .arg("--markdown")
        .arg(&markdown)
        .output()
        .expect("the benchmark program starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "lease-bench --smoke failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let mut titles = vec![
        "Acquire and release cycles",
        "Contended acquire on one held name",
        "Many leases on a pool of 2 connections",
        "Handover",
    ];
    if backend != "memory" {
        titles.extend([
            "Fenced writes",
            "Renewal while a fenced transaction is open",
        ]);
    }
    if backend.ends_with("postgres") {
        titles.push("Growth of the table");
    }
    for title in titles {
        let heading = format!("### {title}: {backend}\n");
        assert!(
            stdout.contains(&heading),
            "no table {heading:?} in:\n{stdout}"
        );
    }
    let svg = std::fs::read_to_string(&chart).expect("the chart was written");
    assert!(svg.starts_with("<svg") && svg.contains("</svg>"), "{svg}");
    let written = std::fs::read_to_string(&markdown).expect("the Markdown was written");
    assert!(
        written.contains("## Run") && written.contains(&format!("### Handover: {backend}")),
        "{written}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_scenario_runs_on_memory() {
    every_scenario_runs_on("memory", None);
}

#[test]
fn every_scenario_runs_on_sqlx_sqlite() {
    every_scenario_runs_on("sqlx-sqlite", None);
}

#[test]
fn every_scenario_runs_on_diesel_sqlite() {
    every_scenario_runs_on("diesel-sqlite", None);
}

#[test]
fn every_scenario_runs_on_sqlx_postgres() {
    every_scenario_runs_on("sqlx-postgres", Some(("postgres", env::postgres_url())));
}

#[test]
fn every_scenario_runs_on_diesel_postgres() {
    every_scenario_runs_on("diesel-postgres", Some(("postgres", env::postgres_url())));
}

#[test]
fn every_scenario_runs_on_sqlx_mariadb() {
    every_scenario_runs_on("sqlx-mariadb", Some(("mariadb", env::mysql_url())));
}

#[test]
fn every_scenario_runs_on_diesel_mariadb() {
    every_scenario_runs_on("diesel-mariadb", Some(("mariadb", env::mysql_url())));
}

#[test]
fn help_names_every_option() {
    let output = Command::new(env!("CARGO_BIN_EXE_lease-bench"))
        .arg("--help")
        .output()
        .expect("the benchmark program starts");
    assert!(output.status.success());
    let usage = String::from_utf8_lossy(&output.stdout);
    for option in [
        "--scenario",
        "--backend",
        "--smoke",
        "--chart",
        "--markdown",
        "--leases",
    ] {
        assert!(usage.contains(option), "{option} missing from:\n{usage}");
    }
}
