//! The lease store of the database a URL names.

use std::sync::Arc;

use lease_core::{BoxError, DynLeaseStore};
use lease_sqlx::sqlx::{MySql, Postgres, Sqlite};
use lease_sqlx::{Connect, SqlxExecutor, SqlxStore};

/// A store on the database at `url` (`postgres://`, `mysql://` or `sqlite:`), its `table`
/// created if it is missing, its releases notifying waiters where `notifications` says so (on
/// PostgreSQL; elsewhere the setting changes nothing).
pub(super) async fn connect(
    url: &str,
    table: &str,
    notifications: bool,
) -> Result<Arc<DynLeaseStore>, BoxError> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        set_up::<Postgres>(url, table, notifications).await
    } else if url.starts_with("mysql://") {
        set_up::<MySql>(url, table, notifications).await
    } else if url.starts_with("sqlite:") {
        set_up::<Sqlite>(url, table, notifications).await
    } else {
        // The scheme alone: the rest may hold a password.
        let scheme = super::scheme(url).map_or("no scheme".to_owned(), |s| format!("{s}:"));
        Err(format!("not a postgres://, mysql:// or sqlite: URL: {scheme}").into())
    }
}

/// A store of `DB` at `url` on `table`, the table set up.
async fn set_up<DB>(
    url: &str,
    table: &str,
    notifications: bool,
) -> Result<Arc<DynLeaseStore>, BoxError>
where
    DB: lease_sqlx::SqlxDatabase,
    SqlxExecutor<DB>: Connect,
{
    let store = SqlxStore::<DB>::connect_with_table(url, table)
        .await?
        .with_notifications(notifications);
    store.setup().await?;
    Ok(Arc::new(store))
}
