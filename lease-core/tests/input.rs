//! Bad input gets its typed error before reaching any store.
#![cfg(feature = "runtime-tokio")]

use std::time::Duration;

use lease_core::runtime::TokioRuntime;
use lease_core::{Error, LeaseClient, LeaseName, LeaseStore, MemoryStore, NameError, Ttl};

/// Every invalid name (empty, 256 bytes, containing NUL) and TTL (zero, under a millisecond,
/// over the maximum) gives its own typed error, a client given an invalid name refuses it, and
/// none of them reaches the store: it still lists nothing.
#[tokio::test]
async fn invalid_input_is_typed() {
    let names = [
        (String::new(), NameError::Empty),
        ("x".repeat(256), NameError::TooLong { len: 256 }),
        // Multi-byte: the limit is in bytes, not characters.
        ("é".repeat(128), NameError::TooLong { len: 256 }),
        ("sweep\0".to_owned(), NameError::ContainsNul),
        ("\0".to_owned(), NameError::ContainsNul),
    ];
    for (text, expected) in names {
        match LeaseName::new(&text) {
            Err(Error::InvalidName { name, reason }) => {
                assert_eq!(name, text, "the name carried by the error for {text:?}");
                assert_eq!(reason, expected, "the reason {text:?} was rejected");
            }
            other => {
                panic!("the name {text:?} gave {other:?}, not Error::InvalidName({expected:?})")
            }
        }
    }
    let ttls = [
        Duration::ZERO,
        Duration::from_micros(999),
        Ttl::MAX.get() + Duration::from_millis(1),
        Duration::MAX,
    ];
    for requested in ttls {
        match Ttl::new(requested) {
            Err(Error::InvalidTtl { requested: got }) => {
                assert_eq!(got, requested, "the TTL carried by the error");
            }
            other => panic!("the TTL {requested:?} gave {other:?}, not Error::InvalidTtl"),
        }
    }
    let store = MemoryStore::new();
    let client = LeaseClient::new(store.clone(), TokioRuntime);
    for text in ["", "a\0b"] {
        let attempt = client.try_acquire(text).await;
        assert!(
            matches!(attempt, Err(Error::InvalidName { .. })),
            "the client acquiring {text:?} gave {:?}, not Error::InvalidName",
            attempt.map(|guard| guard.map(|guard| guard.fence()))
        );
    }
    assert_eq!(
        store.list().await.unwrap(),
        Vec::new(),
        "list() after only invalid input"
    );
}
