//! [`acquire`]: a connection from the pool, or the reason there is none; [`connect`]: a pool,
//! or the reason there is none.
//!
//! sqlx's pool retries a connection the server refuses (it is down, or still starting) until its
//! acquire timeout, and then answers only `PoolTimedOut`: the answer it also gives when every
//! connection it has is in use. At 3 a.m. the two call for different fixes, so when the pool
//! gives none, one connection made on its own tells them apart (one at a time for a store:
//! [`Diagnoses`]); and a pool is opened only after one connection made on its own, so a
//! service that cannot start says why at once rather than after the pool's 30 s.

use std::future::Future;
use std::time::Duration;

use lease_sql::Diagnoses;
use sqlx::pool::{PoolConnection, PoolOptions};
use sqlx::{ConnectOptions, Connection, Database, Pool};

use crate::no_connection::NoConnection;

/// A connection from `pool`. When the pool answers `PoolTimedOut`, a connection made on its own
/// (within a second) gives the reason instead where it fails: the server's refusal
/// (`Connection refused`), or its answer while starting up. Where it succeeds, the server
/// accepts connections and the pool's were all in use: `PoolTimedOut` stands. Either way a
/// [`NoConnection`]: no statement went out. While another of the store's waits is diagnosed
/// (`diagnoses`), `PoolTimedOut` stands without a connection.
pub(crate) async fn acquire<DB: Database>(
    pool: &Pool<DB>,
    diagnoses: &Diagnoses,
) -> Result<PoolConnection<DB>, NoConnection> {
    match pool.acquire().await {
        Err(sqlx::Error::PoolTimedOut) => Err(NoConnection(why_none(pool, diagnoses).await)),
        acquired => acquired.map_err(NoConnection),
    }
}

/// A pool of sqlx's default settings on `options`, opened after one connection made on its own
/// (within a second) answered: where that one fails, its error (the server's refusal, a wrong
/// password, an unknown database) is the answer, at once. Where it does not answer in time, the
/// pool tries as it does, and when it gives up, the reason is asked for as [`acquire`] does.
pub(crate) async fn connect<DB: Database>(
    options: <DB::Connection as Connection>::Options,
) -> Result<Pool<DB>, sqlx::Error> {
    match within(Diagnoses::TIMEOUT, options.connect()).await {
        Some(Err(error)) => return Err(error),
        Some(Ok(connection)) => {
            // The pool makes its own; this one only told that the server answers.
            let _ = connection.close().await;
        }
        None => {}
    }
    match PoolOptions::<DB>::new().connect_with(options.clone()).await {
        Err(sqlx::Error::PoolTimedOut) => Err(reason::<DB>(&options).await),
        opened => opened,
    }
}

/// The error of one connection to `pool`'s server, or `PoolTimedOut` when it connects (or does
/// not answer in time, or another diagnosis of `diagnoses` runs).
async fn why_none<DB: Database>(pool: &Pool<DB>, diagnoses: &Diagnoses) -> sqlx::Error {
    let options = pool.connect_options();
    diagnoses
        .one_at_a_time(reason::<DB>(&options))
        .await
        .unwrap_or(sqlx::Error::PoolTimedOut)
}

/// The error of one connection on `options`, or `PoolTimedOut` when it connects (or does not
/// answer in time).
async fn reason<DB: Database>(options: &<DB::Connection as Connection>::Options) -> sqlx::Error {
    match within(Diagnoses::TIMEOUT, options.connect()).await {
        Some(Err(error)) => error,
        Some(Ok(connection)) => {
            let _ = connection.close().await;
            sqlx::Error::PoolTimedOut
        }
        None => sqlx::Error::PoolTimedOut,
    }
}

/// `future`'s output, or `None` after `limit`, on the runtime sqlx runs on: tokio when a tokio
/// runtime is current (as sqlx chooses), else async-std. `None` at once without a runtime
/// feature.
async fn within<F: Future>(limit: Duration, future: F) -> Option<F::Output> {
    #[cfg(feature = "runtime-tokio")]
    if tokio::runtime::Handle::try_current().is_ok() {
        return tokio::time::timeout(limit, future).await.ok();
    }
    #[cfg(feature = "runtime-async-std")]
    {
        async_std::future::timeout(limit, future).await.ok()
    }
    #[cfg(not(feature = "runtime-async-std"))]
    {
        let _ = (limit, future);
        None
    }
}
