//! Crates outside the workspace, each made from a backend's README alone: its `[dependencies]`
//! as the README gives them (the backend by path instead of by version, nothing else) and the
//! README's first example as its library. `cargo check` proves that one dependency, with the
//! features the README names, is enough: lease-core's client and its runtime come through the
//! backend's re-export and feature forwarding. Each has its control: without one of the
//! features the README names, the same crate does not build, so the check can fail.
//!
//! They build offline against the workspace's lock, in target directories of their own under
//! cargo's temporary directory (the first run checks the drivers once; later runs reuse it).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The text of the first fenced block of `kind` in `markdown`, without rustdoc's hidden lines
/// (`# ...`, which wrap an example for the crate's own doctests: a `cfg` on its features, a
/// `main`).
fn first_block(markdown: &str, kind: &str) -> String {
    let start = markdown
        .find(&format!("```{kind}"))
        .unwrap_or_else(|| panic!("the README has no {kind} block"));
    let body = &markdown[start..];
    let body = &body[body.find('\n').expect("a fence line") + 1..];
    let body = &body[..body.find("\n```").expect("a closing fence")];
    body.lines()
        .filter(|line| !(line.starts_with("# ") || *line == "#"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Builds the crate that `backend`'s README describes, then the control without `feature`.
fn readme_builds_alone(backend: &str, feature: &str, control_error: &str) {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_owned();
    let readme = std::fs::read_to_string(workspace.join(backend).join("README.md")).unwrap();
    let dependencies = first_block(&readme, "toml");
    assert!(
        dependencies.starts_with("[dependencies]\n") && dependencies.lines().count() == 2,
        "the README's dependencies are one line: {dependencies}"
    );
    let dependencies = dependencies.replacen(
        "{ version = ",
        &format!(
            "{{ path = {:?}, version = ",
            workspace.join(backend).display().to_string()
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

    let checked = check(backend, &dependencies, &example, &workspace);
    assert!(checked.success, "cargo check failed:\n{}", checked.stderr);
    assert!(
        !checked.stderr.contains("src/lib.rs"),
        "the README's example has warnings:\n{}",
        checked.stderr
    );

    let without = dependencies.replacen(&format!(", \"{feature}\""), "", 1);
    assert_ne!(without, dependencies, "the README names {feature}");
    let control = check(
        &format!("{backend}-control"),
        &without,
        &example,
        &workspace,
    );
    assert!(
        !control.success,
        "built without {feature}:\n{}",
        control.stderr
    );
    assert!(control.stderr.contains(control_error), "{}", control.stderr);
}

#[test]
fn lease_sqlx_alone_builds_its_readmes_first_example() {
    readme_builds_alone("lease-sqlx", "runtime-tokio", "TokioRuntime");
}

#[test]
fn lease_diesel_alone_builds_its_readmes_first_example() {
    readme_builds_alone("lease-diesel", "deadpool", "pooled_connection");
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
            "[package]\nname = \"one-dependency-{name}\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\
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
