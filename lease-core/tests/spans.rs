//! Every store call the client makes runs in a `lease.store` span with stable field names:
//! `lease.operation`, `lease.name`, `lease.leases`, `lease.store` and `lease.outcome`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Faulty, Mode, billing_client, paused_runtime, tokio_memory};
use lease_tests::spans::{SpanCapture, SpanFields as Fields, span_fields as fields};

#[test]
fn every_store_call_runs_in_a_span_with_stable_fields() {
    let capture = SpanCapture::new();
    tracing::subscriber::with_default(capture.clone(), || {
        let runtime = paused_runtime();
        runtime.block_on(async {
            let store = Faulty::new(tokio_memory());
            let client = billing_client(Arc::clone(&store));
            let guard = client.try_acquire("sweep").await.unwrap().unwrap();
            tokio::time::sleep(Duration::from_millis(300)).await;
            guard.release().await.unwrap();
            store.set(Mode::Hang);
            assert!(client.try_acquire("report").await.is_err());
        });
    });
    let spans = capture.named("lease.store");
    let common = [("name", "lease.store"), ("lease.store", "billing")];
    let with = |extra: &[(&str, &str)]| {
        let mut all = fields(&common);
        all.extend(fields(extra));
        all
    };
    assert_eq!(
        spans,
        vec![
            with(&[
                ("lease.operation", "acquire"),
                ("lease.name", "sweep"),
                ("lease.leases", "1"),
                ("lease.outcome", "ok"),
            ]),
            with(&[
                ("lease.operation", "renew_many"),
                ("lease.leases", "1"),
                ("lease.outcome", "ok"),
            ]),
            with(&[
                ("lease.operation", "release"),
                ("lease.name", "sweep"),
                ("lease.leases", "1"),
                ("lease.outcome", "ok"),
            ]),
            with(&[
                ("lease.operation", "acquire"),
                ("lease.name", "report"),
                ("lease.leases", "1"),
                ("lease.outcome", "timeout"),
            ]),
        ]
    );
}

#[test]
fn a_wait_opens_its_subscription_in_a_span() {
    let capture = SpanCapture::new();
    tracing::subscriber::with_default(capture.clone(), || {
        let runtime = paused_runtime();
        runtime.block_on(async {
            // The memory store pushes its releases, so a wait subscribes to them.
            let client = billing_client(tokio_memory());
            let held = client.try_acquire("sweep").await.unwrap().unwrap();
            let release = tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                held.release().await.unwrap();
            });
            let waited = client
                .acquire("sweep", Duration::from_secs(1))
                .await
                .unwrap();
            release.await.unwrap();
            waited.release().await.unwrap();
        });
    });
    let subscriptions: Vec<Fields> = capture
        .named("lease.store")
        .into_iter()
        .filter(|span| span["lease.operation"] == "subscribe")
        .collect();
    assert_eq!(
        subscriptions,
        vec![fields(&[
            ("name", "lease.store"),
            ("lease.store", "billing"),
            ("lease.operation", "subscribe"),
            ("lease.leases", "0"),
            ("lease.outcome", "ok"),
        ])],
        "one subscription, opened in a span, for the client's first wait"
    );
}

/// A failed renewal's warning carries the store's cause, once: logged as a `&dyn Error`, a
/// subscriber that writes text showed only the top line ("lease store failed to renew_many",
/// no "connection refused"; a JSON one the same), and one that appends the sources repeated a
/// cause its wrapper's text holds already.
#[test]
fn a_failed_renewal_logs_its_cause_once() {
    let capture = SpanCapture::new();
    tracing::subscriber::with_default(capture.clone(), || {
        paused_runtime().block_on(async {
            let store = Faulty::new(tokio_memory());
            let client = billing_client(Arc::clone(&store));
            let guard = client.try_acquire("sweep").await.unwrap().unwrap();
            store.set(Mode::Fail);
            tokio::time::sleep(Duration::from_millis(400)).await;
            store.set(Mode::Pass);
            drop(guard);
        });
    });
    let warnings = capture.events(tracing::Level::WARN);
    let failed = warnings
        .iter()
        .find(|event| {
            event
                .get("message")
                .is_some_and(|m| m.contains("renewal failed"))
        })
        .unwrap_or_else(|| panic!("no warning of the failed renewal among {warnings:?}"));
    let error = failed.get("error").map(String::as_str).unwrap_or_default();
    assert_eq!(error.matches("injected failure").count(), 1, "{failed:?}");
}

