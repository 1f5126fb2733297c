//! [`FaultProxy`]: a TCP proxy between one client and its database server that passes, delays,
//! stalls or cuts that client's connections on command, while every other client reaches the
//! server directly.
//!
//! It listens on 127.0.0.1 only, and runs on plain threads (two per connection), so it works
//! under any async runtime and keeps working while the test's runtime is busy.
//!
//! ```no_run
//! use std::time::Duration;
//! use lease_tests::proxy::FaultProxy;
//!
//! # fn main() -> std::io::Result<()> {
//! let proxy = FaultProxy::start(5432)?;
//! let url = proxy.rewrite_url("postgres://postgres@127.0.0.1:5432/test");
//! // ... a client connects to `url` ...
//! proxy.stall();                                  // a black hole: bytes stop, sockets stay
//! proxy.pass();                                   // heals: held bytes flow on
//! proxy.delay(Duration::from_millis(200));        // every chunk arrives 200 ms late
//! proxy.hold_answers();                           // requests go through, answers wait
//! proxy.cut();                                    // every connection reset, new ones closed
//! println!("{:?}", proxy.stats());
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// What the proxy does with its connections right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mode {
    /// Forwards every byte at once.
    Pass,
    /// Forwards every chunk after this long, in both directions.
    Delay(Duration),
    /// Forwards nothing and closes nothing: connections stay open, bytes wait (a black hole,
    /// as a partition that drops packets looks to both ends). New connections are accepted and
    /// hang the same way. Held bytes flow on when the mode changes back.
    Stall,
    /// Resets every open connection at once and closes every new one as soon as it is accepted
    /// (a partition that rejects packets).
    Cut,
    /// Forwards what the client sends and holds what the server answers, as
    /// [`Stall`](Self::Stall) holds both: a request reaches the server, which acts on it, and
    /// its answer waits (a one-way partition). Followed by [`cut`](FaultProxy::cut), the client
    /// never learns what its last request did.
    HoldAnswers,
}

/// Which way a chunk goes through the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// From the client to the server: a request.
    Request,
    /// From the server to the client: an answer.
    Answer,
}

/// What the proxy has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProxyStats {
    /// Connections accepted and forwarded.
    pub accepted: u64,
    /// Connections closed on accept because the proxy was cutting.
    pub refused: u64,
    /// Open connections reset by [`FaultProxy::cut`].
    pub cut: u64,
    /// Faults commanded: every [`delay`](FaultProxy::delay), [`stall`](FaultProxy::stall) and
    /// [`cut`](FaultProxy::cut).
    pub faults: u64,
    /// Bytes forwarded, both directions together.
    pub bytes: u64,
}

/// A TCP proxy on 127.0.0.1 in front of one upstream port, with faults on command; stopped
/// (every connection closed) when dropped.
#[derive(Debug)]
pub struct FaultProxy {
    shared: Arc<Shared>,
    port: u16,
    acceptor: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    /// Where new connections go; [`FaultProxy::redirect`] moves it.
    upstream: Mutex<SocketAddr>,
    state: Mutex<State>,
    changed: Condvar,
    stopping: AtomicBool,
    accepted: AtomicU64,
    refused: AtomicU64,
    cut: AtomicU64,
    faults: AtomicU64,
    bytes: AtomicU64,
}

#[derive(Debug)]
struct State {
    mode: Mode,
    next_id: u64,
    /// Both sockets of every open connection, so a cut can reset them from outside their
    /// threads (a blocked read returns once its socket is shut down).
    open: HashMap<u64, (TcpStream, TcpStream)>,
}

