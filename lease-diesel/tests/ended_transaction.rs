//! On MariaDB a statement can end the transaction inside the work without an error the work
//! sees: `TRUNCATE` (as any data definition) commits it first, and the writes after it commit on
//! their own. Through `lease_diesel::fenced_with`, with the check at the `BEGIN` or with the
//! commit, the fenced transaction must not answer that it committed under the lease (nor that
//! nothing committed): it answers `OutcomeUnknown`, whose source says why, and the lease is not
//! lost by it.
#![cfg(all(feature = "mysql", feature = "deadpool"))]

use diesel_async::pooled_connection::AsyncDieselConnectionManager;
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::{AsyncMysqlConnection, SimpleAsyncConnection};
use lease_core::runtime::TokioRuntime;
use lease_core::{BoxError, LeaseClient, StoreErrorKind};
use lease_diesel::{CheckAt, DieselStore, TransactionEnded};
use lease_tests::env;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_work_that_ended_its_transaction_is_not_told_it_committed() {
    let manager = AsyncDieselConnectionManager::<AsyncMysqlConnection>::new(env::mysql_url());
    let pool: Pool<AsyncMysqlConnection> = Pool::builder(manager).max_size(2).build().unwrap();
    let mut connection = match pool.get().await {
        Ok(connection) => connection,
        Err(error) => return env::skip_or_fail("mariadb", &error.to_string()),
    };
    let table = env::unique_table("ended");
    let store = DieselStore::with_table(pool.clone(), &table).unwrap();
    store.setup().await.unwrap();
    let (notes, scratch) = (format!("{table}_notes"), format!("{table}_scratch"));
    connection
        .batch_execute(&format!(
            "CREATE TABLE {notes} (v int); CREATE TABLE {scratch} (v int)"
        ))
        .await
        .unwrap();
    let client = LeaseClient::new(store.clone(), TokioRuntime);
    let guard = client.try_acquire("notes").await.unwrap().expect("free");
    for at in [CheckAt::Begin, CheckAt::Commit] {
        let answer = lease_diesel::fenced_with(&store, &mut connection, &guard, at, async |conn| {
            conn.batch_execute(&format!("INSERT INTO {notes} VALUES (1)"))
                .await?;
            // Commits the transaction first; the next insert commits on its own.
            conn.batch_execute(&format!("TRUNCATE TABLE {scratch}"))
                .await?;
            conn.batch_execute(&format!("INSERT INTO {notes} VALUES (2)"))
                .await?;
            Ok::<_, BoxError>(())
        })
        .await;
        let error = answer.expect_err("told that writes committed under the lease");
        let error = error
            .downcast_ref::<lease_diesel::Error>()
            .unwrap_or_else(|| panic!("{at:?}: not the store's error: {error}"));
        assert_eq!(
            error.store_error_kind(),
            Some(StoreErrorKind::OutcomeUnknown),
            "{at:?}: {error}"
        );
        let source = std::error::Error::source(error);
        assert!(
            source.is_some_and(|source| source.is::<TransactionEnded>()),
            "{at:?}: {error} ({source:?})"
        );
        assert!(
            guard.is_held(),
            "{at:?}: the ended transaction cost the lease"
        );
    }
    guard.release().await.unwrap();
    connection
        .batch_execute(&format!(
            "DROP TABLE {notes}; DROP TABLE {scratch}; DROP TABLE {table}"
        ))
        .await
        .unwrap();
}