/// Renewals of several leases that time out in an outage (a server gone silent): after the
/// first statement of them all was cut by the store timeout, as one held up by a locked row
/// is, each is renewed alone (so that one locked row costs its own lease only), and a round of
/// such renewals that all fail warns once, counting them, not once per lease.
#[test]
fn renewals_each_alone_that_fail_warn_once_a_round() {
    let capture = SpanCapture::new();
    tracing::subscriber::with_default(capture.clone(), || {
        paused_runtime().block_on(async {
            let store = Faulty::new(tokio_memory());
            let client = billing_client(Arc::clone(&store));
            let mut guards = Vec::new();
            for name in ["sweep", "mail", "digest"] {
                guards.push(client.try_acquire(name).await.unwrap().unwrap());
            }
            store.set(Mode::Hang);
            tokio::time::sleep(Duration::from_millis(1_500)).await;
            store.set(Mode::Pass);
            drop(guards);
        });
    });
    let warnings = capture.events(tracing::Level::WARN);
    let message =
        |event: &&lease_tests::spans::SpanFields| event.get("message").cloned().unwrap_or_default();
    let together: Vec<_> = warnings
        .iter()
        .filter(|event| message(event).contains("lease renewal failed"))
        .collect();
    let alone: Vec<_> = warnings
        .iter()
        .filter(|event| message(event).contains("each alone, failed"))
        .collect();
    assert_eq!(together.len(), 1, "{warnings:?}");
    assert_eq!(together[0].get("leases").map(String::as_str), Some("3"));
    assert!(
        !alone.is_empty(),
        "no round of renewals each alone among {warnings:?}"
    );
    for event in &alone {
        assert_eq!(
            event.get("leases").map(String::as_str),
            Some("3"),
            "{event:?}"
        );
        // Named, so that an operator knows whose rows to look at.
        assert_eq!(
            event.get("names").map(String::as_str),
            Some("digest, mail, sweep"),
            "{event:?}"
        );
    }
}

/// A shutdown during a leader schedule's round gives the leadership back and stops the round:
/// a planned step, at every deploy, logged at info, not as a warning.
#[test]
fn a_shutdown_during_a_leader_round_warns_of_nothing() {
    let capture = SpanCapture::new();
    tracing::subscriber::with_default(capture.clone(), || {
        paused_runtime().block_on(async {
            let client = billing_client(tokio_memory());
            let (started_tx, started) = tokio::sync::oneshot::channel::<()>();
            let started_tx = std::sync::Mutex::new(Some(started_tx));
            let _schedule = client
                .schedule_on_leader(
                    "alerts",
                    lease_core::Schedule::every(Duration::from_secs(1)).unwrap(),
                    move |_| {
                        if let Some(tx) = started_tx.lock().unwrap().take() {
                            let _ = tx.send(());
                        }
                        futures::future::pending::<()>()
                    },
                )
                .unwrap();
            started.await.unwrap();
            let report = client.shutdown(Duration::from_millis(100)).await;
            assert_eq!(report.failed, 0, "{report:?}");
        });
    });
    let warnings = capture.events(tracing::Level::WARN);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(
        capture
            .events(tracing::Level::INFO)
            .iter()
            .any(|event| event
                .get("message")
                .is_some_and(|m| m.contains("round stopped"))),
        "the round's stop was not logged at all"
    );
}
