//! Throwaway database servers for tests that stop, restart or cut off a server: a private
//! PostgreSQL ([`PostgresServer`]) or MariaDB ([`MariaDbServer`]) from the local installation,
//! on a free port in a temporary directory, stopped and removed when dropped (also when the
//! test panics). Starting one takes about a second.
//!
//! Replicated topologies are made of them: a PostgreSQL primary with a streaming standby and
//! the role changes of a failover ([`PostgresReplication`]), and a MariaDB Galera cluster
//! ([`GaleraCluster`]).
//!
//! Never point such a test at a shared server: use these.
//!
//! The helpers block while the server starts or stops; call them before the test's runtime
//! starts, or from a blocking task.
//!
//! When the test runs as root, the server runs as the installation's own user (`postgres`,
//! `mysql`), because neither server agrees to run as root.

mod galera;
mod mariadb;
mod postgres;
mod postgres_replication;
pub(crate) mod process;

pub use galera::GaleraCluster;
pub use mariadb::MariaDbServer;
pub use postgres::PostgresServer;
pub use postgres_replication::{PostgresReplication, Replication};
