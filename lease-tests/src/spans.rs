//! [`SpanCapture`]: a `tracing` subscriber that keeps every span's fields, and every event's,
//! to check the spans a client or a store opens, what they record, and what it logs.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Dispatch, Event, Metadata, Subscriber};

/// The fields of one span, by field name, and its own name under `name`.
pub type SpanFields = HashMap<String, String>;

/// Keeps the fields of every span opened while it is the subscriber, with the values recorded
/// into them later, and those of every event (a log line). Clones share what they kept: install
/// one with `tracing::subscriber::with_default` and read another afterwards.
#[derive(Debug, Clone)]
pub struct SpanCapture {
    spans: Arc<Mutex<Vec<SpanFields>>>,
    events: Arc<Mutex<Vec<SpanFields>>>,
}

impl SpanCapture {
    /// A capture that has kept nothing yet.
    ///
    /// The first one also registers a second subscriber with `tracing` for the rest of the
    /// process, one that is nobody's default and so receives nothing: while a single
    /// subscriber is registered, `tracing` decides whether a span's callsite is of interest
    /// from the default of whichever thread reaches it first, and a test thread without a
    /// subscriber would switch that callsite off for every capture of the process (its
    /// `Interest` is cached). With two or more registered it asks every one of them.
    pub fn new() -> Self {
        static KEEPER: OnceLock<Dispatch> = OnceLock::new();
        KEEPER.get_or_init(|| Dispatch::new(Self::empty()));
        Self::empty()
    }

    fn empty() -> Self {
        Self {
            spans: Arc::default(),
            events: Arc::default(),
        }
    }

    /// The events logged at `level`, in order, each with its `message`, its other fields as
    /// text (an error field as a subscriber that writes text shows it: its `Display`, which for
    /// `&dyn Error` leaves out the causes), and its `level`.
    pub fn events(&self, level: tracing::Level) -> Vec<SpanFields> {
        let level = level.to_string();
        lock(&self.events)
            .iter()
            .filter(|event| event.get("level") == Some(&level))
            .cloned()
            .collect()
    }

    /// The spans named `name`, in the order they were opened, each with its `name` field.
    pub fn named(&self, name: &str) -> Vec<SpanFields> {
        lock(&self.spans)
            .iter()
            .filter(|span| span.get("name").is_some_and(|n| n == name))
            .cloned()
            .collect()
    }
}

/// `kept` locked, whoever panicked while holding it.
fn lock(kept: &Mutex<Vec<SpanFields>>) -> MutexGuard<'_, Vec<SpanFields>> {
    kept.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Default for SpanCapture {
    /// [`SpanCapture::new`].
    fn default() -> Self {
        Self::new()
    }
}

/// The fields `pairs` names, as [`SpanCapture::named`] answers them.
pub fn span_fields(pairs: &[(&str, &str)]) -> SpanFields {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Writes each value a span records into its fields, as text.
struct Into<'a>(&'a mut SpanFields);

impl Visit for Into<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl Subscriber for SpanCapture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut fields = SpanFields::new();
        fields.insert("name".to_owned(), span.metadata().name().to_owned());
        span.record(&mut Into(&mut fields));
        let mut spans = lock(&self.spans);
        spans.push(fields);
        Id::from_u64(spans.len() as u64)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut spans = lock(&self.spans);
        let index = usize::try_from(span.into_u64()).map_or(usize::MAX, |id| id - 1);
        if let Some(fields) = spans.get_mut(index) {
            values.record(&mut Into(fields));
        }
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = SpanFields::new();
        fields.insert("level".to_owned(), event.metadata().level().to_string());
        event.record(&mut Into(&mut fields));
        lock(&self.events).push(fields);
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}
