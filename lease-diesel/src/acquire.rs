//! [`why_none`]: the reason a bb8 pool gave no connection.
//!
//! bb8 retries a connection the server refuses (it is down, or still starting) until its
//! connection timeout, and then answers only `Timed out in bb8`: the answer it also gives when
//! every connection it has is in use. At 3 a.m. the two call for different fixes, so when bb8
//! times out, one connection made outside the pool tells them apart. deadpool needs none of
//! this: it opens a connection when asked for one and answers that connection's own error.

use std::future::Future;
use std::time::Duration;

use lease_core::BoxError;

/// How long the connection that tells why the pool gave none may take. A server that refuses
/// answers at once; one that does not answer at all leaves the pool's timeout as the answer.
const DIAGNOSIS_TIMEOUT: Duration = Duration::from_secs(1);

/// The error to answer for a pool that timed out: `connect`'s error where it fails within a
/// second (the server's refusal, its answer while starting up, a rejected login), else
/// `timed_out`: where `connect` succeeds, the server accepts connections and the pool's were
/// all in use; where it does not answer in time, the pool's timeout is the truest answer.
///
/// `connect` is a connection made with the pool's own manager (`DieselPool::dedicated`),
/// so it reaches the same server with the same settings.
pub(crate) async fn why_none<C, E>(
    timed_out: BoxError,
    connect: impl Future<Output = Result<C, E>>,
) -> BoxError
where
    E: Into<BoxError>,
{
    match tokio::time::timeout(DIAGNOSIS_TIMEOUT, connect).await {
        Ok(Err(error)) => error.into(),
        // Dropped here: a connection of the diagnosis, never the caller's.
        Ok(Ok(_connection)) => timed_out,
        Err(_elapsed) => timed_out,
    }
}
