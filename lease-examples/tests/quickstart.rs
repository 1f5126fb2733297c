//! The quickstart demo, run faster than `cargo run --example quickstart` runs it (the same story
//! in about 12 s instead of 25), checked for what it promises: every job ran, the killed
//! instance's leases were taken over, and no round ran twice.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lease_examples::quickstart::{self, Settings};

/// Collects what the demo prints.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_every_job_takes_over_after_the_kill_and_never_runs_a_round_twice() {
    let out = Captured::default();
    let settings = Settings::with_minute(Duration::from_millis(120));
    let summary = quickstart::run(settings.clone(), out.clone())
        .await
        .expect("the demo runs");
    let printed = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();

    assert!(summary.is_clean(), "{printed}");
    assert!(printed.contains("double runs: 0"), "{printed}");
    assert!(printed.contains("no double runs"), "{printed}");

    // Every lease of the story ran: the sweep on the hour twice, mail checks once per 15 minutes,
    // the leader jobs on every node.
    for lease in [
        "sweep",
        "alerts",
        "mail-checks",
        "uptime:node-1",
        "uptime:node-2",
    ] {
        let rounds = summary
            .leases
            .get(lease)
            .unwrap_or_else(|| panic!("{lease} never ran:\n{printed}"));
        assert!(rounds.run() > 0, "{lease}:\n{printed}");
    }
    assert_eq!(summary.leases["sweep"].run(), 2, "{printed}");
    // Seven periods of 15 minutes start within the 100; on a machine slow enough that taking the
    // lease lags a simulated minute behind its tick, the minimum hold can cost one of them.
    assert!(summary.leases["mail-checks"].run() >= 6, "{printed}");
    // Instances that found mail-checks held skipped it, though its work takes one minute of 15:
    // the minimum hold kept it taken.
    assert!(summary.leases["mail-checks"].skipped >= 7, "{printed}");
    assert!(summary.rounds_skipped() > 0, "{printed}");

    // The alert leader was killed; somebody else took alerts over once its lease lapsed, and
    // the rounds in between were missed: what a crash costs.
    let alerts = summary
        .takeovers
        .iter()
        .find(|takeover| takeover.lease == "alerts")
        .unwrap_or_else(|| panic!("nobody took alerts over:\n{printed}"));
    assert_ne!(alerts.from, alerts.to);
    assert!(alerts.fence >= 2, "{printed}");
    assert!(
        alerts.after <= settings.ttl.get() + Duration::from_secs(3),
        "took {:?}:\n{printed}",
        alerts.after
    );
    assert!(summary.leases["alerts"].missed > 0, "{printed}");
    assert!(printed.contains("takes over at round"), "{printed}");
    assert!(
        printed.contains(&format!("instance {} killed", alerts.from)),
        "{printed}"
    );

    // The alert leader then was restarted gracefully: every lease it held was taken over at
    // the next campaign's retry (SQLite pushes no releases; a retry every quarter TTL), well
    // inside the TTL a crash costs: a quarter TTL and half a TTL to spare for a loaded machine.
    let graceful: Vec<_> = summary.takeovers.iter().filter(|t| t.graceful).collect();
    assert!(
        graceful.iter().any(|t| t.lease == "alerts"),
        "alerts not handed over gracefully:\n{printed}"
    );
    for takeover in graceful {
        assert!(
            takeover.after < settings.ttl.get() * 3 / 4,
            "{takeover:?} after a graceful shutdown:\n{printed}"
        );
    }
    assert!(printed.contains("shuts down gracefully"), "{printed}");
    assert!(summary.errors.is_empty(), "{printed}");
}

/// A simulated minute of no time, or of hours, is refused before anything starts (a minute of
/// zero made every simulated time infinite, and the demo panicked converting it).
#[tokio::test]
async fn a_minute_out_of_bounds_is_refused() {
    for minute in [Duration::ZERO, Duration::from_secs(3600)] {
        let refused = quickstart::run(Settings::with_minute(minute), std::io::sink()).await;
        let error = refused.expect_err("an out-of-bounds minute must be refused");
        assert!(
            error.to_string().contains("a simulated minute must take"),
            "{minute:?}: {error}"
        );
    }
}
