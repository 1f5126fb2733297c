//! [`LeaseGuard`] and [`LeaseHandle`]: a held lease, and a view of it to pass around.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::held::Held;
use crate::renewer::Renewer;
use crate::timed_store::TimedStore;
use crate::{Error, Fence, HolderId, LeaseName, LossReason};

/// A lease this process holds, kept alive by the client's renewer until it is released.
///
/// Check [`is_held`](LeaseGuard::is_held) before each step of long work, or race the work against
/// [`lost`](LeaseGuard::lost); pass [`fence`](LeaseGuard::fence) with every write downstream.
///
/// Release it with [`release`](LeaseGuard::release) when the work is done. Dropped without
/// release, it is released in the background where the runtime can spawn; otherwise the lease
/// lapses after its TTL.
#[must_use = "a guard dropped at once gives the lease back"]
pub struct LeaseGuard {
    handle: LeaseHandle,
    /// Keeps the lease renewed until it is forgotten.
    renewer: Arc<Renewer>,
    /// Gives the lease back.
    store: TimedStore,
    released: bool,
}

impl LeaseGuard {
    /// The guard of `held`, which `renewer` keeps renewed.
    pub(crate) fn new(held: Arc<Held>, renewer: Arc<Renewer>, store: TimedStore) -> Self {
        Self {
            handle: LeaseHandle { held },
            renewer,
            store,
            released: false,
        }
    }

    /// The lease.
    pub fn name(&self) -> &LeaseName {
        self.handle.name()
    }

    /// The fencing token of this acquisition.
    pub fn fence(&self) -> Fence {
        self.handle.fence()
    }

    /// The holder id of this acquisition.
    pub fn holder(&self) -> &HolderId {
        self.handle.holder()
    }

    /// Whether this process still holds the lease: no renewal was rejected and the local
    /// deadline has not passed.
    pub fn is_held(&self) -> bool {
        self.handle.is_held()
    }

    /// Completes when the lease is lost, with how.
    pub async fn lost(&self) -> LossReason {
        self.handle.lost().await
    }

    /// A cheap, cloneable view of this lease for tasks the work hands out.
    pub fn handle(&self) -> LeaseHandle {
        self.handle.clone()
    }

    /// Gives the lease back so the next instance can take it at once.
    ///
    /// # Errors
    /// [`Error::Lost`] when the lease had been lost before the release (the work may have
    /// overlapped with another holder's); [`Error::Store`] when the store failed, in which case the
    /// lease lapses after its TTL.
    pub async fn release(self) -> Result<(), Error> {
        self.release_after(Duration::ZERO).await
    }

    /// Gives the lease back, but keeps it taken until `min_hold` after it was taken: at most
    /// once per period. A job that ends after two seconds with `min_hold` of 15 minutes is not
    /// run again by another instance until those 15 minutes have passed.
    ///
    /// # Errors
    /// As [`release`](LeaseGuard::release).
    pub async fn release_after(mut self, min_hold: Duration) -> Result<(), Error> {
        self.released = true;
        let held = &self.handle.held;
        self.renewer.forget(held);
        let lost = held.mark_released();
        if !min_hold.is_zero() {
            self.renewer.no_renewal_in_flight().await;
        }
        // Even a lease this process gave up on may still be ours in the store: free it.
        let released = self
            .store
            .release(held.name(), held.holder(), min_hold)
            .await?;
        match (lost, released) {
            (None, true) => {
                tracing::debug!(lease = %held.name(), fence = %held.fence(), ?min_hold, "lease released");
                Ok(())
            }
            (Some(reason), _) => Err(Error::Lost {
                name: held.name().clone(),
                reason,
            }),
            (None, false) => Err(Error::Lost {
                name: held.name().clone(),
                reason: LossReason::Rejected,
            }),
        }
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let held = Arc::clone(&self.handle.held);
        self.renewer.forget(&held);
        if held.mark_released().is_some() {
            return;
        }
        let store = Arc::clone(self.store.unbounded());
        let task = Box::pin(async move {
            match store
                .release(held.name(), held.holder(), Duration::ZERO)
                .await
            {
                Ok(_) => {
                    tracing::debug!(lease = %held.name(), fence = %held.fence(), "dropped lease released")
                }
                Err(error) => tracing::warn!(
                    lease = %held.name(),
                    error = &error as &dyn std::error::Error,
                    "dropped lease not released; it lapses after its TTL"
                ),
            }
        });
        if self.store.clock().runtime().spawn(task).is_err() {
            tracing::debug!(lease = %self.handle.name(), "lease guard dropped; the lease lapses after its TTL");
        }
    }
}

impl fmt::Debug for LeaseGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseGuard")
            .field("name", self.name())
            .field("fence", &self.fence())
            .field("holder", self.holder())
            .field("held", &self.is_held())
            .finish()
    }
}

/// A view of a held lease: its name and fence, whether it is still held, and a future for its
/// loss. Cheap to clone; hand it to the tasks the work spawns.
///
/// After the guard releases the lease, [`is_held`](LeaseHandle::is_held) is `false` and
/// [`lost`](LeaseHandle::lost) never completes.
#[derive(Clone)]
pub struct LeaseHandle {
    held: Arc<Held>,
}

impl LeaseHandle {
    /// The lease.
    pub fn name(&self) -> &LeaseName {
        self.held.name()
    }

    /// The fencing token of this acquisition.
    pub fn fence(&self) -> Fence {
        self.held.fence()
    }

    /// The holder id of this acquisition.
    pub fn holder(&self) -> &HolderId {
        self.held.holder()
    }

    /// Whether this process still holds the lease.
    pub fn is_held(&self) -> bool {
        self.held.is_held()
    }

    /// Completes when the lease is lost, with how.
    pub async fn lost(&self) -> LossReason {
        self.held.lost().await
    }
}

impl fmt::Debug for LeaseHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseHandle")
            .field("name", self.name())
            .field("fence", &self.fence())
            .field("held", &self.is_held())
            .finish()
    }
}
