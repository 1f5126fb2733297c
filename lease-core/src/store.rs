//! [`LeaseStore`]: the few atomic statements a store must implement.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;

use crate::{Error, Fence, HolderId, LeaseInfo, LeaseName, Ttl};

/// The longest minimum hold a store keeps a lease for: a longer `min_hold` given to
/// [`LeaseStore::release`] is cut to this. A thousand years keeps every store's time arithmetic
/// in range (MariaDB's `DATETIME` ends in 9999).
pub const MAX_MIN_HOLD: Duration = Duration::from_secs(1000 * 365 * 24 * 60 * 60);

/// Where leases live: a table in a database, or memory.
///
/// A store is the storage half only. Each method is **one atomic statement** that borrows a
/// connection for that statement alone and gives it back, so holding a lease holds no
/// connection. Renewal, retries, deadlines, guards and leader election are written once in
/// [`LeaseClient`](crate::LeaseClient), generic over every store.
///
/// Every store keeps these rules (the `lease-tests` conformance suite checks each):
/// - **The store's clock only.** Expiry is decided by the store's own `now()`, inside the
///   statement; the application's clock has no say.
/// - **One holder.** Two callers of [`try_acquire`](LeaseStore::try_acquire) at the same moment
///   can never both win.
/// - **Fences strictly increase** per name with every acquisition, across takeovers and
///   releases; renewal keeps the fence.
/// - **Conditioned on the holder.** Renew and release touch the lease only if `holder` holds it,
///   and renew only if it has not expired: a lapsed lease is never revived.
/// - **Errors, not panics**, when the store cannot be reached.
///
/// Names and TTLs arrive validated ([`LeaseName`], [`Ttl`]).
///
/// **Cancellation.** The client drops a call that outlives
/// [`LeaseConfig::store_timeout`](crate::LeaseConfig::store_timeout), and users drop futures:
/// every method's future may be dropped at any await point. Being one atomic statement, a
/// cancelled call has run entirely or not at all, and the caller cannot tell which; each
/// method's `# Cancel safety` section says what the client makes of that. An implementation must
/// not leave a borrowed connection, a transaction or a lock behind when its future is dropped.
///
/// The trait is object safe: `Arc<dyn LeaseStore>` is a store too.
#[async_trait]
pub trait LeaseStore: Send + Sync + Debug + 'static {
    /// Takes the lease for `holder` for `ttl` if nobody holds it or its holder's lease has
    /// expired. Returns the new fence, or `None` when somebody else holds it.
    ///
    /// # Errors
    /// [`Error::Store`] with [`Operation::Acquire`](crate::Operation::Acquire) and the name when
    /// the store cannot be reached or the statement fails; of the kind
    /// [`OutcomeUnknown`](crate::StoreErrorKind::OutcomeUnknown) when the statement went out and
    /// its answer was lost, so that it may have taken the lease for `holder`: the client then
    /// releases it for `holder` (as after a call that outlived its store timeout) and tells
    /// its caller of a transient failure.
    ///
    /// # Cancel safety
    /// Not cancel safe: cancelled after the statement ran, the lease is taken for `holder` and
    /// nobody learns its fence. Nobody renews it either, so it lapses after `ttl`.
    async fn try_acquire(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<Option<Fence>, Error>;

    /// Extends the lease to `ttl` from now, only if `holder` holds it and it has not expired.
    /// `false` means it is lost.
    ///
    /// A renewal never moves the expiry back: where the lease already runs longer (a
    /// [`release`](LeaseStore::release) with a minimum hold that a renewal still on its way
    /// reaches late, a larger TTL), it stays. Otherwise such a renewal would cut the hold short,
    /// and another instance could run a scheduled job again within its period.
    ///
    /// # Errors
    /// [`Error::Store`] with [`Operation::Renew`](crate::Operation::Renew) and the name when the
    /// store cannot be reached or the statement fails.
    ///
    /// # Cancel safety
    /// Cancel safe for the client: a cancelled renewal may or may not have extended the lease,
    /// and counts as not renewed, so the local deadline stays where the last success put it.
    async fn renew(&self, name: &LeaseName, holder: &HolderId, ttl: Ttl) -> Result<bool, Error>;

    /// Renews every `(name, holder)` pair, answering in the same order. The default calls
    /// [`renew`](LeaseStore::renew) for each; SQL stores override it with one statement per batch.
    ///
    /// # Errors
    /// [`Error::Store`] with [`Operation::RenewMany`](crate::Operation::RenewMany) (or, from the
    /// default, the first failing [`renew`](LeaseStore::renew)'s error) when the store cannot be
    /// reached or a statement fails. One failure fails the whole batch.
    ///
    /// # Cancel safety
    /// As [`renew`](LeaseStore::renew), for the whole batch: some, all or none of the leases may
    /// have been extended (the default renews one after another), and the client counts none as
    /// renewed.
    async fn renew_many(
        &self,
        leases: &[(LeaseName, HolderId)],
        ttl: Ttl,
    ) -> Result<Vec<bool>, Error> {
        let mut renewed = Vec::with_capacity(leases.len());
        for (name, holder) in leases {
            renewed.push(self.renew(name, holder, ttl).await?);
        }
        Ok(renewed)
    }

    /// Gives the lease back, only if `holder` holds it. Returns whether it did.
    ///
    /// With a non-zero `min_hold` the lease stays taken until `min_hold` after it was taken (when
    /// that is still ahead), so the same work is not run again by the next instance straight
    /// away: at most once per period. A `min_hold` longer than [`MAX_MIN_HOLD`] is cut to it.
    /// Where the store's clock reads the acquisition ahead of it (the clock stepped back since
    /// the lease was taken), the hold counts from now instead: it never lasts longer than
    /// `min_hold`, and a release without one always frees the lease. The fence is never reset.
    ///
    /// # Errors
    /// [`Error::Store`] with [`Operation::Release`](crate::Operation::Release) and the name when
    /// the store cannot be reached or the statement fails.
    ///
    /// # Cancel safety
    /// Not cancel safe: a cancelled release may or may not have run. If it did not, the lease
    /// lapses after its TTL, as nobody renews it any more.
    async fn release(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        min_hold: Duration,
    ) -> Result<bool, Error>;

    /// The lease called `name`, if it has been taken and not released. An expired lease is
    /// reported (with [`LeaseInfo::is_expired`]) until somebody takes it over.
    ///
    /// # Errors
    /// [`Error::Store`] with [`Operation::Inspect`](crate::Operation::Inspect) and the name when
    /// the store cannot be reached or the statement fails.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    async fn inspect(&self, name: &LeaseName) -> Result<Option<LeaseInfo>, Error>;

    /// Every lease [`inspect`](LeaseStore::inspect) would report, ordered by name.
    ///
    /// # Errors
    /// [`Error::Store`] with [`Operation::List`](crate::Operation::List) when the store cannot be
    /// reached or the statement fails.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    async fn list(&self) -> Result<Vec<LeaseInfo>, Error>;

    /// The names of leases as they are released, from a store that can push them (PostgreSQL
    /// `LISTEN/NOTIFY`), so that [`LeaseClient::acquire`](crate::LeaseClient::acquire) and leader
    /// campaigns take a released lease at once instead of at their next poll.
    ///
    /// `None`, the default, means the store cannot: waiters poll. A client subscribes once, at
    /// its first `acquire` or campaign (before the first attempt, so that no release is missed),
    /// and keeps the subscription while it lives, so a store may spend one dedicated connection
    /// on it. When the stream ends (a broken connection), waiters fall back to polling and the
    /// next wait subscribes again; when streams keep ending soon after they open, or opening
    /// them keeps failing (an outage), the client subscribes again only after a pause that
    /// doubles from 1 s up to a minute, and waiters poll meanwhile. Events are
    /// hints: a waiter woken by one still has to win [`try_acquire`](LeaseStore::try_acquire).
    ///
    /// # Errors
    /// [`Error::Store`] with [`Operation::Subscribe`](crate::Operation::Subscribe) when the
    /// subscription cannot be opened; waiters then poll, and the next wait tries again.
    ///
    /// # Cancel safety
    /// Cancel safe: a subscription being opened is given up with its future (its dedicated
    /// connection, if any, returned), and nothing was missed that a later subscription would
    /// have seen, since events are only hints.
    async fn release_events(&self) -> Result<Option<ReleaseEvents>, Error> {
        Ok(None)
    }

    /// Deletes the rows of leases that have been free (released, or expired) for longer than
    /// `released_for` by the store's clock, and answers how many it deleted. Held leases, and
    /// leases freed more recently, are kept.
    ///
    /// A store keeps a row per name ever acquired, with no holder once released; a table of
    /// per-entity leases grows without bound unless pruned. Fences must keep strictly
    /// increasing across a prune: a name acquired again after its row was deleted gets a fence
    /// greater than any it had (the SQL stores' fences follow the database's clock, so a name
    /// taken again after its row was pruned gets a greater fence as long as that clock is
    /// never set back by more than `released_for`: prune rows free for days, not seconds; the
    /// memory store remembers the greatest fence it pruned).
    ///
    /// # Errors
    /// [`Error::Store`] with [`Operation::Prune`](crate::Operation::Prune) when the store
    /// fails.
    ///
    /// # Cancel safety
    /// Cancel safe: the deletion is one statement, done entirely or not at all; call it again.
    async fn prune(&self, released_for: Duration) -> Result<u64, Error>;
}

