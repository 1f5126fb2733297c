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
