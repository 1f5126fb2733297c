//! Every store call the client makes runs in a `lease.store` span with stable field names:
//! `lease.operation`, `lease.name`, `lease.leases`, `lease.store` and `lease.outcome`.

mod common;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Faulty, Mode, tokio_memory};
use lease_core::{LeaseClient, Ttl, runtime::TokioRuntime};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// The fields of one span, its name under `name`.
type Fields = HashMap<String, String>;

/// Keeps every span's fields.
#[derive(Clone, Default)]
struct Capture {
    spans: Arc<Mutex<Vec<Fields>>>,
}

struct Into<'a>(&'a mut Fields);

impl Visit for Into<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut fields = Fields::new();
        fields.insert("name".to_owned(), span.metadata().name().to_owned());
        span.record(&mut Into(&mut fields));
        let mut spans = self.spans.lock().unwrap();
        spans.push(fields);
        Id::from_u64(spans.len() as u64)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut spans = self.spans.lock().unwrap();
        let index = usize::try_from(span.into_u64()).unwrap() - 1;
        values.record(&mut Into(&mut spans[index]));
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, _: &Event<'_>) {}

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

fn fields(pairs: &[(&str, &str)]) -> Fields {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn every_store_call_runs_in_a_span_with_stable_fields() {
    let capture = Capture::default();
    let spans = Arc::clone(&capture.spans);
    tracing::subscriber::with_default(capture, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        runtime.block_on(async {
            let store = Faulty::new(tokio_memory());
            let client = LeaseClient::builder(Arc::clone(&store), TokioRuntime)
                .ttl(Ttl::from_millis(1_000).unwrap())
                .renew_every(Duration::from_millis(250))
                .safety_margin(Duration::from_millis(100))
                .store_label("billing")
                .build()
                .unwrap();
            let guard = client.try_acquire("sweep").await.unwrap().unwrap();
            tokio::time::sleep(Duration::from_millis(300)).await;
            guard.release().await.unwrap();
            store.set(Mode::Hang);
            assert!(client.try_acquire("report").await.is_err());
        });
    });
    let spans: Vec<Fields> = spans
        .lock()
        .unwrap()
        .iter()
        .filter(|span| span["name"] == "lease.store")
        .cloned()
        .collect();
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
