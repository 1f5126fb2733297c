//! [`GaleraCluster`]: private MariaDB servers joined by Galera's synchronous replication.

use std::io;
use std::path::{Path, PathBuf};

use super::mariadb::MariaDbServer;
use super::process;

/// Where Debian's `galera-4` package puts the provider.
const DEFAULT_PROVIDER: &str = "/usr/lib/galera/libgalera_smm.so";

/// A Galera cluster of private [`MariaDbServer`]s on 127.0.0.1, every node writable: the
/// first bootstraps the cluster (`--wsrep-new-cluster`), the others join it one at a time
/// and receive its data by state transfer (`rsync`). Each node has four free ports: clients,
/// group communication, incremental and full state transfer. Dropping it kills every node and
/// removes their directories.
///
/// The provider is looked up in `LEASE_TEST_GALERA_PROVIDER`, then at
/// `/usr/lib/galera/libgalera_smm.so` (Debian's `galera-4`); the state transfer needs
/// `rsync` on `PATH`.
///
/// ```no_run
/// use lease_tests::server::GaleraCluster;
///
/// let cluster = GaleraCluster::start(3)?;
/// let urls: Vec<String> = cluster.urls(); // mysql://root@127.0.0.1:<port>/test, one a node
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct GaleraCluster {
    nodes: Vec<MariaDbServer>,
}

/// The ports of one node.
#[derive(Debug, Clone, Copy)]
struct Ports {
    client: u16,
    group: u16,
    incremental: u16,
    full: u16,
}

impl GaleraCluster {
    /// Starts `nodes` nodes (at least one), each after the previous one answers; returns once
    /// the last has joined. Every start is bounded by the server helper's limit.
    ///
    /// # Errors
    /// [`io::ErrorKind::NotFound`] when the provider or `rsync` is missing; otherwise when a
    /// node does not start or join (the message holds the end of its log).
    pub fn start(nodes: usize) -> io::Result<Self> {
        if nodes == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a Galera cluster needs at least one node",
            ));
        }
        let provider = provider()?;
        process::find_binary(&["rsync"], &[]).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "no rsync found (Galera's state transfer needs it): install the rsync package",
            )
        })?;
        // Every port is chosen before the first node starts (each node names all the others),
        // so one can be taken in between: then the whole cluster is tried once more.
        match Self::start_on_free_ports(nodes, &provider) {
            Ok(cluster) => Ok(cluster),
            Err(_) => Self::start_on_free_ports(nodes, &provider),
        }
    }

    fn start_on_free_ports(nodes: usize, provider: &Path) -> io::Result<Self> {
        let ports = (0..nodes)
            .map(|_| {
                Ok(Ports {
                    client: process::free_port()?,
                    group: process::free_port()?,
                    incremental: process::free_port()?,
                    full: process::free_port()?,
                })
            })
            .collect::<io::Result<Vec<_>>>()?;
        let members = ports
            .iter()
            .map(|p| format!("127.0.0.1:{}", p.group))
            .collect::<Vec<_>>()
            .join(",");
        let mut cluster = Self { nodes: Vec::new() };
        for (index, own) in ports.iter().enumerate() {
            let mut options = node_options(provider, &members, *own);
            let first = index == 0;
            if first {
                options.push("--wsrep-new-cluster".to_owned());
            }
            let mut node = MariaDbServer::unstarted(first, options)?;
            node.start_on(own.client)?;
            cluster.nodes.push(node);
        }
        Ok(cluster)
    }

    /// Its nodes, in the order they started.
    pub fn nodes(&self) -> &[MariaDbServer] {
        &self.nodes
    }

    /// A URL for `root`, without password, to the `test` database of each node.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(MariaDbServer::url).collect()
    }
}

/// The Galera options of the node on `own` ports, in a cluster of `members`.
fn node_options(provider: &Path, members: &str, own: Ports) -> Vec<String> {
    vec![
        "--binlog-format=ROW".to_owned(),
        "--default-storage-engine=InnoDB".to_owned(),
        "--innodb-autoinc-lock-mode=2".to_owned(),
        "--innodb-log-file-size=8M".to_owned(),
        "--wsrep-on=ON".to_owned(),
        format!("--wsrep-provider={}", provider.display()),
        "--wsrep-cluster-name=lease-test".to_owned(),
        format!("--wsrep-cluster-address=gcomm://{members}"),
        format!("--wsrep-node-address=127.0.0.1:{}", own.group),
        format!("--wsrep-node-incoming-address=127.0.0.1:{}", own.client),
        format!(
            "--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:{};\
             ist.recv_addr=127.0.0.1:{};gcache.size=32M",
            own.group, own.incremental
        ),
        format!("--wsrep-sst-receive-address=127.0.0.1:{}", own.full),
        "--wsrep-sst-method=rsync".to_owned(),
    ]
}

/// The Galera provider library.
fn provider() -> io::Result<PathBuf> {
    let path = std::env::var_os("LEASE_TEST_GALERA_PROVIDER")
        .map_or_else(|| PathBuf::from(DEFAULT_PROVIDER), PathBuf::from);
    if path.is_file() {
        Ok(path)
    } else {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "no Galera provider at {}: install the galera-4 package or set \
                 LEASE_TEST_GALERA_PROVIDER",
                path.display()
            ),
        ))
    }
}