impl FaultProxy {
    /// Starts a proxy on a free port of 127.0.0.1 forwarding to `upstream_port` on 127.0.0.1,
    /// passing everything.
    ///
    /// # Errors
    /// When no port can be bound.
    pub fn start(upstream_port: u16) -> io::Result<Self> {
        let listener = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))?;
        let port = listener.local_addr()?.port();
        let shared = Arc::new(Shared {
            upstream: Mutex::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, upstream_port).into()),
            state: Mutex::new(State {
                mode: Mode::Pass,
                next_id: 0,
                open: HashMap::new(),
            }),
            changed: Condvar::new(),
            stopping: AtomicBool::new(false),
            accepted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            cut: AtomicU64::new(0),
            faults: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        });
        let acceptor = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name(format!("fault-proxy-{port}"))
                .spawn(move || accept_loop(&listener, &shared))?
        };
        Ok(Self {
            shared,
            port,
            acceptor: Some(acceptor),
        })
    }

    /// Starts a proxy (as [`start`](FaultProxy::start)) in front of the server `url` names:
    /// its port, on 127.0.0.1.
    ///
    /// # Errors
    /// When `url` names no port, or no port can be bound.
    pub fn in_front_of(url: &str) -> io::Result<Self> {
        let port = url_port(url).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("no port in {url}"))
        })?;
        Self::start(port)
    }

    /// The port it listens on, on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `url` with its port replaced by the proxy's: `scheme://user@host:PORT/db` becomes
    /// `scheme://user@127.0.0.1:<proxy port>/db`.
    ///
    /// # Panics
    /// When `url` has no `host:port` after its `scheme://` and optional `user@`.
    pub fn rewrite_url(&self, url: &str) -> String {
        let parts = UrlParts::of(url).expect("a URL with a scheme");
        format!(
            "{}://{}127.0.0.1:{}{}",
            parts.scheme, parts.user, self.port, parts.path
        )
    }

    /// Sends new connections to `upstream_port` on 127.0.0.1 from now on, as a moved virtual
    /// address or DNS name would: connections already open stay with the old server until it
    /// or the client closes them. Not a fault (not counted in [`ProxyStats::faults`]).
    pub fn redirect(&self, upstream_port: u16) {
        *self
            .shared
            .upstream
            .lock()
            .unwrap_or_else(PoisonError::into_inner) =
            SocketAddrV4::new(Ipv4Addr::LOCALHOST, upstream_port).into();
    }

    /// The port on 127.0.0.1 new connections go to.
    pub fn upstream_port(&self) -> u16 {
        self.shared
            .upstream
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .port()
    }

    /// What it does now.
    pub fn mode(&self) -> Mode {
        self.shared.lock().mode
    }

    /// Forwards everything again; bytes held by a stall flow on.
    pub fn pass(&self) {
        self.set(Mode::Pass);
    }

    /// Delays every chunk by `by`, in both directions.
    pub fn delay(&self, by: Duration) {
        self.shared.faults.fetch_add(1, Ordering::Relaxed);
        self.set(Mode::Delay(by));
    }

    /// Stops forwarding without closing anything (see [`Mode::Stall`]).
    pub fn stall(&self) {
        self.shared.faults.fetch_add(1, Ordering::Relaxed);
        self.set(Mode::Stall);
    }

    /// Forwards requests and holds answers (see [`Mode::HoldAnswers`]).
    pub fn hold_answers(&self) {
        self.shared.faults.fetch_add(1, Ordering::Relaxed);
        self.set(Mode::HoldAnswers);
    }

    /// Resets every open connection and closes new ones (see [`Mode::Cut`]) until
    /// [`pass`](FaultProxy::pass).
    pub fn cut(&self) {
        self.shared.faults.fetch_add(1, Ordering::Relaxed);
        self.set(Mode::Cut);
        let open: Vec<(TcpStream, TcpStream)> =
            self.shared.lock().open.drain().map(|(_, s)| s).collect();
        for (client, server) in open {
            self.shared.cut.fetch_add(1, Ordering::Relaxed);
            let _ = client.shutdown(Shutdown::Both);
            let _ = server.shutdown(Shutdown::Both);
        }
    }

    /// What it has done so far.
    pub fn stats(&self) -> ProxyStats {
        let s = &self.shared;
        ProxyStats {
            accepted: s.accepted.load(Ordering::Relaxed),
            refused: s.refused.load(Ordering::Relaxed),
            cut: s.cut.load(Ordering::Relaxed),
            faults: s.faults.load(Ordering::Relaxed),
            bytes: s.bytes.load(Ordering::Relaxed),
        }
    }

    /// How many connections are open through it now.
    pub fn open_connections(&self) -> usize {
        self.shared.lock().open.len()
    }

    fn set(&self, mode: Mode) {
        self.shared.lock().mode = mode;
        self.shared.changed.notify_all();
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wakes the acceptor, which then sees `stopping`.
        let _ = TcpStream::connect_timeout(
            &SocketAddrV4::new(Ipv4Addr::LOCALHOST, self.port).into(),
            Duration::from_secs(1),
        );
        self.cut();
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until a chunk going `direction` may be forwarded: `true` to forward it now,
    /// `false` when the connection is cut.
    fn may_forward(&self, direction: Direction) -> bool {
        let mut state = self.lock();
        loop {
            if self.stopping.load(Ordering::SeqCst) {
                return false;
            }
            match state.mode {
                Mode::Pass => return true,
                Mode::HoldAnswers if direction == Direction::Request => return true,
                Mode::Cut => return false,
                Mode::Delay(by) => {
                    drop(state);
                    std::thread::sleep(by);
                    return true;
                }
                Mode::Stall | Mode::HoldAnswers => {
                    // Woken by every mode change; a timeout too, so a stop is noticed.
                    state = self
                        .changed
                        .wait_timeout(state, Duration::from_millis(200))
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
            }
        }
    }

    fn close(&self, id: u64) {
        if let Some((client, server)) = self.lock().open.remove(&id) {
            let _ = client.shutdown(Shutdown::Both);
            let _ = server.shutdown(Shutdown::Both);
        }
    }
}

/// The pieces of `scheme://[user@]host[:port][/path...]` the proxy reads and rewrites.
struct UrlParts<'a> {
    scheme: &'a str,
    /// `user@` (with the `@`), or empty.
    user: &'a str,
    /// `host` or `host:port`.
    host: &'a str,
    /// Everything from the first `/`, `?` or `#` after the host on, or empty.
    path: &'a str,
}

