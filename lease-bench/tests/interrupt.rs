//! An interrupted run stops and removes its private servers. Killed by a signal's default
//! action, the program would leave them running, with their data directories: MariaDB ignores
//! the SIGINT a terminal's Ctrl-C sends the whole process group, and SIGTERM reaches the
//! program alone.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use lease_tests::env;

/// How long the servers may take to start, and the program to stop once signalled.
const START_LIMIT: Duration = Duration::from_secs(180);
const STOP_LIMIT: Duration = Duration::from_secs(60);

#[test]
fn a_run_interrupted_by_sigint_leaves_no_private_server_behind() {
    interrupted_run_cleans_up("INT", 130);
}

#[test]
fn a_run_interrupted_by_sigterm_leaves_no_private_server_behind() {
    interrupted_run_cleans_up("TERM", 143);
}

/// Starts a long run on private servers, sends `signal` once they are up, and checks that the
/// program exits with `code` and that nothing of its servers is left.
fn interrupted_run_cleans_up(signal: &str, code: i32) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lease-bench"))
        .args([
            "--scenario",
            "fenced",
            "--backend",
            "sqlx-postgres,sqlx-mariadb",
        ])
        .args(["--seconds", "30", "--repetitions", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the benchmark program starts");
    let pid = child.id();
    let (stdout, stderr) = (drain(child.stdout.take()), drain(child.stderr.take()));

    // The program prints its run's description once its servers have started.
    let started = Instant::now();
    loop {
        match stdout.recv_timeout(Duration::from_millis(200)) {
            Ok(line) if line.starts_with("## Run") => break,
            Ok(_) => {}
            Err(_) if child.try_wait().unwrap().is_some() => {
                panic!(
                    "lease-bench ended before its run began:\n{}",
                    collect(&stderr)
                )
            }
            Err(_) => {}
        }
        if started.elapsed() > START_LIMIT {
            stop(&mut child);
            panic!("lease-bench did not begin within {START_LIMIT:?}");
        }
    }
    let servers = leftovers(pid);
    for kind in ["postgres", "mariadb"] {
        if !servers.iter().any(|dir| {
            dir.to_string_lossy()
                .contains(&format!("lease-test-{kind}-"))
        }) {
            stop(&mut child);
            env::skip_or_fail(
                kind,
                &format!("no private server started:\n{}", collect(&stderr)),
            );
            return;
        }
    }

    send(signal, pid);
    let status = wait(&mut child);
    let messages = collect(&stderr);
    // What the run left, taken stock of and then cleared away before any verdict, so that a
    // failing run does not leave it for the machine's next user.
    let running: Vec<String> = servers.iter().flat_map(|dir| processes(dir)).collect();
    let left = leftovers(pid);
    for pid in &running {
        let _ = Command::new("kill").args(["-KILL", pid]).status();
    }
    for dir in &left {
        let _ = std::fs::remove_dir_all(dir);
    }

    assert_eq!(
        status.code(),
        Some(code),
        "lease-bench should exit with {code} after SIG{signal}, not {status}:\n{messages}"
    );
    assert!(
        messages.contains("interrupted"),
        "lease-bench should say that it was interrupted:\n{messages}"
    );
    assert!(
        running.is_empty(),
        "SIG{signal} left servers of the run running: pids {running:?}"
    );
    assert!(
        left.is_empty(),
        "SIG{signal} left the run's directories behind: {left:?}"
    );
}

/// The processes whose command line names `dir`: a server that runs from it.
fn processes(dir: &Path) -> Vec<String> {
    let found = Command::new("pgrep")
        .args(["-f", &dir.to_string_lossy()])
        .output()
        .expect("pgrep runs");
    String::from_utf8_lossy(&found.stdout)
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// Sends `signal` (`INT`, `TERM`) to process `pid`.
fn send(signal: &str, pid: u32) {
    let sent = Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success(), "kill -{signal} {pid} failed");
}

/// Ends a run the test gives up on, as gently as the program allows, so that the test leaves
/// no server behind either.
fn stop(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = wait(child);
}

/// Reads `pipe` to its end on a thread of its own, so the program never blocks on a full pipe,
/// and hands over its lines.
fn drain(pipe: Option<impl std::io::Read + Send + 'static>) -> mpsc::Receiver<String> {
    let (sender, receiver) = mpsc::channel();
    let pipe = pipe.expect("the pipe was asked for");
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                return;
            }
        }
    });
    receiver
}

/// What `lines` has received so far, or, once the program has ended, all of it.
fn collect(lines: &mpsc::Receiver<String>) -> String {
    let mut text = String::new();
    while let Ok(line) = lines.recv_timeout(Duration::from_millis(500)) {
        text.push_str(&line);
        text.push('\n');
    }
    text
}

/// Waits for `child` to exit, at most [`STOP_LIMIT`]; kills it and fails after that.
fn wait(child: &mut Child) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if started.elapsed() > STOP_LIMIT {
            let _ = child.kill();
            panic!("lease-bench did not stop within {STOP_LIMIT:?} of the signal");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The directories of process `pid`'s run in the temporary directory: its private servers'
/// (`lease-test-<kind>-<pid>-...`) and its SQLite directory (`lease-bench-<pid>`).
fn leftovers(pid: u32) -> Vec<PathBuf> {
    let mine = |name: &str| {
        name == format!("lease-bench-{pid}")
            || ["postgres", "mariadb"]
                .iter()
                .any(|kind| name.starts_with(&format!("lease-test-{kind}-{pid}-")))
    };
    std::fs::read_dir(std::env::temp_dir())
        .expect("the temporary directory is readable")
        .filter_map(Result::ok)
        .filter(|entry| mine(&entry.file_name().to_string_lossy()))
        .map(|entry| entry.path())
        .collect()
}
