//! The second half: the same four jobs held with leases, renewed while held.

use std::time::{Duration, Instant};

use lease_core::runtime::TokioRuntime;
use lease_core::{BoxError, LeaseClient, Ttl};
use lease_sqlx::PgLeaseStore;
use lease_sqlx::sqlx;

use super::report::{Side, Write};
use super::table::Tables;
use super::{JOBS, instance_pool};

/// The lease TTL: short, so several renewals happen while the readiness writes are made.
const TTL: Duration = Duration::from_secs(2);

/// How many readiness writes are made, one per renewal period, while the leases are held: over
/// more than one TTL, so the leases must have been renewed to still be held at the end.
const WRITES: u32 = 6;

/// Takes the four leases through a client on the instance's pool, then makes the readiness write
/// through the same pool once per renewal period for longer than a TTL.
pub(crate) async fn run(url: &str, tables: &Tables) -> Result<Side, BoxError> {
    let pool = instance_pool(url).await?;
    let store = PgLeaseStore::with_table(pool.clone(), &tables.leases)?;
    store.setup().await?;
    let client = LeaseClient::builder(store, TokioRuntime)
        .ttl(Ttl::new(TTL)?)
        .build()?;
    let mut guards = Vec::new();
    for job in JOBS {
        if let Some(guard) = client.try_acquire(job).await? {
            guards.push(guard);
        }
    }
    let taken = Instant::now();

    let mut slowest = Duration::ZERO;
    let mut in_use = 0;
    let mut write = None;
    for _ in 0..WRITES {
        // A connection goes back to the pool a moment after its statement ends; look after that.
        tokio::time::sleep(client.config().renew_every).await;
        in_use = in_use.max(pool.size().saturating_sub(pool.num_idle() as u32));
        let started = Instant::now();
        if let Err(error) = sqlx::query(sqlx::AssertSqlSafe(tables.readiness_write()))
            .execute(&pool)
            .await
        {
            write = Some(Write::Failed {
                after: started.elapsed(),
                error: error.to_string(),
            });
            break;
        }
        slowest = slowest.max(started.elapsed());
    }
    let held_for = taken.elapsed();
    // Still held after more than a TTL: the renewals went through the same pool of four.
    let held = guards.iter().filter(|guard| guard.is_held()).count();
    for guard in guards {
        match guard.release().await {
            // A lease lost on the way is what `held` counts: the report says so, side by side.
            Ok(()) | Err(lease_core::Error::Lost { .. }) => {}
            Err(error) => return Err(error.into()),
        }
    }
    pool.close().await;
    Ok(Side {
        held,
        in_use,
        write: write.unwrap_or(Write::Committed {
            count: WRITES,
            slowest,
        }),
        held_for: Some(held_for),
        pg_locks: Vec::new(),
    })
}
