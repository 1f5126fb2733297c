//! The benchmark program runs: every scenario on every backend in its seconds-long smoke mode,
//! printing its tables, writing its chart and its Markdown. Asserts nothing about speed.

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

#[test]
fn every_scenario_runs_on_every_backend() {
    let (postgres, mysql) = (env::postgres_url(), env::mysql_url());
    let mut backends = vec!["memory", "sqlx-sqlite", "diesel-sqlite"];
    match reachable(&postgres) {
        Ok(()) => backends.extend(["sqlx-postgres", "diesel-postgres"]),
        Err(why) => env::skip_or_fail("postgres", &why),
    }
    match reachable(&mysql) {
        Ok(()) => backends.extend(["sqlx-mariadb", "diesel-mariadb"]),
        Err(why) => env::skip_or_fail("mariadb", &why),
    }
    let dir = std::env::temp_dir().join(format!("lease-bench-smoke-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (chart, markdown) = (dir.join("chart.svg"), dir.join("results.md"));

    let output = Command::new(env!("CARGO_BIN_EXE_lease-bench"))
        .arg("--smoke")
        .args(["--backend", &backends.join(",")])
        .args(["--postgres-url", &postgres, "--mysql-url", &mysql])
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
    for backend in &backends {
        for title in [
            "Acquire and release cycles",
            "Contended acquire on one held name",
            "Many leases on a pool of 2 connections",
            "Handover",
        ] {
            let heading = format!("### {title}: {backend}\n");
            assert!(
                stdout.contains(&heading),
                "no table {heading:?} in:\n{stdout}"
            );
        }
        let mut more = Vec::new();
        if *backend != "memory" {
            more.extend([
                "Fenced writes",
                "Renewal while a fenced transaction is open",
            ]);
        }
        if backend.ends_with("postgres") {
            more.push("Growth of the table");
        }
        for title in more {
            let heading = format!("### {title}: {backend}\n");
            assert!(
                stdout.contains(&heading),
                "no table {heading:?} in:\n{stdout}"
            );
        }
    }
    let svg = std::fs::read_to_string(&chart).expect("the chart was written");
    assert!(svg.starts_with("<svg") && svg.contains("</svg>"), "{svg}");
    let written = std::fs::read_to_string(&markdown).expect("the Markdown was written");
    assert!(written.contains("## Run") && written.contains("### Handover: memory"));
    let _ = std::fs::remove_dir_all(&dir);
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
