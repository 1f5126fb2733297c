//! A crate outside the workspace, made from lease-sqlx's README alone: its `[dependencies]` as
//! the README gives them (lease-sqlx by path instead of by version, nothing else) and the
//! README's first example as its library. `cargo check` proves that one dependency, with the
//! features the README names, is enough: lease-core's client and its tokio runtime come through
//! lease-sqlx's re-export and feature forwarding.
//!
//! It builds offline against the workspace's lock, in a target directory of its own under
//! cargo's temporary directory (the first run checks sqlx and tokio once; later runs reuse it).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The text of the first fenced block of `kind` in `markdown`, with rustdoc's hidden-line
/// markers (`# `) taken off, as rustdoc compiles it.
fn first_block(markdown: &str, kind: &str) -> String {
    let start = markdown
        .find(&format!("```{kind}"))
        .unwrap_or_else(|| panic!("the README has no {kind} block"));
    let body = &markdown[start..];
    let body = &body[body.find('\n').expect("a fence line") + 1..];
    let body = &body[..body.find("\n```").expect("a closing fence")];
    body.lines()
        .map(|line| match line.strip_prefix("# ") {
            Some(hidden) => hidden,
            None if line == "#" => "",
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_readmes_first_example_builds_with_lease_sqlx_alone() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_owned();
    let readme = std::fs::read_to_string(workspace.join("lease-sqlx/README.md")).unwrap();
    let dependencies = first_block(&readme, "toml");
    assert!(
        dependencies.starts_with("[dependencies]\n") && dependencies.lines().count() == 2,
        "the README's dependencies are one line: {dependencies}"
    );
    let lease_sqlx = workspace.join("lease-sqlx");
    let dependencies = dependencies.replacen(
        "{ version = ",
        &format!(
            "{{ path = {:?}, version = ",
            lease_sqlx.display().to_string()
        ),
        1,
    );
    assert!(dependencies.contains("path = "), "{dependencies}");
    let example = first_block(&readme, "rust,no_run");
    assert!(
        example.contains("LeaseClient"),
        "the first example uses the client"
    );
    assert!(
        example.contains("run_exclusive"),
        "the first example runs work under a lease"
    );

    let checked = check("one-dependency", &dependencies, &example, &workspace);
    assert!(checked.success, "cargo check failed:\n{}", checked.stderr);
    assert!(
        !checked.stderr.contains("src/lib.rs"),
        "the README's example has warnings:\n{}",
        checked.stderr
    );

    // The control: without the runtime feature the README names, the same crate does not
    // build (the client's runtime comes only through lease-sqlx's feature), so the check above
    // can fail.
    let without_runtime = dependencies.replacen(", \"runtime-tokio\"", "", 1);
    assert_ne!(without_runtime, dependencies);
    let control = check(
        "one-dependency-control",
        &without_runtime,
        &example,
        &workspace,
    );
    assert!(
        !control.success,
        "built without the runtime feature:\n{}",
        control.stderr
    );
    assert!(
        control.stderr.contains("TokioRuntime"),
        "{}",
        control.stderr
    );
}

/// What `cargo check` said of a crate.
struct Checked {
    success: bool,
    stderr: String,
}

/// Writes the crate `name` with `dependencies` and `example` as its library, and checks it
/// offline against the workspace's lock.
fn check(name: &str, dependencies: &str, example: &str, workspace: &Path) -> Checked {
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let krate = root.join(name);
    std::fs::create_dir_all(krate.join("src")).unwrap();
    std::fs::write(
        krate.join("Cargo.toml"),
        format!(
            "[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\
             publish = false\n\n# Not a member of the lease workspace.\n[workspace]\n\n\
             {dependencies}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        krate.join("src/lib.rs"),
        format!("//! lease-sqlx's README.\n\n{example}\n"),
    )
    .unwrap();
    std::fs::copy(workspace.join("Cargo.lock"), krate.join("Cargo.lock")).unwrap();

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args(["check", "--offline", "--message-format", "short"])
        .current_dir(&krate)
        .env("CARGO_TARGET_DIR", root.join(format!("{name}-target")))
        .env_remove("RUSTFLAGS")
        .output()
        .expect("cargo runs");
    Checked {
        success: output.status.success(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}
