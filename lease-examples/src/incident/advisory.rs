//! The first half: the four jobs held with session advisory locks, as the original service did.

use std::time::Instant;

use lease_core::BoxError;
use lease_sqlx::sqlx::{self, Connection};

use super::report::{Side, Write};
use super::table::Tables;
use super::{JOBS, instance_pool};

/// Takes one pooled connection per job, takes the job's advisory lock on it and keeps the
/// connection while the job "runs", then makes the readiness write through the same pool.
pub(crate) async fn run(url: &str, tables: &Tables) -> Result<Side, BoxError> {
    let pool = instance_pool(url).await?;
    let mut pinned = Vec::new();
    let mut pids = Vec::new();
    for job in JOBS {
        let mut conn = pool.acquire().await?;
        // Lock keys of this run's own, so other users of the database are not disturbed.
        let key = format!("{}:{job}", tables.leases);
        let (pid, locked): (i32, bool) =
            sqlx::query_as("SELECT pg_backend_pid(), pg_try_advisory_lock(hashtext($1))")
                .bind(key)
                .fetch_one(&mut *conn)
                .await?;
        if locked {
            pids.push(pid);
            pinned.push(conn);
        }
    }
    let held = pinned.len();
    let in_use = pool.size().saturating_sub(pool.num_idle() as u32);

    let pg_locks = operator_view(url, &pids).await?;

    let started = Instant::now();
    let write = match sqlx::query(sqlx::AssertSqlSafe(tables.readiness_write()))
        .execute(&pool)
        .await
    {
        Ok(_) => Write::Committed {
            count: 1,
            slowest: started.elapsed(),
        },
        Err(error) => Write::Failed {
            after: started.elapsed(),
            error: error.to_string(),
        },
    };

    for mut conn in pinned {
        sqlx::query("SELECT pg_advisory_unlock_all()")
            .execute(&mut *conn)
            .await?;
    }
    pool.close().await;
    Ok(Side {
        held,
        in_use,
        write,
        held_for: None,
        pg_locks,
    })
}

/// What the operator's query showed: each advisory lock of these backends, with the backend's
/// state, from a connection outside the pool.
async fn operator_view(url: &str, pids: &[i32]) -> Result<Vec<String>, BoxError> {
    let mut conn = super::connect(url).await?;
    let rows: Vec<(i32, Option<String>)> = sqlx::query_as(
        "SELECT l.pid, a.state FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
         WHERE l.locktype = 'advisory' AND l.pid = ANY($1) ORDER BY l.pid",
    )
    .bind(pids)
    .fetch_all(&mut conn)
    .await?;
    conn.close().await?;
    Ok(rows
        .into_iter()
        .map(|(pid, state)| format!("{pid} {}", state.unwrap_or_default()))
        .collect())
}
