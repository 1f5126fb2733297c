//! With the `metrics` feature the client's statistics are emitted under their documented names
//! and labels. One test, because the recorder is global to the test binary.

#![cfg(feature = "metrics")]

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use common::{Faulty, Mode, billing_client, paused_runtime, tokio_memory};
use lease_core::runtime::TokioRuntime;
use lease_core::{FencedCheck, LeaseClient, LeaseLabel, LeaseName};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

/// A metric by name and labels, sorted, such as `lease_held{lease=sweep,store=billing}`.
fn key(name: &str, labels: &[(&str, &str)]) -> String {
    let mut labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    labels.sort();
    format!("{name}{{{}}}", labels.join(","))
}

#[test]
fn statistics_are_emitted_under_their_documented_names_and_labels() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this binary");

    let runtime = paused_runtime();
    let (relay_held, checks_held, audit_held) = runtime.block_on(async {
        let store = Faulty::new(tokio_memory());
        let client = billing_client(Arc::clone(&store));
        let sweep = client.try_acquire("sweep").await.unwrap().unwrap();
        assert!(client.try_acquire("sweep").await.unwrap().is_none());
        sweep.handle().record_fenced_check(FencedCheck::Passed);
        sweep.handle().record_fenced_check(FencedCheck::NotHeld);
        tokio::time::sleep(Duration::from_millis(300)).await;
        sweep.release().await.unwrap();
        // A renewal on its way when the lease is given back answers `false` after the release:
        // not a rejected renewal, as the lease was not lost.
        let late = client.try_acquire("late").await.unwrap().unwrap();
        store.delay_renewals(Duration::from_millis(200));
        tokio::time::sleep(Duration::from_millis(300)).await;
        late.release().await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        // Nor is one on its way when the lease is found gone (a fenced check) and lost: its
        // refusal is that same loss, counted once, under `not_held`.
        let gone = client.try_acquire("gone").await.unwrap().unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            client
                .store()
                .release(
                    &LeaseName::new("gone").unwrap(),
                    gone.holder(),
                    Duration::ZERO
                )
                .await
                .unwrap()
        );
        let _ = gone.mark_not_held();
        tokio::time::sleep(Duration::from_millis(300)).await;
        drop(gone);
        // Nor, renewed, is one on its way when the lease is lost otherwise while the row stays
        // its own (a fenced check that found another fence): the store renews the row, and the
        // answer keeps nothing.
        let stale = client.try_acquire("stale").await.unwrap().unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let _ = stale.mark_not_held();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!stale.is_held());
        drop(stale);
        store.delay_renewals(Duration::ZERO);
        let report = client.try_acquire("report").await.unwrap().unwrap();
        store.set(Mode::Fail);
        assert!(client.try_acquire("digest").await.is_err());
        let _ = report.lost().await;
        // A lost holding let go after the name was acquired again leaves the gauge at 1: the
        // second holding is kept past the snapshot.
        store.set(Mode::Pass);
        let relay = LeaseName::new("relay").unwrap();
        let lost = client.try_acquire(relay.clone()).await.unwrap().unwrap();
        let _ = lost.mark_not_held();
        assert!(
            client
                .store()
                .release(&relay, lost.holder(), Duration::ZERO)
                .await
                .unwrap()
        );
        let again = client.try_acquire(relay).await.unwrap().unwrap();
        drop(lost);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(again.is_held());
        // Leases named per entity, labelled by their kind: one set of series for all of them.
        let checks = LeaseClient::builder(tokio_memory(), TokioRuntime)
            .store_label("checks")
            .lease_label(LeaseLabel::Kind)
            .build()
            .unwrap();
        let mut kept = Vec::new();
        for customer in 0..40 {
            let check = checks
                .try_acquire(format!("check:{customer}"))
                .await
                .unwrap()
                .unwrap();
            if customer < 3 {
                kept.push(check);
            } else {
                check.release().await.unwrap();
            }
        }
        let plain = checks.try_acquire("audit").await.unwrap().unwrap();
        (again, kept, plain)
    });

    let metrics: HashMap<String, DebugValue> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(composite, _, _, value)| {
            let key = composite.key();
            let labels: Vec<(&str, &str)> = key.labels().map(|l| (l.key(), l.value())).collect();
            (self::key(key.name(), &labels), value)
        })
        .collect();
    let counter = |name: &str, labels: &[(&str, &str)]| match metrics.get(&key(name, labels)) {
        Some(DebugValue::Counter(count)) => *count,
        other => panic!("{} is {other:?}; all: {metrics:#?}", key(name, labels)),
    };
    let gauge = |name: &str, labels: &[(&str, &str)]| match metrics.get(&key(name, labels)) {
        Some(DebugValue::Gauge(value)) => value.into_inner(),
        other => panic!("{} is {other:?}; all: {metrics:#?}", key(name, labels)),
    };
    let sweep = [("lease", "sweep"), ("store", "billing")];
    let report = [("lease", "report"), ("store", "billing")];
    let with = |base: &[(&'static str, &'static str)], extra: (&'static str, &'static str)| {
        let mut labels = base.to_vec();
        labels.push(extra);
        labels
    };

    let acquisitions = "lease_acquisitions_total";
    assert_eq!(counter(acquisitions, &with(&sweep, ("result", "won"))), 1);
    assert_eq!(
        counter(acquisitions, &with(&sweep, ("result", "skipped"))),
        1
    );
    assert_eq!(
        counter(
            acquisitions,
            &[
                ("lease", "digest"),
                ("store", "billing"),
                ("result", "failed")
            ]
        ),
        1
    );
    assert_eq!(
        counter("lease_renewals_total", &with(&sweep, ("result", "renewed"))),
        1
    );
    assert!(counter("lease_renewals_total", &with(&report, ("result", "failed"))) >= 1);
    let late = [("lease", "late"), ("store", "billing")];
    assert!(
        metrics.contains_key(&key("lease_releases_total", &late)),
        "{metrics:#?}"
    );
    assert_eq!(
        metrics.get(&key(
            "lease_renewals_total",
            &with(&late, ("result", "rejected"))
        )),
        None,
        "a renewal answered after a clean release counted as rejected"
    );
    let gone = [("lease", "gone"), ("store", "billing")];
    assert_eq!(
        counter("lease_losses_total", &with(&gone, ("reason", "not_held"))),
        1
    );
    assert_eq!(
        metrics.get(&key(
            "lease_renewals_total",
            &with(&gone, ("result", "rejected"))
        )),
        None,
        "a renewal answered after the lease was found gone counted as a rejection too"
    );
    let stale = [("lease", "stale"), ("store", "billing")];
    assert_eq!(
        counter("lease_losses_total", &with(&stale, ("reason", "not_held"))),
        1
    );
    for result in ["renewed", "late", "rejected"] {
        assert_eq!(
            metrics.get(&key(
                "lease_renewals_total",
                &with(&stale, ("result", result))
            )),
            None,
            "a renewal answered after the lease was lost counted as {result}"
        );
    }
    assert_eq!(counter("lease_releases_total", &sweep), 1);
    let fenced_checks = "lease_fenced_checks_total";
    assert_eq!(
        counter(fenced_checks, &with(&sweep, ("result", "passed"))),
        1
    );
    assert_eq!(
        counter(fenced_checks, &with(&sweep, ("result", "not_held"))),
        1
    );
    assert_eq!(
        counter(
            "lease_losses_total",
            &with(&report, ("reason", "deadline_passed"))
        ),
        1
    );
    assert_eq!(gauge("lease_held", &sweep), 0.0, "given back");
    assert_eq!(
        gauge("lease_held", &[("lease", "relay"), ("store", "billing")]),
        1.0,
        "held again after a lost holding of the same name was let go"
    );
    assert!(relay_held.is_held());
    assert_eq!(gauge("lease_held", &report), 0.0, "lost");
    let checks = [("lease", "check"), ("store", "checks")];
    assert_eq!(counter(acquisitions, &with(&checks, ("result", "won"))), 40);
    assert_eq!(counter("lease_releases_total", &checks), 37);
    assert_eq!(gauge("lease_held", &checks), 3.0, "the kind's leases held");
    assert_eq!(checks_held.len(), 3);
    assert_eq!(
        gauge("lease_held", &[("lease", "audit"), ("store", "checks")]),
        1.0,
        "a name without a kind is its own"
    );
    assert!(audit_held.is_held());
    let per_entity: Vec<&String> = metrics.keys().filter(|k| k.contains("check:")).collect();
    assert!(
        per_entity.is_empty(),
        "series per entity under the kind label: {per_entity:#?}"
    );
    match metrics.get(&key(
        "lease_store_call_duration_seconds",
        &[
            ("store", "billing"),
            ("operation", "acquire"),
            ("outcome", "ok"),
        ],
    )) {
        Some(DebugValue::Histogram(values)) => assert_eq!(values.len(), 8, "{values:?}"),
        other => panic!("no acquire histogram: {other:?}; all: {metrics:#?}"),
    }
    assert!(
        metrics.contains_key(&key(
            "lease_store_call_duration_seconds",
            &[
                ("store", "billing"),
                ("operation", "renew_many"),
                ("outcome", "error")
            ],
        )),
        "{metrics:#?}"
    );
}
