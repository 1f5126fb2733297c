//! The host of a database URL (`scheme://[user[:password]@]host[:port][/path][?query]`), read
//! without a URL parser: the delaying proxy (which reads the port itself) can only reach a
//! loopback host.

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

/// Whether `host` is the loopback address the delaying proxy forwards to: `127.0.0.1`, or
/// `localhost`. Other loopback addresses (the rest of 127.0.0.0/8, `::1`) are not: the proxy
/// reaches 127.0.0.1 alone, and a server listening elsewhere would not be the one measured.
pub fn is_loopback(host: &str) -> bool {
    host == "127.0.0.1" || host.eq_ignore_ascii_case("localhost")
}

#[cfg(test)]
mod tests {
    use super::{host, is_loopback};

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
