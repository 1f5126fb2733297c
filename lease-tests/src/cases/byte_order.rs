//! Names are bytes: compared byte for byte and listed in byte order.

use std::collections::HashSet;

use lease_core::{HolderId, LeaseName, LeaseStore};

use super::{long_ttl, name};
use crate::failure::{ensure, ensure_eq};
use crate::{CaseFailure, CaseResult, Context, TestBackend, Verdict};

/// Names a collation would fold, pad or reorder, and names a statement could mistake for SQL.
fn texts() -> Vec<String> {
    let mut texts: Vec<String> = [
        "a",
        "A",
        "a ",
        "A ",
        "é",
        "e\u{301}",
        "Z",
        "z",
        "_",
        "sweep",
        "Sweep",
        "sweep ",
        "swéep",
        "swe\u{301}ep",
        "it's \"quoted\" \\ `back`",
        "'; DROP TABLE leases; --",
        "'); DROP TABLE leases; --",
        "🔒 $1 ?1 ? %s",
        "$1 ?2 ? :name",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    // 255 bytes of two-byte and of four-byte characters.
    texts.push("é".repeat(127) + "x");
    texts.push("🦀".repeat(63) + "abc");
    texts
}

/// Names that differ only in case, trailing spaces, accents or Unicode normalization are
/// different leases (no case folding, no trailing-space padding, which a MariaDB collation
/// would do); each comes back from `inspect` verbatim; and `list` orders them by their bytes,
/// as the memory store does, not by a collation's order.
///
/// # Errors
/// A [`CaseFailure`] when names that differ only in case, padding, accents or normalization are
/// merged, one comes back other than verbatim, or `list` is not in byte order, and, [as any
/// case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, the names it took stay
/// held until their TTL of a minute runs out.
pub async fn names_are_byte_exact_and_listed_in_byte_order<B: TestBackend>(
    ctx: &Context<B>,
) -> CaseResult {
    let store = ctx.store().await?;
    let texts = texts();
    for text in &texts {
        ensure!(
            text.len() <= LeaseName::MAX_LEN,
            "the test name {text:?} is too long"
        );
        let lease = name(text);
        let holder = HolderId::generate();
        let fence = store.try_acquire(&lease, &holder, long_ttl()).await?;
        ensure!(
            fence.is_some(),
            "{text:?} was refused while only other names were held: another name took it"
        );
        let info = store.inspect(&lease).await?;
        ensure_eq!(
            info.map(|info| (info.name.as_str().to_owned(), info.holder)),
            Some((text.clone(), holder)),
            "inspect({text:?})"
        );
    }
    let listed: Vec<String> = store
        .list()
        .await?
        .into_iter()
        .map(|info| info.name.as_str().to_owned())
        .collect();
    let distinct: HashSet<&String> = listed.iter().collect();
    ensure!(
        distinct.len() == texts.len(),
        "names collapsed in list(): {} distinct of {}: {listed:?}",
        distinct.len(),
        texts.len()
    );
    let mut expected = texts;
    expected.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    if listed != expected {
        return Err(CaseFailure::new(format!(
            "list() is not every name in byte order: listed {listed:?}, expected {expected:?}"
        )));
    }
    Ok(Verdict::Passed)
}
