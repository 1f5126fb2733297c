//! [`RenewalInFlight`]: the holder's renewal of a lease held open on the lease's row, and
//! committed once another transaction waits for that row (PostgreSQL). Under a snapshot, a
//! fenced check that began while the renewal was in flight loses to it with a serialization
//! failure: the race, made at will, for lease-sqlx's and lease-diesel's tests alike.

use lease_core::BoxError;
use lease_sql::ExecuteOn;

/// Waits in the renewal's own transaction until another transaction waits for it (polled
/// every 10 ms, as no signal tells of a lock wait; at most 10 s, then fails), then commits. One
/// message: when the wait fails, the `COMMIT` after it does not run.
const COMMIT_ONCE_WAITED_FOR: &str = "DO $$ BEGIN \
     FOR tries IN 1..1000 LOOP \
       IF EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'transactionid' AND NOT granted \
                  AND transactionid = pg_current_xact_id()::xid) THEN RETURN; END IF; \
       PERFORM pg_sleep(0.01); \
     END LOOP; \
     RAISE EXCEPTION 'nothing waited for the renewal''s row within 10 s'; \
   END $$; COMMIT";

/// A renewal's update of a lease's row in a transaction of its own on `connection`, not yet
/// committed: it holds the row.
pub struct RenewalInFlight<C> {
    connection: C,
}

impl<C: Send> RenewalInFlight<C> {
    /// Updates the row of the lease `name` in `table` as a renewal does (its expiry a
    /// millisecond later) on `connection`, a PostgreSQL connection of its own, and keeps the
    /// transaction open.
    ///
    /// # Errors
    /// The statement's error.
    ///
    /// # Cancel safety
    /// Dropped half-way, the connection may be mid-transaction: drop it too.
    pub async fn start<X>(
        executor: &X,
        mut connection: C,
        table: &str,
        name: &str,
    ) -> Result<Self, BoxError>
    where
        X: for<'c> ExecuteOn<&'c mut C>,
    {
        executor
            .batch_on(
                &mut connection,
                format!(
                    "BEGIN; UPDATE {table} SET expires_at = expires_at + interval '1 millisecond' \
                     WHERE name = '{name}'"
                ),
            )
            .await?;
        Ok(Self { connection })
    }

    /// Commits the renewal once another transaction waits for its row, within 10 s.
    ///
    /// # Errors
    /// When nothing waited for the row within 10 s (the renewal is then rolled back), or a
    /// statement failed.
    ///
    /// # Cancel safety
    /// Dropped half-way, the renewal may or may not commit: drop the connection with it.
    pub async fn commit_once_waited_for<X>(mut self, executor: &X) -> Result<(), BoxError>
    where
        X: for<'c> ExecuteOn<&'c mut C>,
    {
        executor
            .batch_on(&mut self.connection, COMMIT_ONCE_WAITED_FOR.to_owned())
            .await
    }
}
