//! PostgreSQL through `AsyncPgConnection`.

crate::connection::diesel_connection!(
    diesel_async::AsyncPgConnection,
    dialect = lease_sql::Dialect::Postgres,
    name = "postgres",
);
