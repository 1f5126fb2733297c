//! A pooled MariaDB connection the server killed (a restart, a failover, `KILL`, an idle
//! timeout) is discarded after the statement that found it dead, also from a deadpool pool that
//! recycles without a ping (`RecyclingMethod::Fast`, which the README recommends for a pool that
//! serves only lease stores): diesel-async's MariaDB connection never reconnects and reports
//! itself healthy, so kept, it would fail every later statement, and every renewal with it.
#![cfg(all(feature = "mysql", feature = "deadpool"))]

use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod,
};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl, SimpleAsyncConnection};
use lease_core::{LeaseName, LeaseStore};
use lease_diesel::DieselStore;
use lease_tests::env;

#[derive(diesel::QueryableByName)]
struct Id {
    #[diesel(sql_type = diesel::sql_types::Unsigned<diesel::sql_types::BigInt>)]
    id: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_drops_a_connection_the_server_killed() {
    let url = env::mysql_url();
    let mut config = ManagerConfig::default();
    config.recycling_method = RecyclingMethod::Fast;
    let manager =
        AsyncDieselConnectionManager::<AsyncMysqlConnection>::new_with_config(&url, config);
    // One connection: the statement after the kill gets the killed one back, unless discarded.
    let pool = Pool::builder(manager).max_size(1).build().unwrap();
    let table = env::unique_table("killed");
    let store = DieselStore::with_table(pool.clone(), &table).unwrap();
    if let Err(error) = store.setup().await {
        env::skip_or_fail("mariadb", &error.to_string());
        return;
    }
    let name = LeaseName::new("sweep").unwrap();
    assert_eq!(store.inspect(&name).await.unwrap(), None);

    let id = {
        let mut connection = pool.get().await.unwrap();
        diesel::sql_query("SELECT CONNECTION_ID() AS id")
            .get_result::<Id>(&mut *connection)
            .await
            .unwrap()
            .id
    };
    let mut admin = AsyncMysqlConnection::establish(&url).await.unwrap();
    admin
        .batch_execute(&format!("KILL CONNECTION {id}"))
        .await
        .unwrap();

    let first = store.inspect(&name).await;
    // The next statements run on a new connection.
    let (second, third) = (store.inspect(&name).await, store.inspect(&name).await);
    // Dropped before the verdict, so a failed run leaves no table behind.
    admin
        .batch_execute(&format!("DROP TABLE IF EXISTS {table}"))
        .await
        .unwrap();

    let error = first.expect_err("a statement on the killed connection");
    assert!(error.is_transient(), "{error}");
    assert_eq!(second.unwrap(), None);
    assert_eq!(third.unwrap(), None);
}