impl<'a> UrlParts<'a> {
    fn of(url: &'a str) -> Option<Self> {
        let (scheme, rest) = url.split_once("://")?;
        let (authority, path) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
        let (user, host) = match authority.rfind('@') {
            Some(at) => authority.split_at(at + 1),
            None => ("", authority),
        };
        Some(Self {
            scheme,
            user,
            host,
            path,
        })
    }
}

/// The port of `scheme://[user@]host:port/...`.
fn url_port(url: &str) -> Option<u16> {
    UrlParts::of(url)?.host.rsplit_once(':')?.1.parse().ok()
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    for client in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = client else { continue };
        if shared.lock().mode == Mode::Cut {
            shared.refused.fetch_add(1, Ordering::Relaxed);
            let _ = client.shutdown(Shutdown::Both);
            continue;
        }
        let shared = Arc::clone(shared);
        // Connecting upstream may take a moment; never hold up the next accept for it.
        let _ = std::thread::Builder::new()
            .name("fault-proxy-conn".to_owned())
            .spawn(move || connect(client, &shared));
    }
}

fn connect(client: TcpStream, shared: &Arc<Shared>) {
    let upstream = *shared
        .upstream
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let Ok(server) = TcpStream::connect_timeout(&upstream, Duration::from_secs(5)) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (Ok(client_copy), Ok(server_copy)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let id = {
        let mut state = shared.lock();
        if state.mode == Mode::Cut {
            shared.refused.fetch_add(1, Ordering::Relaxed);
            let _ = client.shutdown(Shutdown::Both);
            let _ = server.shutdown(Shutdown::Both);
            return;
        }
        let id = state.next_id;
        state.next_id += 1;
        state.open.insert(id, (client_copy, server_copy));
        id
    };
    shared.accepted.fetch_add(1, Ordering::Relaxed);
    let (Ok(client_read), Ok(server_read)) = (client.try_clone(), server.try_clone()) else {
        shared.close(id);
        return;
    };
    let upstream = {
        let shared = Arc::clone(shared);
        std::thread::Builder::new()
            .name("fault-proxy-up".to_owned())
            .spawn(move || pump(client_read, server, Direction::Request, id, &shared))
    };
    pump(server_read, client, Direction::Answer, id, shared);
    if let Ok(upstream) = upstream {
        let _ = upstream.join();
    }
}

/// Copies `from` into `to` chunk by chunk, each as the mode allows chunks going `direction`,
/// until either side closes or the connection is cut; then closes both.
fn pump(mut from: TcpStream, mut to: TcpStream, direction: Direction, id: u64, shared: &Shared) {
    let mut buffer = vec![0_u8; 16 * 1024];
    loop {
        let read = match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        if !shared.may_forward(direction) || to.write_all(&buffer[..read]).is_err() {
            break;
        }
        shared.bytes.fetch_add(read as u64, Ordering::Relaxed);
    }
    shared.close(id);
}

#[cfg(test)]
mod tests {
    use super::url_port;

    /// The port ends where the path, the query or the fragment begins.
    #[test]
    fn reads_the_port_before_a_path_a_query_or_a_fragment() {
        assert_eq!(url_port("postgres://app:pw@db:5434/test"), Some(5434));
        assert_eq!(url_port("postgres://db:5434?sslmode=disable"), Some(5434));
        assert_eq!(url_port("mysql://db:3307#x"), Some(3307));
        assert_eq!(url_port("postgres://db/test"), None);
    }
}
