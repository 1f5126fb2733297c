//! [`DieselPool`]: the pools a store borrows its connections from, deadpool's and bb8's, so each
//! database is written once over both.

use std::future::Future;
use std::ops::DerefMut;

use lease_core::BoxError;

use crate::DieselConnection;

/// A diesel-async pool of [`DieselConnection`]s: `deadpool::Pool<C>` or `bb8::Pool<C>` from
/// `diesel_async::pooled_connection`, each behind its feature. Sealed.
///
/// A store takes a connection for one statement and gives it back as soon as the statement has
/// answered, so the pool's size never has to grow with the number of leases held.
pub trait DieselPool: sealed::Sealed + Clone + Send + Sync + 'static {
    /// The connections in the pool.
    type Connection: DieselConnection;

    /// A connection taken from the pool, given back when dropped. It does not borrow the pool,
    /// so a statement can finish on a task of its own.
    #[doc(hidden)]
    type Pooled: DerefMut<Target = Self::Connection> + Send + 'static;

    /// The pool's kind, for `Debug`.
    #[doc(hidden)]
    const KIND: &'static str;

    /// Takes a connection, waiting as the pool is configured to. When bb8 times out it answers
    /// `acquire::TimedOut`, which the store diagnoses (`acquire::why_none`: a connection made
    /// outside the pool gives the reason where the server refuses it).
    #[doc(hidden)]
    fn connection(&self) -> impl Future<Output = Result<Self::Pooled, BoxError>> + Send;

    /// How many connections are open, and how many of them are idle.
    #[doc(hidden)]
    fn state(&self) -> lease_sql::PoolState;

    /// A connection made with the pool's own manager (so to the same server, with the same
    /// settings) that is not the pool's: it neither counts against the pool's size nor goes
    /// back to it. The store listens for releases on one.
    #[doc(hidden)]
    fn dedicated(&self) -> impl Future<Output = Result<Self::Connection, BoxError>> + Send;
}

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// Implements [`DieselPool`] for deadpool's and bb8's pools of one connection type, each behind
/// its feature. Called by `diesel_connection!`, once per database.
macro_rules! diesel_pools {
    ($conn:ty) => {
        #[cfg(feature = "deadpool")]
        impl $crate::pool::sealed::Sealed
            for diesel_async::pooled_connection::deadpool::Pool<$conn>
        {
        }

        #[cfg(feature = "deadpool")]
        impl $crate::DieselPool for diesel_async::pooled_connection::deadpool::Pool<$conn> {
            type Connection = $conn;
            type Pooled = diesel_async::pooled_connection::deadpool::Object<$conn>;
            const KIND: &'static str = "deadpool";

            fn connection(
                &self,
            ) -> impl std::future::Future<Output = Result<Self::Pooled, lease_core::BoxError>>
            + Send {
                async move { self.get().await.map_err(Into::into) }
            }

            fn dedicated(
                &self,
            ) -> impl std::future::Future<Output = Result<$conn, lease_core::BoxError>> + Send {
                async move {
                    deadpool::managed::Manager::create(self.manager())
                        .await
                        .map_err(Into::into)
                }
            }

            fn state(&self) -> lease_sql::PoolState {
                let status = self.status();
                lease_sql::PoolState {
                    size: u32::try_from(status.size).unwrap_or(u32::MAX),
                    idle: u32::try_from(status.available).unwrap_or(u32::MAX),
                }
            }
        }

        #[cfg(feature = "bb8")]
        impl $crate::pool::sealed::Sealed for diesel_async::pooled_connection::bb8::Pool<$conn> {}

        #[cfg(feature = "bb8")]
        impl $crate::DieselPool for diesel_async::pooled_connection::bb8::Pool<$conn> {
            type Connection = $conn;
            type Pooled = diesel_async::pooled_connection::bb8::PooledConnection<'static, $conn>;
            const KIND: &'static str = "bb8";

            fn connection(
                &self,
            ) -> impl std::future::Future<Output = Result<Self::Pooled, lease_core::BoxError>>
            + Send {
                async move {
                    match self.get_owned().await {
                        Err(timed_out @ diesel_async::pooled_connection::bb8::RunError::TimedOut) => {
                            Err(lease_core::BoxError::from($crate::acquire::TimedOut(
                                timed_out.into(),
                            )))
                        }
                        got => got.map_err(Into::into),
                    }
                }
            }

            fn dedicated(
                &self,
            ) -> impl std::future::Future<Output = Result<$conn, lease_core::BoxError>> + Send {
                async move { self.dedicated_connection().await.map_err(Into::into) }
            }

            fn state(&self) -> lease_sql::PoolState {
                let state = self.state();
                lease_sql::PoolState {
                    size: state.connections,
                    idle: state.idle_connections,
                }
            }
        }
    };
}
pub(crate) use diesel_pools;
