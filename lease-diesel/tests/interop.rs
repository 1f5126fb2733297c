//! lease-diesel and lease-sqlx on one table at once, as in an application moving from one to the
//! other or running both: the same schema, the same statements, one lease between them. For
//! SQLite, both crates open the same file through the one SQLite library they link.

mod support;

use std::time::{Duration, SystemTime};

use diesel_async::pooled_connection::deadpool;
use diesel_async::{AsyncMysqlConnection, AsyncPgConnection};
use lease_core::{Fence, HolderId, LeaseName, LeaseStore, Ttl};
use lease_diesel::{AsyncSqliteConnection, DieselStore};
use lease_sqlx::sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use lease_sqlx::sqlx::{MySqlPool, PgPool};
use lease_sqlx::{MySqlLeaseStore, PgLeaseStore, SqliteLeaseStore, sqlite_connect_options};
use lease_tests::env;
use support::{Backend, Database, MariaDb, Postgres, Sqlite, TestPool};

/// A diesel store on a fresh table, or `None` (after a loud skip) when the server is missing.
async fn diesel_store<D, P>() -> Option<(DieselStore<P>, String)>
where
    D: Database,
    P: TestPool<Connection = D::Connection>,
{
    if let Err(why) = D::available().await {
        env::skip_or_fail(D::NAME, &why.to_string());
        return None;
    }
    Some(
        Backend::<D, P>::new()
            .make(4)
            .await
            .expect("a diesel store on a fresh table"),
    )
}

/// Every lease a store lists, without the time of the read.
async fn listed(store: &impl LeaseStore) -> Vec<(String, HolderId, Fence, SystemTime, SystemTime)> {
    let leases = store.list().await.unwrap();
    leases
        .into_iter()
        .map(|info| {
            let name = info.name.as_str().to_owned();
            (
                name,
                info.holder,
                info.fence,
                info.taken_at,
                info.expires_at,
            )
        })
        .collect()
}

/// One lease between the two stores: whoever holds it, the other is refused, sees the same
/// holder and fence, can renew or release it only with the holder's id, and fences keep
/// counting across the two.
async fn one_lease_between_them(diesel: &impl LeaseStore, sqlx: &impl LeaseStore) {
    let ttl = Ttl::from_secs(60).unwrap();
    let lease = LeaseName::new("mail-checks: it's 🔒").unwrap();
    let (a, b) = (HolderId::generate(), HolderId::generate());

    let first = diesel.try_acquire(&lease, &a, ttl).await.unwrap();
    let first = first.expect("a fresh lease");
    assert_eq!(sqlx.try_acquire(&lease, &b, ttl).await.unwrap(), None);
    let seen = sqlx.inspect(&lease).await.unwrap().expect("the lease");
    assert_eq!((seen.holder.clone(), seen.fence), (a.clone(), first));
    assert_eq!(listed(sqlx).await, listed(diesel).await);

    // The holder's id renews and releases through the other crate; a stranger's does not.
    assert!(sqlx.renew(&lease, &a, ttl).await.unwrap());
    assert!(!sqlx.renew(&lease, &b, ttl).await.unwrap());
    assert_eq!(
        diesel
            .renew_many(
                &[(lease.clone(), a.clone()), (lease.clone(), b.clone())],
                ttl
            )
            .await
            .unwrap(),
        [true, false]
    );
    assert!(sqlx.release(&lease, &a, Duration::ZERO).await.unwrap());
    assert_eq!(diesel.inspect(&lease).await.unwrap(), None);

    let second = sqlx.try_acquire(&lease, &b, ttl).await.unwrap();
    let second = second.expect("a released lease");
    assert!(second > first, "fence {second} after {first}");
    assert_eq!(diesel.try_acquire(&lease, &a, ttl).await.unwrap(), None);
    assert!(diesel.release(&lease, &b, Duration::ZERO).await.unwrap());
    let third = diesel.try_acquire(&lease, &a, ttl).await.unwrap();
    assert!(third.expect("a released lease") > second);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_one_lease_between_diesel_and_sqlx() {
    type Pool = deadpool::Pool<AsyncPgConnection>;
    let Some((diesel, table)) = diesel_store::<Postgres, Pool>().await else {
        return;
    };
    let pool = PgPool::connect(&env::postgres_url()).await.unwrap();
    let sqlx = PgLeaseStore::with_table(pool, &table).unwrap();
    // Both setups at once: they share one advisory lock, so neither fails on the catalog.
    let (a, b) = tokio::join!(diesel.setup(), sqlx.setup());
    a.unwrap();
    b.unwrap();
    one_lease_between_them(&diesel, &sqlx).await;
    Backend::<Postgres, Pool>::drop_table(diesel.pool(), &table)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_one_lease_between_diesel_and_sqlx() {
    type Pool = deadpool::Pool<AsyncMysqlConnection>;
    let Some((diesel, table)) = diesel_store::<MariaDb, Pool>().await else {
        return;
    };
    let pool = MySqlPool::connect(&env::mysql_url()).await.unwrap();
    let sqlx = MySqlLeaseStore::with_table(pool, &table).unwrap();
    sqlx.setup().await.unwrap();
    one_lease_between_them(&diesel, &sqlx).await;
    Backend::<MariaDb, Pool>::drop_table(diesel.pool(), &table)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_one_lease_between_diesel_and_sqlx_in_one_file() {
    type Pool = deadpool::Pool<AsyncSqliteConnection>;
    let Some((diesel, table)) = diesel_store::<Sqlite, Pool>().await else {
        return;
    };
    let options = SqliteConnectOptions::new().filename(Sqlite::url(&table));
    let pool = SqlitePoolOptions::new()
        .connect_with(sqlite_connect_options(options))
        .await
        .unwrap();
    let sqlx = SqliteLeaseStore::with_table(pool, &table).unwrap();
    sqlx.setup().await.unwrap();
    one_lease_between_them(&diesel, &sqlx).await;
    Backend::<Sqlite, Pool>::drop_table(diesel.pool(), &table)
        .await
        .unwrap();
}
