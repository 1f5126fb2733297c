//! [`FactoryBackend`]: the conformance suite's harness over any [`StoreFactory`], on the shared
//! test servers (a file of its own per store for SQLite), so the whole suite can run under
//! changed conditions such as a skewed wall clock.

use std::sync::Arc;

use async_trait::async_trait;
use lease_core::BoxError;
use lease_tests::{Capability, FreshStore, PooledStore, TestBackend, env};

use crate::db::{Db, remove_sqlite};
use crate::factory::StoreFactory;

/// Connections in the pool of each conformance store: enough for the 32-contender cases, and few
/// enough that the clock-skew drivers' two suites at once, three tests each, stay well inside a
/// PostgreSQL server's default 100 connections.
const STORE_CONNECTIONS: u32 = 8;

/// The suite's backend for the stores `factory` makes.
#[derive(Debug)]
pub struct FactoryBackend<F> {
    factory: Arc<F>,
    name: String,
}

impl<F: StoreFactory> FactoryBackend<F> {
    /// The backend of `factory`'s stores.
    pub fn new(factory: F) -> Self {
        let name = factory.label();
        Self {
            factory: Arc::new(factory),
            name,
        }
    }

    /// A fresh table over a pool of `connections` and its teardown.
    async fn fresh(&self, connections: u32) -> Result<(FreshStore<F::Store>, String), BoxError> {
        let url = self.factory.db().shared_url();
        let table = env::unique_table("lease_rel");
        let store = self.factory.connect(&url, &table, connections).await?;
        self.factory.setup(&store).await?;
        let (factory, teardown_store, name) =
            (Arc::clone(&self.factory), store.clone(), table.clone());
        let fresh = FreshStore::new(store).with_teardown(move || async move {
            for t in [table.clone(), format!("{table}_probe")] {
                factory
                    .execute(&teardown_store, &format!("DROP TABLE IF EXISTS {t}"))
                    .await?;
            }
            factory.close(&teardown_store).await;
            remove_sqlite(&url);
            Ok(())
        });
        Ok((fresh, name))
    }
}

#[async_trait]
impl<F: StoreFactory> TestBackend for FactoryBackend<F> {
    type Store = F::Store;

    fn name(&self) -> &str {
        &self.name
    }

    async fn available(&self) -> Result<(), BoxError> {
        let url = self.factory.db().shared_url();
        let store = self.factory.connect(&url, "lease_rel_probe", 1).await;
        if let Ok(store) = &store {
            self.factory.close(store).await;
        }
        remove_sqlite(&url);
        store.map(drop)
    }

    /// A pool and an unreachable store on every database; transient errors when unreachable on
    /// the servers (SQLite's unreachable store is a file that cannot be opened). No fenced
    /// writes: the factories make stores, not fenced transactions (the fenced scenario has its
    /// own workers).
    fn offers(&self, capability: Capability) -> bool {
        match capability {
            Capability::Pool | Capability::Unreachable => true,
            Capability::TransientWhenUnreachable => self.factory.db() != Db::Sqlite,
            _ => false,
        }
    }

    async fn store(&self) -> Result<FreshStore<Self::Store>, BoxError> {
        Ok(self.fresh(STORE_CONNECTIONS).await?.0)
    }

    async fn pooled(&self, connections: u32) -> Result<Option<PooledStore<Self::Store>>, BoxError> {
        let (fresh, table) = self.fresh(connections).await?;
        let store = fresh.store().clone();
        let probe_table = format!("{table}_probe");
        let column = if self.factory.db() == Db::Sqlite {
            "at INTEGER"
        } else {
            "at BIGINT"
        };
        self.factory
            .execute(&store, &format!("CREATE TABLE {probe_table} ({column})"))
            .await?;
        let insert = format!("INSERT INTO {probe_table} (at) VALUES (1)");
        let (probe_factory, probe_store) = (Arc::clone(&self.factory), store.clone());
        let (stats_factory, stats_store) = (Arc::clone(&self.factory), store);
        Ok(Some(PooledStore::new(
            fresh,
            move || {
                let (factory, store, insert) = (
                    Arc::clone(&probe_factory),
                    probe_store.clone(),
                    insert.clone(),
                );
                async move { factory.execute(&store, &insert).await }
            },
            move || stats_factory.pool_stats(&stats_store),
        )))
    }

    async fn unreachable(&self) -> Result<Option<Self::Store>, BoxError> {
        let url = match self.factory.db() {
            Db::Postgres => "postgres://postgres@127.0.0.1:1/test".to_owned(),
            Db::MariaDb => "mysql://root@127.0.0.1:1/test".to_owned(),
            // A directory that does not exist: the file cannot be opened.
            Db::Sqlite => format!(
                "sqlite://{}?mode=rwc",
                std::env::temp_dir()
                    .join("lease-reliability-missing-dir/none/leases.db")
                    .display()
            ),
        };
        Ok(Some(self.factory.connect_lazy(&url, "leases")?))
    }
}
