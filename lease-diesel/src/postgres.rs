//! PostgreSQL through `AsyncPgConnection`.

use diesel::pg::Pg;
use diesel_async::AsyncPgConnection;

crate::connection::diesel_connection!(
    AsyncPgConnection,
    backend = Pg,
    dialect = lease_sql::Dialect::Postgres,
    name = "postgres",
    bind_array =
        |query, items| query.bind::<diesel::sql_types::Array<diesel::sql_types::Text>, _>(items),
);
