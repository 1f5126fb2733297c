//! The whole conformance suite against PostgreSQL, MariaDB and SQLite, each on a deadpool and a
//! bb8 pool, on tokio (diesel-async is tokio-based). On deadpool the fenced cases check at the
//! start of the transaction (`SqlStore::fence`); on bb8 they go through `lease_diesel::fenced`,
//! which checks at the commit on PostgreSQL and MariaDB. PostgreSQL once more on bb8 with
//! connections that are `SERIALIZABLE` by default.

mod support;

use diesel_async::pooled_connection::{bb8, deadpool};
use diesel_async::{AsyncMysqlConnection, AsyncPgConnection};
use lease_diesel::AsyncSqliteConnection;
use support::{Backend, MariaDb, Postgres, Sqlite};

lease_tests::conformance_suite!(
    mod postgres_deadpool,
    runtime = tokio,
    backend = Backend::<Postgres, deadpool::Pool<AsyncPgConnection>>::new(),
);

lease_tests::conformance_suite!(
    mod postgres_bb8,
    runtime = tokio,
    backend = Backend::<Postgres, bb8::Pool<AsyncPgConnection>>::new().through_fenced(),
);

// Connections whose transactions are SERIALIZABLE by default, as a database or role may set
// them: every statement of the store under a snapshot, and `lease_diesel::fenced`, which then
// checks with the `BEGIN`.
lease_tests::conformance_suite!(
    mod postgres_bb8_serializable,
    runtime = tokio,
    backend = Backend::<Postgres, bb8::Pool<AsyncPgConnection>>::new()
        .through_fenced()
        .serializable(),
);

lease_tests::conformance_suite!(
    mod mariadb_deadpool,
    runtime = tokio,
    backend = Backend::<MariaDb, deadpool::Pool<AsyncMysqlConnection>>::new(),
);

lease_tests::conformance_suite!(
    mod mariadb_bb8,
    runtime = tokio,
    backend = Backend::<MariaDb, bb8::Pool<AsyncMysqlConnection>>::new().through_fenced(),
);

lease_tests::conformance_suite!(
    mod sqlite_deadpool,
    runtime = tokio,
    backend = Backend::<Sqlite, deadpool::Pool<AsyncSqliteConnection>>::new(),
);

lease_tests::conformance_suite!(
    mod sqlite_bb8,
    runtime = tokio,
    backend = Backend::<Sqlite, bb8::Pool<AsyncSqliteConnection>>::new().through_fenced(),
);

// Through `Arc<dyn LeaseStore>`, the way an application that picks its store at run time holds
// one: the trait's object-safe path.
lease_tests::conformance_suite!(
    mod sqlite_deadpool_dyn,
    runtime = tokio,
    backend =
        lease_tests::DynBackend::new(Backend::<Sqlite, deadpool::Pool<AsyncSqliteConnection>>::new()),
);
