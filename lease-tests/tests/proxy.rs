//! The fault proxy passes, delays, stalls, holds the answers of and cuts the connections made
//! through it, and leaves other connections to the same server alone.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use lease_tests::proxy::{FaultProxy, Mode};

/// An echo server on a free port of 127.0.0.1, one thread per connection.
fn echo_server() -> u16 {
    // Nobody listens: what it would tell goes nowhere.
    telling_echo_server(std::sync::mpsc::channel().0)
}

fn connect(port: u16) -> TcpStream {
    let stream = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream
}

/// Sends `message` and reads the echo; `Err` when the connection fails or times out.
fn round_trip(stream: &mut TcpStream, message: &[u8]) -> std::io::Result<Vec<u8>> {
    stream.write_all(message)?;
    let mut echoed = vec![0_u8; message.len()];
    stream.read_exact(&mut echoed)?;
    Ok(echoed)
}

#[test]
fn passes_delays_stalls_and_cuts_its_own_connections_only() {
    let server = echo_server();
    let proxy = FaultProxy::start(server).unwrap();
    assert_eq!(proxy.mode(), Mode::Pass);
    let mut through = connect(proxy.port());
    let mut direct = connect(server);
    assert_eq!(round_trip(&mut through, b"ping").unwrap(), b"ping");

    proxy.delay(Duration::from_millis(150));
    let started = Instant::now();
    assert_eq!(round_trip(&mut through, b"slow").unwrap(), b"slow");
    // Delayed on the way there and on the way back.
    assert!(started.elapsed() >= Duration::from_millis(300));

    proxy.stall();
    through
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    assert!(
        round_trip(&mut through, b"held").is_err(),
        "a stall let bytes through"
    );
    assert_eq!(round_trip(&mut direct, b"direct").unwrap(), b"direct");
    proxy.pass();
    // The held bytes flow on once the stall ends.
    through
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut echoed = [0_u8; 4];
    through.read_exact(&mut echoed).unwrap();
    assert_eq!(&echoed, b"held");

    proxy.cut();
    assert!(
        round_trip(&mut through, b"gone").is_err(),
        "a cut connection still works"
    );
    let mut during_cut = connect(proxy.port());
    assert!(
        round_trip(&mut during_cut, b"new").is_err(),
        "a new connection passed a cut"
    );
    assert_eq!(round_trip(&mut direct, b"still").unwrap(), b"still");

    proxy.pass();
    let mut after = connect(proxy.port());
    assert_eq!(round_trip(&mut after, b"healed").unwrap(), b"healed");

    let stats = proxy.stats();
    assert_eq!(stats.faults, 3);
    assert!(stats.cut >= 1 && stats.refused >= 1, "{stats:?}");
    assert!(stats.accepted >= 2, "{stats:?}");
}

#[test]
fn rewrites_urls_to_its_port() {
    let proxy = FaultProxy::start(1).unwrap();
    let port = proxy.port();
    assert_eq!(
        proxy.rewrite_url("postgres://postgres@127.0.0.1:5432/test"),
        format!("postgres://postgres@127.0.0.1:{port}/test")
    );
    assert_eq!(
        proxy.rewrite_url("mysql://u:p@localhost:3306/db?ssl-mode=disabled"),
        format!("mysql://u:p@127.0.0.1:{port}/db?ssl-mode=disabled")
    );
}

/// An echo server on a free port of 127.0.0.1, one thread per connection, that also tells
/// `received` every chunk it reads.
fn telling_echo_server(received: std::sync::mpsc::Sender<Vec<u8>>) -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let received = received.clone();
            std::thread::spawn(move || {
                let mut buffer = [0_u8; 1024];
                while let Ok(read @ 1..) = stream.read(&mut buffer) {
                    let _ = received.send(buffer[..read].to_vec());
                    if stream.write_all(&buffer[..read]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    port
}

#[test]
fn holds_answers_while_requests_go_through() {
    let (tell, told) = std::sync::mpsc::channel();
    let server = telling_echo_server(tell);
    let proxy = FaultProxy::start(server).unwrap();
    let mut through = connect(proxy.port());
    assert_eq!(round_trip(&mut through, b"ping").unwrap(), b"ping");
    assert_eq!(told.recv_timeout(Duration::from_secs(5)).unwrap(), b"ping");

    proxy.hold_answers();
    assert_eq!(proxy.mode(), Mode::HoldAnswers);
    through
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    assert!(
        round_trip(&mut through, b"sent").is_err(),
        "an answer came through while answers were held"
    );
    // The request reached the server all the same.
    assert_eq!(told.recv_timeout(Duration::from_secs(5)).unwrap(), b"sent");

    // Cut, the client never gets the answer.
    proxy.cut();
    let mut echoed = [0_u8; 4];
    assert!(
        through.read_exact(&mut echoed).is_err(),
        "a held answer came through a cut"
    );
    assert_eq!(proxy.stats().faults, 2);
}

#[test]
fn starts_in_front_of_a_urls_server() {
    let proxy = FaultProxy::in_front_of("postgres://postgres@127.0.0.1:5999/test").unwrap();
    assert_eq!(proxy.upstream_port(), 5999);
    let proxy = FaultProxy::in_front_of("mysql://u:p@localhost:3307/db?ssl-mode=disabled").unwrap();
    assert_eq!(proxy.upstream_port(), 3307);
    let error = FaultProxy::in_front_of("sqlite::memory:").unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
}
