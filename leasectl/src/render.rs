//! What the tool prints: a table of leases, or one lease, every time the database's own.

use std::fmt::Write as _;

use lease_core::{LeaseInfo, StoreErrorKind};

use crate::time::{rfc3339, span};

/// When the lease expires, from the moment it was read: `1m 52s`, or `expired 3.2s ago`.
pub(crate) fn expires_in(info: &LeaseInfo) -> String {
    match info.observed_at.duration_since(info.expires_at) {
        Ok(ago) if info.is_expired() => format!("expired {} ago", span(ago)),
        _ => span(info.expires_in()),
    }
}

/// `text` (a lease's name or holder, which may hold any character but NUL) with its control
/// characters escaped (`\n`, `\u{1b}`), so that a name cannot break a row in two or move the
/// terminal's cursor, and the characters that print nothing or reorder the text around them
/// ([`is_invisible`]) escaped as well, so that two names that differ only by one never look
/// the same, and none turns the columns of its row around; every other character as it is.
pub(crate) fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() || is_invisible(c) {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Whether `c` prints nothing or reorders the text around it: Unicode's format characters
/// that do (bidirectional marks, embeddings, overrides and isolates; zero-width spaces and
/// joiners; the soft hyphen; invisible operators; the byte order mark; tags) and its line and
/// paragraph separators, which a terminal may break a row at.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{061C}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206F}'
            | '\u{FEFF}'
            | '\u{FFF9}'..='\u{FFFB}'
            | '\u{E0000}'..='\u{E007F}'
    )
}

