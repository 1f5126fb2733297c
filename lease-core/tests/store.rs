//! The store contract, on the memory store: the rules every store keeps.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::{name, tokio_memory};
use lease_core::{Error, HolderId, LeaseStore, MemoryStore, Ttl};

fn ttl(millis: u64) -> Ttl {
    Ttl::from_millis(millis).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exactly_one_of_many_concurrent_contenders_wins() {
    let store = MemoryStore::new();
    let sweep = name("sweep");
    let contenders = (0..64).map(|_| {
        let (store, sweep) = (store.clone(), sweep.clone());
        tokio::spawn(async move {
            store
                .try_acquire(&sweep, &HolderId::generate(), ttl(60_000))
                .await
        })
    });
    let mut winners = 0;
    for contender in contenders {
        if contender.await.unwrap().unwrap().is_some() {
            winners += 1;
        }
    }
    assert_eq!(winners, 1);
}

#[tokio::test(start_paused = true)]
async fn an_expired_lease_is_taken_over_and_a_renewed_one_is_not() {
    let store = tokio_memory();
    let (alerts, a, b) = (name("alerts"), HolderId::generate(), HolderId::generate());
    let first = store
        .try_acquire(&alerts, &a, ttl(1_000))
        .await
        .unwrap()
        .unwrap();

    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert!(store.renew(&alerts, &a, ttl(1_000)).await.unwrap());
        assert_eq!(
            store.try_acquire(&alerts, &b, ttl(1_000)).await.unwrap(),
            None
        );
    }

    tokio::time::sleep(Duration::from_millis(1_001)).await;
    let second = store
        .try_acquire(&alerts, &b, ttl(1_000))
        .await
        .unwrap()
        .unwrap();
    assert!(second > first);
    assert_eq!(store.inspect(&alerts).await.unwrap().unwrap().holder, b);
}

#[tokio::test(start_paused = true)]
async fn an_expired_lease_cannot_be_renewed_even_if_nobody_took_it() {
    let store = tokio_memory();
    let (sweep, a) = (name("sweep"), HolderId::generate());
    store
        .try_acquire(&sweep, &a, ttl(100))
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!store.renew(&sweep, &a, ttl(100)).await.unwrap());
    assert!(store.inspect(&sweep).await.unwrap().unwrap().is_expired());
}

#[tokio::test]
async fn a_stale_holder_touches_nothing() {
    let store = MemoryStore::new();
    let (sweep, stale, current) = (name("sweep"), HolderId::generate(), HolderId::generate());
    store
        .try_acquire(&sweep, &current, ttl(60_000))
        .await
        .unwrap()
        .unwrap();
    let before = store.inspect(&sweep).await.unwrap().unwrap();

    assert!(!store.release(&sweep, &stale, Duration::ZERO).await.unwrap());
    assert!(!store.renew(&sweep, &stale, ttl(60_000)).await.unwrap());

    let after = store.inspect(&sweep).await.unwrap().unwrap();
    assert_eq!(
        (after.holder, after.fence, after.expires_at),
        (before.holder, before.fence, before.expires_at)
    );
}

#[tokio::test(start_paused = true)]
async fn fences_strictly_increase_across_takeover_release_and_reacquire() {
    let store = tokio_memory();
    let mail = name("mail-checks");
    let mut fences = Vec::new();

    let a = HolderId::generate();
    fences.push(
        store
            .try_acquire(&mail, &a, ttl(500))
            .await
            .unwrap()
            .unwrap(),
    );
    assert!(store.renew(&mail, &a, ttl(500)).await.unwrap());
    assert_eq!(
        store.inspect(&mail).await.unwrap().unwrap().fence,
        fences[0],
        "renewal keeps the fence"
    );

    tokio::time::sleep(Duration::from_millis(501)).await;
    let b = HolderId::generate();
    fences.push(
        store
            .try_acquire(&mail, &b, ttl(500))
            .await
            .unwrap()
            .unwrap(),
    );
    assert!(store.release(&mail, &b, Duration::ZERO).await.unwrap());
    assert_eq!(
        store.inspect(&mail).await.unwrap(),
        None,
        "a released lease is not reported"
    );

    let c = HolderId::generate();
    fences.push(
        store
            .try_acquire(&mail, &c, ttl(500))
            .await
            .unwrap()
            .unwrap(),
    );
    assert!(
        fences.windows(2).all(|pair| pair[0] < pair[1]),
        "{fences:?}"
    );
}

#[tokio::test]
async fn renew_many_says_which_leases_were_lost() {
    let store = MemoryStore::new();
    let (held, lost) = (HolderId::generate(), HolderId::generate());
    let names = [name("a"), name("b"), name("c")];
    for lease in &names {
        store
            .try_acquire(lease, &held, ttl(60_000))
            .await
            .unwrap()
            .unwrap();
    }
    let asked = vec![
        (names[0].clone(), held.clone()),
        (names[1].clone(), lost.clone()),
        (names[2].clone(), held.clone()),
        (name("never-taken"), held.clone()),
    ];
    assert_eq!(
        store.renew_many(&asked, ttl(60_000)).await.unwrap(),
        [true, false, true, false]
    );
}

