//! [`Execute`] and [`SqlLeases`]: the lease operations written once, over how a driver runs one
//! statement.

use std::time::Duration;

use async_trait::async_trait;
use lease_core::{BoxError, Error, Fence, HolderId, LeaseInfo, LeaseName, Operation, Ttl};

use crate::{LeaseRow, Query, RenewManyResult, Statements};

/// How a driver runs one [`Query`] on a connection borrowed for that statement alone: all a
/// backend crate writes. Each method answers with the driver's own error; [`SqlLeases`] names
/// the operation and the lease around it.
#[async_trait]
pub trait Execute: Send + Sync {
    /// Rows of two integers: try-acquire's `(fence, won)`.
    async fn int_pairs(&self, query: Query<'_>) -> Result<Vec<(i64, i64)>, BoxError>;

    /// Rows of two texts: renew-many's `(name, holder)` on dialects that return rows.
    async fn text_pairs(&self, query: Query<'_>) -> Result<Vec<(String, String)>, BoxError>;

    /// Lease rows: inspect's and list's.
    async fn lease_rows(&self, query: Query<'_>) -> Result<Vec<LeaseRow>, BoxError>;

    /// How many rows the statement matched (found, not changed: the drivers set
    /// `CLIENT_FOUND_ROWS` on MariaDB).
    async fn affected(&self, query: Query<'_>) -> Result<u64, BoxError>;
}

/// The [`LeaseStore`](lease_core::LeaseStore) operations on a table, through an [`Execute`]:
/// a backend's `LeaseStore` impl forwards each method here.
#[derive(Debug)]
pub struct SqlLeases<'a, E> {
    statements: &'a Statements,
    execute: &'a E,
}

impl<'a, E: Execute> SqlLeases<'a, E> {
    /// The operations of `statements`, run by `execute`.
    pub fn new(statements: &'a Statements, execute: &'a E) -> Self {
        Self {
            statements,
            execute,
        }
    }

    /// [`LeaseStore::try_acquire`](lease_core::LeaseStore::try_acquire).
    ///
    /// # Errors
    /// [`Error::Store`] naming the operation and the lease.
    pub async fn try_acquire(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<Option<Fence>, Error> {
        let failed = failure(Operation::Acquire, Some(name));
        let rows = self
            .execute
            .int_pairs(self.statements.try_acquire(name, holder, ttl))
            .await
            .map_err(failed)?;
        crate::acquired(rows.into_iter().next()).map_err(failed)
    }

    /// [`LeaseStore::renew`](lease_core::LeaseStore::renew).
    ///
    /// # Errors
    /// [`Error::Store`] naming the operation and the lease.
    pub async fn renew(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        ttl: Ttl,
    ) -> Result<bool, Error> {
        let matched = self
            .execute
            .affected(self.statements.renew(name, holder, ttl))
            .await
            .map_err(failure(Operation::Renew, Some(name)))?;
        Ok(matched > 0)
    }

    /// [`LeaseStore::renew_many`](lease_core::LeaseStore::renew_many): one statement per batch of
    /// [`Dialect::renew_many_batch`](crate::Dialect::renew_many_batch) distinct pairs.
    ///
    /// # Errors
    /// [`Error::Store`] naming the operation.
    pub async fn renew_many(
        &self,
        leases: &[(LeaseName, HolderId)],
        ttl: Ttl,
    ) -> Result<Vec<bool>, Error> {
        let failed = failure(Operation::RenewMany, None);
        let pairs = crate::distinct_pairs(leases);
        let mut renewed: Vec<(String, String)> = Vec::with_capacity(pairs.len());
        for batch in pairs.chunks(self.statements.dialect().renew_many_batch()) {
            let query = self.statements.renew_many(batch, ttl);
            match self.statements.renew_many_result() {
                RenewManyResult::Rows => {
                    renewed.extend(self.execute.text_pairs(query).await.map_err(failed)?);
                }
                RenewManyResult::Count => {
                    let matched = self.execute.affected(query).await.map_err(failed)?;
                    if matched == batch.len() as u64 {
                        renewed.extend(batch.iter().map(|&(n, h)| (n.to_owned(), h.to_owned())));
                        continue;
                    }
                    // Some lease of the batch is lost, and a count cannot say which: renew them
                    // one by one. Those the batch renewed renew again (harmless), the lost stay
                    // lost.
                    for &(name, holder) in batch {
                        let (name, holder) = (LeaseName::new(name)?, HolderId::from_stored(holder));
                        if self.renew(&name, &holder, ttl).await? {
                            renewed.push((name.as_str().to_owned(), holder.as_str().to_owned()));
                        }
                    }
                }
            }
        }
        Ok(crate::renewed_in_order(leases, renewed))
    }

    /// [`LeaseStore::release`](lease_core::LeaseStore::release).
    ///
    /// # Errors
    /// [`Error::Store`] naming the operation and the lease.
    pub async fn release(
        &self,
        name: &LeaseName,
        holder: &HolderId,
        min_hold: Duration,
    ) -> Result<bool, Error> {
        let matched = self
            .execute
            .affected(self.statements.release(name, holder, min_hold))
            .await
            .map_err(failure(Operation::Release, Some(name)))?;
        Ok(matched > 0)
    }

    /// [`LeaseStore::inspect`](lease_core::LeaseStore::inspect).
    ///
    /// # Errors
    /// [`Error::Store`] naming the operation and the lease.
    pub async fn inspect(&self, name: &LeaseName) -> Result<Option<LeaseInfo>, Error> {
        let failed = failure(Operation::Inspect, Some(name));
        let rows = self
            .execute
            .lease_rows(self.statements.inspect(name))
            .await
            .map_err(failed)?;
        rows.into_iter()
            .next()
            .map(|row| row.into_info().map_err(failed))
            .transpose()
    }

    /// [`LeaseStore::list`](lease_core::LeaseStore::list).
    ///
    /// # Errors
    /// [`Error::Store`] naming the operation.
    pub async fn list(&self) -> Result<Vec<LeaseInfo>, Error> {
        let failed = failure(Operation::List, None);
        let rows = self
            .execute
            .lease_rows(self.statements.list())
            .await
            .map_err(failed)?;
        rows.into_iter()
            .map(|row| row.into_info().map_err(failed))
            .collect()
    }
}

/// Wraps a driver's error as the store error of `operation` on `name`.
fn failure(operation: Operation, name: Option<&LeaseName>) -> impl Fn(BoxError) -> Error + Copy {
    move |source| Error::store(operation, name, source)
}
