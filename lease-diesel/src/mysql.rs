//! MariaDB through `AsyncMysqlConnection`.

use diesel::mysql::Mysql;
use diesel_async::AsyncMysqlConnection;

crate::connection::diesel_connection!(
    AsyncMysqlConnection,
    backend = Mysql,
    dialect = lease_sql::Dialect::MySql,
    name = "mariadb",
    // MariaDB's statements bind no arrays: renew-many sends each pair as two parameters.
    bind_array = |query, items| {
        let _ = items;
        query
    },
);