#[tokio::test(start_paused = true)]
async fn release_with_min_hold_keeps_the_lease_until_then() {
    let store = tokio_memory();
    let (mail, a, b) = (
        name("mail-checks"),
        HolderId::generate(),
        HolderId::generate(),
    );
    store
        .try_acquire(&mail, &a, ttl(60_000))
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        store
            .release(&mail, &a, Duration::from_secs(900))
            .await
            .unwrap()
    );

    tokio::time::sleep(Duration::from_secs(890)).await;
    assert_eq!(
        store.try_acquire(&mail, &b, ttl(60_000)).await.unwrap(),
        None
    );
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(
        store
            .try_acquire(&mail, &b, ttl(60_000))
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test(start_paused = true)]
async fn a_minimum_hold_without_end_keeps_the_lease_taken_without_panicking() {
    let store = tokio_memory();
    let (sweep, holder) = (name("sweep"), HolderId::generate());
    store
        .try_acquire(&sweep, &holder, ttl(1_000))
        .await
        .unwrap();
    // Cut to MAX_MIN_HOLD, as every store cuts it, not added to the time it was taken.
    assert!(
        store.release(&sweep, &holder, Duration::MAX).await.unwrap(),
        "the holder's release"
    );
    tokio::time::advance(Duration::from_secs(365 * 24 * 60 * 60)).await;
    assert_eq!(
        store
            .try_acquire(&sweep, &HolderId::generate(), ttl(1_000))
            .await
            .unwrap(),
        None,
        "still held a year on"
    );
    let info = store.inspect(&sweep).await.unwrap().expect("held");
    let held_for = info.expires_at.duration_since(info.taken_at).unwrap();
    assert_eq!(held_for, lease_core::MAX_MIN_HOLD);
}

/// A lease taken while the store's clock was an hour ahead, released after the clock was
/// stepped back: a release without a hold frees it at once (it does not wait for the hour to
/// pass), and a hold counts from the release, not from the acquisition the clock reads ahead.
#[tokio::test]
async fn a_release_after_the_clock_stepped_back_frees_the_lease() {
    let base = std::time::Instant::now();
    let ahead = Arc::new(AtomicU64::new(3_600));
    let store = MemoryStore::with_clock({
        let ahead = Arc::clone(&ahead);
        move || base + Duration::from_secs(ahead.load(Ordering::SeqCst))
    });
    let (sweep, mail) = (name("sweep"), name("mail-checks"));
    let (a, b) = (HolderId::generate(), HolderId::generate());
    for lease in [&sweep, &mail] {
        store
            .try_acquire(lease, &a, ttl(60_000))
            .await
            .unwrap()
            .unwrap();
    }
    ahead.store(0, Ordering::SeqCst);

    assert!(store.release(&sweep, &a, Duration::ZERO).await.unwrap());
    assert!(
        store
            .try_acquire(&sweep, &b, ttl(60_000))
            .await
            .unwrap()
            .is_some(),
        "released without a hold, the lease stayed taken until the acquisition the clock read ahead"
    );

    assert!(
        store
            .release(&mail, &a, Duration::from_secs(10))
            .await
            .unwrap()
    );
    assert_eq!(
        store.try_acquire(&mail, &b, ttl(60_000)).await.unwrap(),
        None
    );
    ahead.store(10, Ordering::SeqCst);
    assert!(
        store
            .try_acquire(&mail, &b, ttl(60_000))
            .await
            .unwrap()
            .is_some(),
        "a hold of 10 s lasted longer than 10 s after the release"
    );
}

#[tokio::test]
async fn inspect_and_list_report_what_was_taken_in_the_stores_time() {
    let store = MemoryStore::new();
    let holder = HolderId::generate();
    for lease in ["uptime:node-b", "alerts", "uptime:node-a"] {
        store
            .try_acquire(&name(lease), &holder, ttl(60_000))
            .await
            .unwrap()
            .unwrap();
    }
    let listed = store.list().await.unwrap();
    let names: Vec<&str> = listed.iter().map(|info| info.name.as_str()).collect();
    assert_eq!(names, ["alerts", "uptime:node-a", "uptime:node-b"]);
    for info in &listed {
        assert_eq!(info.holder, holder);
        assert!(!info.is_expired());
        assert!(
            info.expires_in() > Duration::from_secs(59)
                && info.expires_in() <= Duration::from_secs(60)
        );
        let one = store.inspect(&info.name).await.unwrap().unwrap();
        assert_eq!(
            (&one.holder, one.fence, one.taken_at, one.expires_at),
            (&info.holder, info.fence, info.taken_at, info.expires_at)
        );
        assert!(one.observed_at >= info.observed_at);
    }
}

#[test]
fn invalid_names_and_ttls_are_typed_errors() {
    assert!(matches!(
        lease_core::LeaseName::new(""),
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        lease_core::LeaseName::new("x".repeat(256)),
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        lease_core::LeaseName::new("nul\0"),
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        Ttl::new(Duration::ZERO),
        Err(Error::InvalidTtl { .. })
    ));
    assert!(matches!(
        Ttl::new(Duration::from_secs(366 * 86_400)),
        Err(Error::InvalidTtl { .. })
    ));
}

#[tokio::test]
async fn an_arc_dyn_store_is_a_store() {
    let store: std::sync::Arc<dyn LeaseStore> = std::sync::Arc::new(MemoryStore::new());
    let holder = HolderId::generate();
    let fence = store
        .try_acquire(&name("dyn"), &holder, ttl(1_000))
        .await
        .unwrap();
    assert_eq!(fence.map(|f| f.get()), Some(1));
    assert!(
        store
            .renew(&name("dyn"), &holder, ttl(1_000))
            .await
            .unwrap()
    );
}
