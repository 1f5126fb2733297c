//! A `LeaseConfig` handed to a client: taken as it is, checked, and changed only by the
//! builder's own settings.

use std::time::Duration;

use lease_core::{
    Error, LeaseClient, LeaseConfig, MemoryStore, OnLoss, Ttl, runtime::TokioRuntime,
};

fn config() -> LeaseConfig {
    let mut config = LeaseConfig::for_ttl(Ttl::from_secs(40).unwrap());
    config.renew_every = Duration::from_secs(5);
    config.store_timeout = Duration::from_secs(3);
    config.renew_batch = 50;
    config.on_loss = OnLoss::Finish;
    config
}

#[test]
fn a_client_takes_a_config_as_it_is() {
    let client = LeaseClient::with_config(MemoryStore::new(), TokioRuntime, config()).unwrap();
    let taken = client.config();
    assert_eq!(taken.ttl, Ttl::from_secs(40).unwrap());
    assert_eq!(taken.renew_every, Duration::from_secs(5));
    assert_eq!(taken.store_timeout, Duration::from_secs(3));
    assert_eq!(taken.renew_batch, 50);
    assert_eq!(taken.on_loss, OnLoss::Finish);
}

#[test]
fn a_config_that_cannot_work_is_refused() {
    let mut broken = config();
    broken.renew_every = Duration::from_secs(40);
    assert!(matches!(
        LeaseClient::with_config(MemoryStore::new(), TokioRuntime, broken.clone()),
        Err(Error::InvalidConfig { .. })
    ));
    assert!(matches!(
        LeaseClient::builder(MemoryStore::new(), TokioRuntime)
            .config(broken)
            .build(),
        Err(Error::InvalidConfig { .. })
    ));
}

#[test]
fn the_builders_own_settings_win_over_the_config_in_any_order() {
    let before = LeaseClient::builder(MemoryStore::new(), TokioRuntime)
        .renew_every(Duration::from_secs(7))
        .config(config())
        .build()
        .unwrap();
    let after = LeaseClient::builder(MemoryStore::new(), TokioRuntime)
        .config(config())
        .renew_every(Duration::from_secs(7))
        .build()
        .unwrap();
    for client in [before, after] {
        assert_eq!(client.config().renew_every, Duration::from_secs(7));
        // The rest stays the config's, the store timeout too.
        assert_eq!(client.config().store_timeout, Duration::from_secs(3));
        assert_eq!(client.config().renew_batch, 50);
    }
    let ttl = LeaseClient::builder(MemoryStore::new(), TokioRuntime)
        .config(config())
        .ttl(Ttl::from_secs(60).unwrap())
        .build()
        .unwrap();
    assert_eq!(ttl.config().ttl, Ttl::from_secs(60).unwrap());
    assert_eq!(ttl.config().renew_every, Duration::from_secs(5));
}
