//! MariaDB through `AsyncMysqlConnection`.

crate::connection::diesel_connection!(
    diesel_async::AsyncMysqlConnection,
    dialect = lease_sql::Dialect::MySql,
    name = "mariadb",
);
