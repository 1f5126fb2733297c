//! The host and port of a database URL (`scheme://[user[:password]@]host[:port][/path][?query]`),
//! read without a URL parser: the delaying proxy needs the port, and can only reach a loopback
//! host.

/// The `host[:port]` part of `url`, or `None` when it has no `scheme://`.
fn authority(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    Some(
        authority
            .rsplit_once('@')
            .map_or(authority, |(_, host)| host),
    )
}

/// The host of `url` as written (an IPv6 address with its brackets), or `None` when it has
/// none.
pub fn host(url: &str) -> Option<&str> {
    let authority = authority(url)?;
    let host = if authority.starts_with('[') {
        &authority[..=authority.find(']')?]
    } else {
        authority
            .split_once(':')
            .map_or(authority, |(host, _)| host)
    };
    (!host.is_empty()).then_some(host)
}

/// The port of `url`, or `None` when it names none.
pub fn port(url: &str) -> Option<u16> {
    let authority = authority(url)?;
    let after_host = match authority.find(']') {
        Some(end) => &authority[end + 1..],
        None => authority,
    };
    after_host.rsplit_once(':')?.1.parse().ok()
}

/// Whether `host` is the loopback address the delaying proxy forwards to: `127.0.0.1`, or
/// `localhost`. Other loopback addresses (the rest of 127.0.0.0/8, `::1`) are not: the proxy
/// reaches 127.0.0.1 alone, and a server listening elsewhere would not be the one measured.
pub fn is_loopback(host: &str) -> bool {
    host == "127.0.0.1" || host.eq_ignore_ascii_case("localhost")
}

#[cfg(test)]
mod tests {
    use super::{host, is_loopback, port};

    #[test]
    fn the_port_is_read_from_the_url() {
        assert_eq!(port("postgres://postgres@127.0.0.1:5432/test"), Some(5432));
        assert_eq!(port("mysql://root@127.0.0.1:3306/test"), Some(3306));
        assert_eq!(port("mysql://127.0.0.1:3307"), Some(3307));
        assert_eq!(port("postgres://u:p@[::1]:5433/db"), Some(5433));
        assert_eq!(port("postgres://db:5434?sslmode=disable"), Some(5434));
        assert_eq!(port("postgres://127.0.0.1/test"), None);
        assert_eq!(port("postgres://[::1]/test"), None);
    }

    #[test]
    fn the_host_is_read_from_the_url() {
        assert_eq!(
            host("postgres://postgres@127.0.0.1:5432/test"),
            Some("127.0.0.1")
        );
        assert_eq!(
            host("mysql://root:secret@db.example:3306/test"),
            Some("db.example")
        );
        assert_eq!(host("postgres://localhost/test"), Some("localhost"));
        assert_eq!(host("postgres://u@[::1]:5432/db"), Some("[::1]"));
        assert_eq!(
            host("postgres://db.example?sslmode=require"),
            Some("db.example")
        );
        assert_eq!(host("postgres:///db?host=/run/postgresql"), None);
        assert_eq!(host("not a url"), None);
    }

    #[test]
    fn only_the_hosts_the_proxy_reaches_are_loopback() {
        for loopback in ["127.0.0.1", "localhost", "LocalHost"] {
            assert!(is_loopback(loopback), "{loopback}");
        }
        for remote in [
            "db.example",
            "10.0.0.5",
            "127.0.0.2",
            "::1",
            "[::1]",
            "0.0.0.0",
            "",
        ] {
            assert!(!is_loopback(remote), "{remote}");
        }
    }
}