/// The stream of [`LeaseStore::release_events`]: names of released leases.
pub type ReleaseEvents = BoxStream<'static, LeaseName>;

/// A store behind a shared pointer is a store: `Arc<dyn LeaseStore>` works wherever a store does.
#[async_trait]
impl<S: LeaseStore + ?Sized> LeaseStore for Arc<S> {
    async fn try_acquire(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<Option<Fence>, Error> {
        (**self).try_acquire(name, holder, ttl).await
    }

    async fn renew(&self, name: &LeaseName, holder: &HolderId, ttl: Ttl) -> Result<bool, Error> {
        (**self).renew(name, holder, ttl).await
    }

    async fn renew_many(
        &self,
        leases: &[(LeaseName, HolderId)],
        ttl: Ttl,
    ) -> Result<Vec<bool>, Error> {
        (**self).renew_many(leases, ttl).await
    }

    async fn release(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        min_hold: Duration,
    ) -> Result<bool, Error> {
        (**self).release(name, holder, min_hold).await
    }

    async fn inspect(&self, name: &LeaseName) -> Result<Option<LeaseInfo>, Error> {
        (**self).inspect(name).await
    }

    async fn list(&self) -> Result<Vec<LeaseInfo>, Error> {
        (**self).list().await
    }

    async fn release_events(&self) -> Result<Option<ReleaseEvents>, Error> {
        (**self).release_events().await
    }

    async fn prune(&self, released_for: Duration) -> Result<u64, Error> {
        (**self).prune(released_for).await
    }
}

/// A type-erased store, as `Arc<DynLeaseStore>`.
pub type DynLeaseStore = dyn LeaseStore;
