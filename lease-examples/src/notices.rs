//! A job whose second run does damage: sending a customer a notice. An instance takes the
//! lease, is paused past its TTL (a stopped VM, a long GC) before it sends, and another instance
//! takes over and sends. When the first resumes it sends too: the customer gets the notice
//! twice. With the send recorded in a fenced transaction, the resumed instance's transaction
//! fails its check and sends nothing.
//!
//! The notices table stands for the outbox a mail relay reads: a row in it is a mail sent.
//! The mail itself goes out from the relay, never from the closure: on PostgreSQL and MariaDB
//! the check comes with the `COMMIT`, so a stale holder's closure runs before it is refused.
//! The fence keeps a stale holder out; a holder that committed and crashed before giving the
//! lease back is the next round's to see, by a key of the notice's own in the outbox (here one
//! notice per customer is the story, so the table keeps none, and the unfenced run can show the
//! second). Runs on SQLite in a temporary directory.

use std::fmt;
use std::time::Duration;

use futures::future::BoxFuture;
use lease_core::{BoxError, LeaseClient, LeaseGuard, Runtime, Ttl};
use lease_sqlx::sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use lease_sqlx::sqlx::{self, AssertSqlSafe};
use lease_sqlx::{SqliteLeaseStore, sqlite_connect_options};

/// The lease of the job.
pub const LEASE: &str = "expiry-notices";

/// Tokio's timers, without spawning: a client on it renews only while somebody drives its
/// renewer, which is how this demo pauses an instance (its renewals stop, as a stopped VM's do).
#[derive(Debug, Clone, Copy)]
struct Paused;

impl Runtime for Paused {
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// What the demo saw, with and without the fenced check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Notices the customer got when the send was a plain insert.
    pub unfenced: usize,
    /// Notices the customer got when the send was a fenced transaction.
    pub fenced: usize,
    /// What the resumed instance was told when its fenced send was refused.
    pub refused: String,
}

impl Outcome {
    /// Whether the demo showed its story: two notices without the check (the negative
    /// control), one with it, and the resumed instance told that its lease is gone.
    pub fn is_the_story(&self) -> bool {
        self.unfenced == 2 && self.fenced == 1 && self.refused.contains("no longer held")
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "without the fenced check: the customer got {} notice(s)",
            self.unfenced
        )?;
        writeln!(
            f,
            "with the fenced check:    the customer got {} notice(s); the resumed instance was told: {}",
            self.fenced, self.refused
        )
    }
}

/// Sends the notice: one row in the outbox, with the fence, in a fenced transaction when
/// `fenced`. The insert's own failure is the driver's error as it is (not the lease's): only
/// the fenced check's refusal, `Error::NotHeld`, says that nothing was sent because the lease
/// was gone.
async fn send(store: &SqliteLeaseStore, guard: &LeaseGuard, fenced: bool) -> Result<(), BoxError> {
    let insert = format!(
        "INSERT INTO notices (customer, fence) VALUES ('c-42', {})",
        guard.fence()
    );
    if !fenced {
        let pool = store.executor().pool();
        sqlx::raw_sql(AssertSqlSafe(insert)).execute(pool).await?;
        return Ok(());
    }
    lease_sqlx::fenced(store, guard, async |tx| {
        sqlx::raw_sql(AssertSqlSafe(insert))
            .execute(&mut *tx)
            .await?;
        Ok::<_, BoxError>(())
    })
    .await
}

/// One run of the story on a fresh database at `file`; answers how many notices were sent and
/// what the resumed instance's send answered.
async fn story(file: &std::path::Path, fenced: bool) -> Result<(usize, String), BoxError> {
    let options = SqliteConnectOptions::new()
        .filename(file)
        .create_if_missing(true);
    let pool = SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(sqlite_connect_options(options))
        .await?;
    let store = SqliteLeaseStore::new(pool);
    store.setup().await?;
    sqlx::raw_sql("CREATE TABLE notices (customer TEXT NOT NULL, fence INTEGER NOT NULL)")
        .execute(store.executor().pool())
        .await?;
    let ttl = Ttl::from_millis(600)?;

    // Instance A takes the lease, then is paused before it sends: nothing renews its lease.
    let a = LeaseClient::builder(store.clone(), Paused)
        .ttl(ttl)
        .build()?;
    let paused = a
        .try_acquire(LEASE)
        .await?
        .ok_or("a fresh table refused the lease")?;
    tokio::time::sleep(ttl.get() + Duration::from_millis(300)).await;

    // Instance B takes over the expired lease and sends.
    let b = LeaseClient::new(store.clone(), lease_core::runtime::TokioRuntime);
    let taken = b.acquire(LEASE, Duration::from_secs(5)).await?;
    send(&store, &taken, fenced).await?;
    taken.release().await?;

    // A resumes where it was paused, and sends without looking at its lease first.
    let refused = match send(&store, &paused, fenced).await {
        Ok(()) => "nothing: it sent".to_owned(),
        Err(error) => lease_core::ErrorChain(&*error).to_string(),
    };
    let (sent,): (i64,) = sqlx::query_as("SELECT count(*) FROM notices WHERE customer = 'c-42'")
        .fetch_one(store.executor().pool())
        .await?;
    store.executor().pool().close().await;
    Ok((usize::try_from(sent)?, refused))
}

/// Runs the story twice, without and with the fenced check, in a temporary directory it removes.
///
/// # Errors
/// When SQLite or the store fails.
pub async fn run() -> Result<Outcome, BoxError> {
    let dir = std::env::temp_dir().join(format!(
        "lease-notices-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    std::fs::create_dir_all(&dir)?;
    let result = async {
        let (unfenced, _) = story(&dir.join("unfenced.db"), false).await?;
        let (fenced, refused) = story(&dir.join("fenced.db"), true).await?;
        Ok::<_, BoxError>(Outcome {
            unfenced,
            fenced,
            refused,
        })
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}