/// Every lease as a table, with the database time it was read at.
pub(crate) fn list(leases: &[LeaseInfo], table: &str) -> String {
    let Some(first) = leases.first() else {
        return format!("no leases in table {table}\n");
    };
    let header = [
        "NAME",
        "HOLDER",
        "FENCE",
        "TAKEN AT",
        "EXPIRES AT",
        "EXPIRES IN",
    ];
    let rows: Vec<[String; 6]> = leases
        .iter()
        .map(|info| {
            [
                printable(info.name.as_str()),
                printable(info.holder.as_str()),
                info.fence.to_string(),
                rfc3339(info.taken_at),
                rfc3339(info.expires_at),
                expires_in(info),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: [&str; 6]| {
        let mut text = String::new();
        for (i, (cell, width)) in cells.iter().zip(widths).enumerate() {
            // The fence is a number: aligned right; the last column needs no padding.
            match i {
                2 => write!(text, "{cell:>width$}  "),
                5 => write!(text, "{cell}"),
                _ => write!(text, "{cell:<width$}  "),
            }
            .expect("writing to a String cannot fail");
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(header);
    for row in &rows {
        line(row.each_ref().map(String::as_str));
    }
    let _ = writeln!(
        out,
        "{} lease{} in table {table}, read at {} (database time)",
        leases.len(),
        if leases.len() == 1 { "" } else { "s" },
        rfc3339(first.observed_at)
    );
    out
}

/// Why a lease the table still names reads expired. The row does not tell these apart: a
/// release with a minimum hold keeps the holder until the hold's end, as a renewed lease keeps
/// it until its expiry.
pub(crate) const WHY_EXPIRED: &str =
    "its holder stopped renewing it, or released it with a minimum hold that has ended";

/// One lease, a field a line.
pub(crate) fn show(info: &LeaseInfo) -> String {
    let mut out = String::new();
    for (field, value) in [
        ("name", printable(info.name.as_str())),
        ("holder", printable(info.holder.as_str())),
        ("fence", info.fence.to_string()),
        ("taken at", rfc3339(info.taken_at)),
        ("expires at", rfc3339(info.expires_at)),
        ("expires in", expires_in(info)),
        (
            "read at",
            format!("{} (database time)", rfc3339(info.observed_at)),
        ),
    ] {
        let _ = writeln!(out, "{:<12}{value}", format!("{field}:"));
    }
    if info.is_expired() {
        let _ = writeln!(out, "expired: {WHY_EXPIRED}; any instance may take it over");
    }
    out
}

/// What a failed release says: "not released" only where nothing can have changed. A failure
/// that may come after the statement reached the database (a connection lost or ended with it
/// in flight, a timeout: transient, or an answer known lost) says the release may or may not
/// have taken effect, as no answer at all does; a refusal (permissions, a read-only server, a
/// conflict that rolled it back) says it was not released. The cause, the store's error, names
/// the lease: it is named once.
pub(crate) fn release_failed(kind: Option<StoreErrorKind>, cause: &str) -> String {
    match kind {
        Some(StoreErrorKind::Transient | StoreErrorKind::OutcomeUnknown) => {
            format!("the release may or may not have taken effect: {cause}; see `leasectl show`")
        }
        _ => format!("not released: {cause}"),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use lease_core::{Fence, HolderId, LeaseName};

    use super::*;

    fn info(name: &str, fence: u64, expires_in_secs: i64) -> LeaseInfo {
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let expires = if expires_in_secs >= 0 {
            now + Duration::from_secs(expires_in_secs as u64)
        } else {
            now - Duration::from_secs(expires_in_secs.unsigned_abs())
        };
        LeaseInfo::new(
            LeaseName::new(name).unwrap(),
            HolderId::from_stored("host-1:42:00000000000000ff"),
            Fence::new(fence),
            now - Duration::from_secs(8),
            expires,
            now,
        )
    }

    #[test]
    fn lists_leases_in_columns_with_database_times() {
        let out = list(&[info("alerts", 12, 112), info("sweep", 3, -5)], "leases");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "NAME    HOLDER                      FENCE  TAKEN AT                  EXPIRES AT                EXPIRES IN"
        );
        assert_eq!(
            lines[1],
            "alerts  host-1:42:00000000000000ff     12  2027-01-15T07:59:52.000Z  2027-01-15T08:01:52.000Z  1m 52s"
        );
        assert!(lines[2].starts_with("sweep "), "{out}");
        assert!(lines[2].ends_with("expired 5.0s ago"), "{out}");
        assert_eq!(
            lines[3],
            "2 leases in table leases, read at 2027-01-15T08:00:00.000Z (database time)"
        );
        assert_eq!(list(&[], "jobs.leases"), "no leases in table jobs.leases\n");
    }

    #[test]
    fn control_characters_in_a_name_are_escaped() {
        let lease = info("a\nfake-row\u{1b}[2J", 1, 60);
        let listed = list(std::slice::from_ref(&lease), "leases");
        assert_eq!(listed.lines().count(), 3, "{listed}");
        assert!(listed.contains("a\\nfake-row\\u{1b}[2J"), "{listed}");
        let shown = show(&lease);
        assert!(!shown.contains('\u{1b}'), "{shown}");
        assert!(
            shown.contains("name:       a\\nfake-row\\u{1b}[2J\n"),
            "{shown}"
        );
    }

    /// A right-to-left override would print the rest of the row backwards (the holder and
    /// fence seemingly swapped); a zero-width space would make `sweep` and `swe\u{200b}ep` two
    /// rows of the same look; a line separator may break the row. Each is escaped; letters of
    /// any script, and emoji, are not.
    #[test]
    fn characters_that_print_nothing_or_reorder_the_row_are_escaped() {
        let lease = info("a\u{202e}b\u{200b}c\u{2028}d\u{feff}", 1, 60);
        let listed = list(std::slice::from_ref(&lease), "leases");
        assert!(
            listed.contains("a\\u{202e}b\\u{200b}c\\u{2028}d\\u{feff} "),
            "{listed}"
        );
        for invisible in ['\u{202e}', '\u{200b}', '\u{2028}', '\u{feff}'] {
            assert!(!listed.contains(invisible), "{listed:?}");
            assert!(!show(&lease).contains(invisible));
        }
        assert_eq!(printable("Zürich-日本-🦀"), "Zürich-日本-🦀");
    }

    #[test]
    fn shows_one_lease_a_field_a_line() {
        let out = show(&info("uptime:node-a", 7, 30));
        assert!(out.contains("name:       uptime:node-a\n"), "{out}");
        assert!(out.contains("fence:      7\n"), "{out}");
        assert!(out.contains("expires in: 30.0s\n"), "{out}");
        assert!(!out.contains("expired"), "{out}");
        // An expired row may be a schedule's round kept for its minimum hold: not called a
        // crash.
        let expired = show(&info("sweep", 1, -1));
        assert!(
            expired.contains("any instance may take it over"),
            "{expired}"
        );
        assert!(
            expired.contains("or released it with a minimum hold"),
            "{expired}"
        );
    }

    #[test]
    fn a_release_that_may_have_reached_the_database_is_not_called_failed() {
        let name = lease_core::LeaseName::new("sweep").unwrap();
        for kind in [StoreErrorKind::Transient, StoreErrorKind::OutcomeUnknown] {
            // The cause as the tool prints it: the store's error, which names the lease.
            let error = lease_core::Error::store_of_kind(
                lease_core::Operation::Release,
                Some(&name),
                kind,
                "connection reset by peer",
            );
            let said = release_failed(Some(kind), &lease_core::ErrorChain(&error).to_string());
            assert!(!said.starts_with("not released"), "{kind:?}: {said}");
            assert!(said.contains("may or may not"), "{kind:?}: {said}");
            assert_eq!(
                said.matches("connection reset by peer").count(),
                1,
                "{said}"
            );
            assert_eq!(said.matches("sweep").count(), 1, "{said}");
        }
        for kind in [
            Some(StoreErrorKind::Permanent),
            Some(StoreErrorKind::ReadOnly),
            Some(StoreErrorKind::Conflict),
            None,
        ] {
            let said = release_failed(kind, "permission denied for table leases");
            assert_eq!(
                said, "not released: permission denied for table leases",
                "{kind:?}"
            );
        }
    }
}
