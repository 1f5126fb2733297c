//! `SpanCapture` sees the spans of its own thread even when a thread without a subscriber
//! reaches their callsite first, while the capture is the only subscriber in use: `tracing`
//! caches whether a callsite is of interest when it is first reached, and with one subscriber
//! registered it asks the default of the thread that got there, which here has none. A test
//! of its own, in a process of its own, so that nothing else reaches the callsite first.

use std::sync::mpsc;

use lease_tests::spans::SpanCapture;

/// The callsite both threads reach.
fn open_span() {
    let _span = tracing::debug_span!("lease.test", lease.operation = "probe").entered();
}

#[test]
fn a_thread_without_a_subscriber_reaching_a_callsite_first_hides_nothing() {
    let capture = SpanCapture::new();
    let (reached, reached_rx) = mpsc::channel();
    tracing::subscriber::with_default(capture.clone(), || {
        // The capture is in use on this thread; another thread, with no subscriber, reaches
        // the callsite first.
        std::thread::spawn(move || {
            open_span();
            reached.send(()).unwrap();
        });
        reached_rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the other thread reached the callsite");
        open_span();
    });
    let spans = capture.named("lease.test");
    assert_eq!(
        spans.len(),
        1,
        "the capture saw {spans:?} of the span its thread opened"
    );
}
