//! The replicated topologies start, replicate, change roles as a failover does, and leave
//! nothing behind.

use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::time::{Duration, Instant};

use lease_tests::env::skip_or_fail;
use lease_tests::server::{GaleraCluster, PostgresReplication, Replication};
use sqlx::{Connection, MySqlConnection, PgConnection, Row};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn accepts(port: u16) -> bool {
    let address = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port).into();
    TcpStream::connect_timeout(&address, Duration::from_millis(500)).is_ok()
}

async fn pg(url: &str, sql: &str) -> Result<Vec<String>, sqlx::Error> {
    let mut connection = PgConnection::connect(url).await?;
    let rows = sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_all(&mut connection)
        .await?;
    connection.close().await?;
    Ok(rows
        .iter()
        .map(|row| row.try_get::<String, _>(0).unwrap_or_default())
        .collect())
}

/// Waits up to ten seconds for `sql` to answer `expected` at `url`.
async fn pg_eventually(url: &str, sql: &str, expected: &str) -> bool {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        if pg(url, sql).await.is_ok_and(|rows| rows == [expected]) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

fn standby_url(pair: &PostgresReplication) -> String {
    pair.standby().url()
}

#[test]
fn a_standby_follows_and_a_crash_failover_loses_what_it_missed() {
    let mut pair = match PostgresReplication::start(Replication::Asynchronous) {
        Ok(pair) => pair,
        Err(error) => return skip_or_fail("private postgres replication", &error.to_string()),
    };
    let rt = runtime();
    let (url, standby) = (pair.url(), standby_url(&pair));
    rt.block_on(async {
        pg(
            &url,
            "CREATE TABLE t (v text); INSERT INTO t VALUES ('before')",
        )
        .await
        .unwrap();
        assert!(
            pg_eventually(&standby, "SELECT string_agg(v, ',') FROM t", "before").await,
            "the standby did not replay the primary's commit"
        );
        let refused = pg(&standby, "INSERT INTO t VALUES ('nope')").await;
        assert!(refused.is_err(), "the standby took a write");
    });
    pair.stream().cut();
    rt.block_on(async {
        pg(&url, "INSERT INTO t VALUES ('missed')").await.unwrap();
    });
    let (old_port, dir) = (pair.primary().port(), pair.primary().directory().to_owned());
    pair.crash_failover().expect("the standby takes over");
    assert!(!accepts(old_port), "the crashed primary still accepts");
    let url = pair.url();
    rt.block_on(async {
        let rows = pg(&url, "SELECT string_agg(v, ',') FROM t").await.unwrap();
        assert_eq!(
            rows,
            ["before"],
            "the new primary has what it replayed, no more"
        );
        pg(&url, "INSERT INTO t VALUES ('after')")
            .await
            .expect("the promoted standby takes writes through the service address");
    });
    let new_port = pair.primary().port();
    drop(pair);
    assert!(
        !accepts(new_port),
        "port {new_port} still accepts after drop"
    );
    assert!(!dir.exists(), "{} is left behind", dir.display());
}

#[test]
fn a_switchover_swaps_the_roles_and_keeps_every_commit() {
    let mut pair = match PostgresReplication::start(Replication::Synchronous) {
        Ok(pair) => pair,
        Err(error) => return skip_or_fail("private postgres replication", &error.to_string()),
    };
    let rt = runtime();
    let url = pair.url();
    rt.block_on(async {
        pg(
            &url,
            "CREATE TABLE t (v text); INSERT INTO t VALUES ('before')",
        )
        .await
        .unwrap();
        let sync = pg(&url, "SELECT sync_state FROM pg_stat_replication")
            .await
            .unwrap();
        assert_eq!(sync, ["sync"], "the standby is not synchronous");
    });
    let old = pair.primary().port();
    pair.switchover(Duration::ZERO)
        .expect("the switchover goes through");
    assert_ne!(pair.primary().port(), old);
    assert_eq!(pair.standby().port(), old);
    assert!(pair.standby().is_standby() && !pair.primary().is_standby());
    let (url, standby) = (pair.url(), standby_url(&pair));
    rt.block_on(async {
        let rows = pg(&url, "SELECT string_agg(v, ',') FROM t").await.unwrap();
        assert_eq!(rows, ["before"]);
        pg(&url, "INSERT INTO t VALUES ('after')").await.unwrap();
        assert!(
            pg_eventually(
                &standby,
                "SELECT string_agg(v, ',' ORDER BY v) FROM t",
                "after,before"
            )
            .await,
            "the demoted primary does not follow the new one"
        );
        let recovery = pg(&standby, "SELECT pg_is_in_recovery()::text").await;
        assert_eq!(recovery.unwrap(), ["true"]);
    });
}

#[test]
fn a_galera_cluster_replicates_between_its_nodes() {
    let cluster = match GaleraCluster::start(3) {
        Ok(cluster) => cluster,
        Err(error) => return skip_or_fail("private galera", &error.to_string()),
    };
    let urls = cluster.urls();
    let rt = runtime();
    rt.block_on(async {
        let mut first = MySqlConnection::connect(&urls[0]).await.expect("connects");
        let size: String = sqlx::query("SHOW STATUS LIKE 'wsrep_cluster_size'")
            .fetch_one(&mut first)
            .await
            .unwrap()
            .get(1);
        assert_eq!(size, "3");
        sqlx::raw_sql("CREATE TABLE t (id INT PRIMARY KEY); INSERT INTO t VALUES (7)")
            .execute(&mut first)
            .await
            .unwrap();
        let mut last = MySqlConnection::connect(&urls[2]).await.expect("connects");
        // Galera applies a commit on every node before the commit returns: with
        // wsrep_sync_wait, a read on another node waits for it.
        sqlx::query("SET SESSION wsrep_sync_wait = 1")
            .execute(&mut last)
            .await
            .unwrap();
        let id: i32 = sqlx::query("SELECT id FROM t")
            .fetch_one(&mut last)
            .await
            .unwrap()
            .get(0);
        assert_eq!(id, 7);
    });
    let nodes: Vec<(u16, std::path::PathBuf)> = cluster
        .nodes()
        .iter()
        .map(|node| (node.port(), node.directory().to_owned()))
        .collect();
    drop(cluster);
    for (port, dir) in nodes {
        assert!(!accepts(port), "port {port} still accepts after drop");
        assert!(!dir.exists(), "{} is left behind", dir.display());
    }
}
