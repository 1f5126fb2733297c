//! What `--output json` prints: one document of a stable shape per answer (see the README).
//!
//! ```text
//! list:  {"table": "leases", "read_at": "2026-11-30T12:29:08.254Z", "leases": [LEASE, ...]}
//! show:  {"table": "leases", "read_at": "2026-11-30T12:29:08.254Z", "lease": LEASE}
//! LEASE: {"name": "sweep", "holder": "web-1:4242:00ff00ff00ff00ff", "fence": 7,
//!         "taken_at": "...Z", "expires_at": "...Z", "expires_in_ms": 119000, "expired": false}
//! ```
//!
//! Times are the database's, UTC RFC 3339 to the millisecond; `read_at` is `null` for an empty
//! list (no row carried the database's time); `expires_in_ms` is negative once expired.

use lease_core::LeaseInfo;
use serde_json::{Value, json};

use crate::time::rfc3339;

/// One lease.
fn lease(info: &LeaseInfo) -> Value {
    // Negative exactly when `expired`: a lease expired less than a millisecond ago (or at the
    // read itself) reads -1, not 0, and one held reads its whole milliseconds left.
    let expires_in_ms = if info.is_expired() {
        let ago = info
            .observed_at
            .duration_since(info.expires_at)
            .unwrap_or_default();
        -i64::try_from(ago.as_micros().div_ceil(1_000).max(1)).unwrap_or(i64::MAX)
    } else {
        i64::try_from(info.expires_in().as_millis()).unwrap_or(i64::MAX)
    };
    json!({
        "name": info.name.as_str(),
        "holder": info.holder.as_str(),
        "fence": info.fence.get(),
        "taken_at": rfc3339(info.taken_at),
        "expires_at": rfc3339(info.expires_at),
        "expires_in_ms": expires_in_ms,
        "expired": info.is_expired(),
    })
}

/// Every lease, on one line.
pub(crate) fn list(leases: &[LeaseInfo], table: &str) -> String {
    let read_at = leases.first().map(|info| rfc3339(info.observed_at));
    let document = json!({
        "table": table,
        "read_at": read_at,
        "leases": leases.iter().map(lease).collect::<Vec<_>>(),
    });
    format!("{document}\n")
}

/// One lease, on one line.
pub(crate) fn show(info: &LeaseInfo, table: &str) -> String {
    let document = json!({
        "table": table,
        "read_at": rfc3339(info.observed_at),
        "lease": lease(info),
    });
    format!("{document}\n")
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use lease_core::{Fence, HolderId, LeaseName};

    use super::*;

    fn info(name: &str, expires_in_secs: i64) -> LeaseInfo {
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let expires = if expires_in_secs >= 0 {
            now + Duration::from_secs(expires_in_secs as u64)
        } else {
            now - Duration::from_secs(expires_in_secs.unsigned_abs())
        };
        LeaseInfo::new(
            LeaseName::new(name).unwrap(),
            HolderId::from_stored("host-1:42:00000000000000ff"),
            Fence::new(1_764_590_000_000_000),
            now - Duration::from_secs(8),
            expires,
            now,
        )
    }

    #[test]
    fn the_shape_is_stable() {
        assert_eq!(
            list(&[info("alerts", 30), info("sweep", -5)], "leases"),
            concat!(
                r#"{"leases":[{"expired":false,"expires_at":"2027-01-15T08:00:30.000Z","expires_in_ms":30000,"fence":1764590000000000,"holder":"host-1:42:00000000000000ff","name":"alerts","taken_at":"2027-01-15T07:59:52.000Z"},"#,
                r#"{"expired":true,"expires_at":"2027-01-15T07:59:55.000Z","expires_in_ms":-5000,"fence":1764590000000000,"holder":"host-1:42:00000000000000ff","name":"sweep","taken_at":"2027-01-15T07:59:52.000Z"}],"#,
                r#""read_at":"2027-01-15T08:00:00.000Z","table":"leases"}"#,
                "\n"
            )
        );
        assert_eq!(
            list(&[], "jobs.leases"),
            "{\"leases\":[],\"read_at\":null,\"table\":\"jobs.leases\"}\n"
        );
        // Expired at the very read, or less than a millisecond before: negative all the same.
        let mut just = info("sweep", 0);
        let lease_of = |info: &LeaseInfo| lease(info)["expires_in_ms"].as_i64().unwrap();
        assert_eq!(lease_of(&just), -1);
        just.expires_at -= Duration::from_micros(300);
        assert_eq!(lease_of(&just), -1);
        just.expires_at += Duration::from_micros(1_300);
        assert_eq!(lease_of(&just), 1);
        let shown: Value = serde_json::from_str(&show(&info("sweep", 30), "leases")).unwrap();
        assert_eq!(shown["lease"]["name"], "sweep");
        assert_eq!(shown["read_at"], "2027-01-15T08:00:00.000Z");
    }
}
