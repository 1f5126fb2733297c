//! bb8 runs a connection's check-out ping inside its own `connection_timeout`, the connection
//! already taken from its idle list; when the timeout cuts the ping short, bb8 puts the
//! connection back, and diesel-async's MariaDB connection, which reports itself healthy, would
//! be handed out again with the ping's answer unread: the next ping reads it, and the next lease
//! statement the ping's own. With `lease_diesel::mysql_manager` (its ping, `mysql_ping`, marks
//! the connection broken until the answer is read) the pool closes such a connection, and the
//! statements after the cut answer what they should. The control: the same pool with
//! diesel-async's own ping answers the statements wrongly or fails them.
#![cfg(all(feature = "mysql", feature = "bb8"))]

use std::time::Duration;

use diesel_async::pooled_connection::AsyncDieselConnectionManager;
use diesel_async::pooled_connection::bb8::Pool;
use diesel_async::{AsyncConnection, AsyncMysqlConnection, SimpleAsyncConnection};
use lease_core::{BoxError, HolderId, LeaseName, LeaseStore, Ttl};
use lease_diesel::DieselStore;
use lease_tests::env;
use lease_tests::proxy::FaultProxy;

/// Lease statements through a bb8 pool of one connection made by `manager` behind a proxy,
/// after a check-out ping the pool's timeout cut short: `Ok` when each answered as it should.
async fn after_a_cut_ping(
    proxy: &FaultProxy,
    manager: AsyncDieselConnectionManager<AsyncMysqlConnection>,
    table: &str,
) -> Result<(), BoxError> {
    let pool = Pool::builder()
        .max_size(1)
        .connection_timeout(Duration::from_millis(500))
        .build(manager)
        .await?;
    let store = DieselStore::with_table(pool, table)?;
    store.setup().await?;
    let name = LeaseName::new("alerts")?;
    // The pool's one connection is idle now, its check-out ping to come.
    assert_eq!(store.inspect(&name).await?, None);
    // The ping reaches the server, its answer waits past the pool's timeout.
    proxy.hold_answers();
    let cut = store.inspect(&name).await;
    assert!(
        cut.is_err(),
        "answered through a proxy that held the answers: {cut:?}"
    );
    proxy.pass();
    // The held answer arrives.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let me = HolderId::generate();
    let ttl = Ttl::from_secs(30)?;
    let fence = store
        .try_acquire(&name, &me, ttl)
        .await?
        .ok_or("a free lease was not acquired")?;
    let info = store
        .inspect(&name)
        .await?
        .ok_or("the lease just taken is not there")?;
    if info.holder != me || info.fence != fence {
        return Err(format!("inspect answered {info:?} for {me} with fence {fence}").into());
    }
    if !store.release(&name, &me, Duration::ZERO).await? {
        return Err("the release of the lease held read as not released".into());
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_a_check_out_ping_cut_short_closes_the_connection() {
    let url = env::mysql_url();
    let proxy = FaultProxy::in_front_of(&url).unwrap();
    // On TCP through the proxy: mysql_async would move a connection to 127.0.0.1 onto the
    // server's Unix socket, past it.
    let through = format!("{}?prefer_socket=false", proxy.rewrite_url(&url));
    let mut admin = match AsyncMysqlConnection::establish(&url).await {
        Ok(admin) => admin,
        Err(error) => {
            env::skip_or_fail("mariadb", &error.to_string());
            return;
        }
    };
    let table = env::unique_table("cut_ping");
    let outcome =
        after_a_cut_ping(&proxy, lease_diesel::mysql_manager(through.clone()), &table).await;
    admin
        .batch_execute(&format!("DROP TABLE IF EXISTS {table}"))
        .await
        .unwrap();
    outcome.unwrap();

    // The control: diesel-async's own ping leaves the connection out of step.
    let control = after_a_cut_ping(
        &proxy,
        AsyncDieselConnectionManager::<AsyncMysqlConnection>::new(through),
        &table,
    )
    .await;
    admin
        .batch_execute(&format!("DROP TABLE IF EXISTS {table}"))
        .await
        .unwrap();
    let error = control.expect_err(
        "the control answered as it should: the cut ping did not put its connection out of step",
    );
    eprintln!("the control, out of step after the cut ping: {error}");
}
