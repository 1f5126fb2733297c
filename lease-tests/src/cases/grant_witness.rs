//! [`GrantWitness`]: a store that watches every grant it passes on, and remembers each one made
//! while another holder's lease on the same name was provably still unexpired.
//!
//! A case that only looks at what its work saw can miss two holders: when the second grant
//! comes before any work ran, the first holder learns of its loss and never works, and the work
//! the case sees looks like one holder's. The witness sees the grant itself.
//!
//! # Why a recorded overlap is a real one
//!
//! A holder's lease is taken as unexpired until `start + ttl`, where `start` is the runtime's
//! time when its last successful acquire or renewal was *sent*: the store set the expiry at the
//! statement's own time, which came after that, so the real expiry is no earlier. A grant to
//! another holder is an overlap when its call *answered* before that time: the grant happened no
//! later than the answer. A release is taken as done when it is sent. Every rounding goes
//! towards "no overlap", so a correct store never shows one, on any clock that runs at the
//! store's rate (the SQL stores' database clock, or the memory store's runtime clock).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use lease_core::{
    Error, Fence, HolderId, LeaseInfo, LeaseName, LeaseStore, ReleaseEvents, Runtime, Ttl,
};

use crate::context::SharedRuntime;

/// Wraps a store and records overlapping grants; every call passes through unchanged.
#[derive(Debug)]
pub(crate) struct GrantWitness<S> {
    inner: S,
    runtime: SharedRuntime,
    /// Per name, each holder the store granted it to, with the time until which its lease is
    /// certainly unexpired.
    held: Mutex<HashMap<LeaseName, HashMap<HolderId, Instant>>>,
    overlaps: Mutex<Vec<String>>,
}

impl<S: LeaseStore> GrantWitness<S> {
    /// Watches `inner`, reading time from `runtime` (the clients' own).
    pub(crate) fn new(inner: S, runtime: SharedRuntime) -> Self {
        Self {
            inner,
            runtime,
            held: Mutex::default(),
            overlaps: Mutex::default(),
        }
    }

    /// Every grant made while another holder certainly held the name, described.
    pub(crate) fn overlaps(&self) -> Vec<String> {
        self.overlaps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Records that `holder`'s lease on `name`, acquired or renewed by a call sent at `sent`,
    /// is unexpired until `sent + ttl`; when `granted` (an acquisition that answered at
    /// `answered`), first notes every other holder still certainly unexpired then.
    fn held(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
        sent: Instant,
        granted: Option<Instant>,
    ) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let holders = held.entry(name.clone()).or_default();
        if let Some(answered) = granted {
            for (other, until) in holders.iter() {
                if other != holder && answered < *until {
                    self.overlaps
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(format!(
                            "{name} granted to {holder} while {other} held it for {:?} more",
                            *until - answered
                        ));
                }
            }
        }
        holders.insert(holder.clone(), sent + ttl.get());
    }

    /// Forgets `holder`'s lease on `name`: released, or refused a renewal.
    fn gone(&self, name: &LeaseName, holder: &HolderId) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(holders) = held.get_mut(name) {
            holders.remove(holder);
        }
    }
}

#[async_trait]
impl<S: LeaseStore> LeaseStore for GrantWitness<S> {
    async fn try_acquire(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<Option<Fence>, Error> {
        let sent = self.runtime.now();
        let fence = self.inner.try_acquire(name, holder, ttl).await?;
        if fence.is_some() {
            self.held(name, holder, ttl, sent, Some(self.runtime.now()));
        }
        Ok(fence)
    }

    async fn renew(&self, name: &LeaseName, holder: &HolderId, ttl: Ttl) -> Result<bool, Error> {
        let sent = self.runtime.now();
        let renewed = self.inner.renew(name, holder, ttl).await?;
        if renewed {
            self.held(name, holder, ttl, sent, None);
        } else {
            self.gone(name, holder);
        }
        Ok(renewed)
    }

    async fn renew_many(
        &self,
        leases: &[(LeaseName, HolderId)],
        ttl: Ttl,
    ) -> Result<Vec<bool>, Error> {
        let sent = self.runtime.now();
        let renewed = self.inner.renew_many(leases, ttl).await?;
        for ((name, holder), &renewed) in leases.iter().zip(&renewed) {
            if renewed {
                self.held(name, holder, ttl, sent, None);
            } else {
                self.gone(name, holder);
            }
        }
        Ok(renewed)
    }

    async fn release(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        min_hold: Duration,
    ) -> Result<bool, Error> {
        // Taken as released from the moment it is sent: a grant after that is no overlap.
        self.gone(name, holder);
        self.inner.release(name, holder, min_hold).await
    }

    async fn inspect(&self, name: &LeaseName) -> Result<Option<LeaseInfo>, Error> {
        self.inner.inspect(name).await
    }

    async fn list(&self) -> Result<Vec<LeaseInfo>, Error> {
        self.inner.list().await
    }

    async fn prune(&self, released_for: Duration) -> Result<u64, Error> {
        self.inner.prune(released_for).await
    }

    async fn release_events(&self) -> Result<Option<ReleaseEvents>, Error> {
        self.inner.release_events().await
    }
}
