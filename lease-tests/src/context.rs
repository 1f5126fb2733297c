//! [`Context`]: what a case gets: the backend, the runtime, and the teardowns to run after it.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::future::{BoxFuture, Either, select};
use lease_core::{BoxError, Runtime};

use crate::harness::{PooledStore, Teardown, TestBackend};
use crate::{Capability, CaseFailure, FencedStore, FencedWrites};

/// A runtime behind a shared pointer, so cases can hand one runtime to every client they build
/// whatever executor the test chose.
#[derive(Clone)]
pub struct SharedRuntime(Arc<dyn Runtime>);

impl SharedRuntime {
    /// Shares `runtime`.
    pub fn new(runtime: impl Runtime) -> Self {
        Self(Arc::new(runtime))
    }
}

impl fmt::Debug for SharedRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl Runtime for SharedRuntime {
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        self.0.sleep(duration)
    }

    fn now(&self) -> Instant {
        self.0.now()
    }

    fn spawn(&self, task: BoxFuture<'static, ()>) -> Result<(), BoxFuture<'static, ()>> {
        self.0.spawn(task)
    }
}

/// One case's view of the backend under test and the runtime it runs on.
///
/// Stores made through the context are torn down by [`teardown`](Context::teardown), which the
/// runner calls when the case ends.
pub struct Context<B> {
    backend: B,
    runtime: SharedRuntime,
    teardowns: Mutex<VecDeque<Teardown>>,
}

impl<B: TestBackend> Context<B> {
    /// A context for `backend` on `runtime`.
    pub fn new(backend: B, runtime: impl Runtime) -> Self {
        Self {
            backend,
            runtime: SharedRuntime::new(runtime),
            teardowns: Mutex::new(VecDeque::new()),
        }
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The runtime the case runs on.
    pub fn runtime(&self) -> &SharedRuntime {
        &self.runtime
    }

    fn keep(&self, teardown: Option<Teardown>) {
        if let Some(teardown) = teardown {
            self.teardowns
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push_back(teardown);
        }
    }

    /// A fresh store, torn down when the case ends.
    ///
    /// # Errors
    /// The backend's error, as a failure of the case.
    ///
    /// # Cancel safety
    /// Dropped while the backend makes the store, no teardown is registered for it: whatever the
    /// backend had made for it so far (a table already created) stays behind. Once the backend has
    /// answered, nothing is left to cancel.
    pub async fn store(&self) -> Result<Arc<B::Store>, CaseFailure> {
        let mut fresh = self.backend.store().await?;
        self.keep(fresh.take_teardown());
        let (store, _) = fresh.into_store();
        Ok(Arc::new(store))
    }

    /// A fresh store over a pool of exactly `connections`, torn down when the case ends; `None`
    /// for a store without a pool.
    ///
    /// # Errors
    /// The backend's error, as a failure of the case; a failure too when the backend answers
    /// `None` yet [offers](TestBackend::offers) [`Capability::Pool`].
    ///
    /// # Cancel safety
    /// As [`store`](Context::store): dropped while the backend makes the store and its pool, what
    /// the backend had made so far has no teardown.
    pub async fn pooled(
        &self,
        connections: u32,
    ) -> Result<Option<PooledStore<B::Store>>, CaseFailure> {
        let Some(mut pooled) = self.backend.pooled(connections).await? else {
            return self.missing(Capability::Pool, "pooled");
        };
        self.keep(pooled.take_teardown());
        Ok(Some(pooled))
    }

    /// A fresh store and fenced writes on its database, torn down when the case ends; `None` for
    /// a store without a fenced check.
    ///
    /// # Errors
    /// The backend's error, as a failure of the case; a failure too when the backend answers
    /// `None` yet [offers](TestBackend::offers) [`Capability::FencedWrites`].
    ///
    /// # Cancel safety
    /// As [`store`](Context::store): dropped while the backend makes the store and its fenced
    /// writes, what the backend had made so far has no teardown.
    pub async fn fenced(
        &self,
    ) -> Result<Option<(Arc<B::Store>, Arc<dyn FencedWrites>)>, CaseFailure> {
        let Some(FencedStore { mut fresh, writes }) = self.backend.fenced().await? else {
            return self.missing(Capability::FencedWrites, "fenced");
        };
        self.keep(fresh.take_teardown());
        let (store, _) = fresh.into_store();
        Ok(Some((Arc::new(store), writes)))
    }

    /// A store that cannot reach its database; `None` for a store that is always reachable.
    ///
    /// # Errors
    /// The backend's error, as a failure of the case; a failure too when the backend answers
    /// `None` yet [offers](TestBackend::offers) [`Capability::Unreachable`].
    ///
    /// # Cancel safety
    /// As cancel safe as the backend's [`unreachable`](TestBackend::unreachable): the context
    /// registers nothing for such a store.
    pub async fn unreachable(&self) -> Result<Option<B::Store>, CaseFailure> {
        match self.backend.unreachable().await? {
            Some(store) => Ok(Some(store)),
            None => self.missing(Capability::Unreachable, "unreachable"),
        }
    }

    /// What a backend's `None` from `call` means: a failure where the backend offers
    /// `capability` (a wrapper that stopped forwarding the call, a driver that lost it), and no
    /// such store otherwise, for the case to report itself not applicable.
    fn missing<T>(&self, capability: Capability, call: &str) -> Result<Option<T>, CaseFailure> {
        if self.backend.offers(capability) {
            Err(CaseFailure::new(format!(
                "{} offers {capability}, yet its {call}() answered None: a wrapper that does \
                 not forward {call}() leaves the cases that need it unrun",
                self.backend.name()
            )))
        } else {
            Ok(None)
        }
    }

    /// Sleeps on the case's runtime.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    pub async fn sleep(&self, duration: Duration) {
        self.runtime.sleep(duration).await;
    }

    /// `future`'s output if it completes within `limit`, `None` if it does not.
    ///
    /// # Cancel safety
    /// Cancel safe as far as `future` is: dropped, it drops `future` wherever it was, as it does
    /// when `limit` passes.
    pub async fn within<F: Future>(&self, limit: Duration, future: F) -> Option<F::Output> {
        let future = std::pin::pin!(future);
        match select(future, self.runtime.sleep(limit)).await {
            Either::Left((output, _)) => Some(output),
            Either::Right(((), _)) => None,
        }
    }

    /// Runs the teardown of every store this context made, and reports the first error.
    ///
    /// # Errors
    /// The first teardown's error; the others still run.
    ///
    /// # Cancel safety
    /// Cancel safe between teardowns: each is taken out of the context only when it starts, so,
    /// dropped part-way, the one running stops where it is (what it had left to remove stays
    /// behind) and the ones after it stay in the context for a later call.
    pub async fn teardown(&self) -> Result<(), BoxError> {
        let mut first_error = None;
        while let Some(teardown) = self.next_teardown() {
            if let Err(error) = teardown().await {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// The oldest teardown not yet run, taken out of the context.
    fn next_teardown(&self) -> Option<Teardown> {
        self.teardowns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front()
    }
}

impl<B: TestBackend> fmt::Debug for Context<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("backend", &self.backend.name())
            .field("runtime", &self.runtime)
            .finish_non_exhaustive()
    }
}
