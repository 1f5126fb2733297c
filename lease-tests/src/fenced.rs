//! [`FencedWrites`]: the harness capability of stores that offer a fenced check inside the
//! caller's transaction (the SQL stores' `fence`), and [`FencedStore`], a fresh store with it.

use async_trait::async_trait;
use futures::future::BoxFuture;
use lease_core::{BoxError, Error, LeaseHandle, LeaseName, LeaseStore};
use std::fmt;
use std::sync::Arc;

use crate::FreshStore;

/// Writes to a protected table of the store's database through fenced transactions.
///
/// A backend implements it with its driver: begin a transaction, run the store's fenced check
/// for the lease, wait for `hold` with the transaction open, insert the value, commit.
#[async_trait]
pub trait FencedWrites: Send + Sync {
    /// One fenced transaction: the check, then the job's work until `hold` completes (a sleep
    /// on the case's runtime, or nothing), then an insert of `value` into the protected table,
    /// then the commit. The check's error is
    /// returned as it is (`Error::NotHeld` when the lease is gone), and then nothing is
    /// committed.
    async fn write(
        &self,
        lease: &LeaseHandle,
        value: i64,
        hold: BoxFuture<'_, ()>,
    ) -> Result<(), Error>;

    /// Whether the check comes at the transaction's commit (in the same round trip) rather
    /// than at its start. Checked at its start, the lease's row stays locked while the job
    /// works, so a takeover (and the holder's renewal) waits for the transaction; checked at
    /// its commit, neither waits, and a takeover during the job makes the commit fail. The
    /// cases that tell the two apart run for the one the writes use.
    fn checks_at_commit(&self) -> bool {
        false
    }

    /// The values committed to the protected table.
    async fn written(&self) -> Result<Vec<i64>, BoxError>;

    /// Makes the lease `name` expire now by the database's clock, as it would for a holder
    /// paused past its TTL. It may be called while a fenced transaction holds the lease's row
    /// locked, and must then wait for that transaction as a takeover would (a serialization
    /// failure that ends the wait, on connections that read from a snapshot, is tried again).
    async fn expire(&self, name: &LeaseName) -> Result<(), BoxError>;

    /// Clears the lease `name`'s holder and leaves its expiry and fence as they are: an
    /// operator's forced release on the row itself (`UPDATE ... SET holder = NULL`), which the
    /// holder, its deadline far off, has not heard of. It may be called while a fenced
    /// transaction holds the lease's row locked, and must then wait as [`expire`] does.
    ///
    /// [`expire`]: FencedWrites::expire
    async fn free(&self, name: &LeaseName) -> Result<(), BoxError>;
}

/// A fresh store and fenced writes on its database.
pub struct FencedStore<S> {
    pub(crate) fresh: FreshStore<S>,
    pub(crate) writes: Arc<dyn FencedWrites>,
}

impl<S: LeaseStore> FencedStore<S> {
    /// `fresh` with `writes` on the same database.
    pub fn new(fresh: FreshStore<S>, writes: Arc<dyn FencedWrites>) -> Self {
        Self { fresh, writes }
    }

    /// The same writes and teardown with the store converted, such as into an
    /// `Arc<dyn LeaseStore>`.
    pub fn map<T: LeaseStore>(self, convert: impl FnOnce(S) -> T) -> FencedStore<T> {
        FencedStore {
            fresh: self.fresh.map(convert),
            writes: self.writes,
        }
    }
}

impl<S: fmt::Debug> fmt::Debug for FencedStore<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FencedStore")
            .field("fresh", &self.fresh)
            .finish_non_exhaustive()
    }
}
