//! The lease store of the database a URL names.

use std::sync::Arc;

use lease_core::{BoxError, DynLeaseStore};
use lease_sqlx::{PgLeaseStore, SqliteLeaseStore};

/// A store on the database at `url` (`postgres://` or `sqlite:`), its `table` created if it is
/// missing.
pub(super) async fn connect(url: &str, table: &str) -> Result<Arc<DynLeaseStore>, BoxError> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let store = PgLeaseStore::connect(url).await?.on(table)?;
        store.setup().await?;
        Ok(Arc::new(store))
    } else if url.starts_with("sqlite:") {
        let store = SqliteLeaseStore::connect(url).await?.on(table)?;
        store.setup().await?;
        Ok(Arc::new(store))
    } else {
        Err(format!(
            "not a postgres:// or sqlite: URL: {}",
            url.split(':').next().unwrap_or_default()
        )
        .into())
    }
}
