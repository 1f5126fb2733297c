//! Unusual names round-trip verbatim.

use std::collections::BTreeSet;
use std::time::Duration;

use lease_core::{HolderId, LeaseName, LeaseStore};

use super::long_ttl;
use crate::failure::{ensure, ensure_eq};
use crate::{CaseResult, Context, TestBackend, Verdict};

/// Names the store must keep apart and give back exactly as they came.
fn awkward_names() -> Vec<String> {
    let mut names: Vec<String> = [
        "it's",
        "\"quoted\"",
        "'; DROP TABLE leases; --",
        "\" OR 1=1 --",
        "Robert'); DELETE FROM leases WHERE ('1'='1",
        "back\\slash\\",
        "%_like wildcards_%",
        "$1 ? :name @p1",
        "tab\tnew\nline\r",
        "🔒 lease 🦀",
        "uptime:ノード-a",
        // Collations that ignore case, trailing spaces or accents would merge these.
        "sweep",
        "Sweep",
        "SWEEP",
        "sweep ",
        " sweep",
        "café",
        "cafe\u{301}",
        "cafe",
    ]
    .iter()
    .map(|name| (*name).to_owned())
    .collect();
    // The longest names: 255 bytes of ASCII, of two-byte and of four-byte characters.
    names.push("n".repeat(LeaseName::MAX_LEN));
    names.push("é".repeat(127) + "x");
    names.push("🔒".repeat(63) + "abc");
    names
}

/// Names made of quotes, SQL, backslashes, control characters, emoji, names that differ only in
/// case, spaces or accents, and 255-byte names are each a lease of their own: each can be taken
/// while the others are held, and `inspect`, `list`, one `renew_many` of them all and `release`
/// find them verbatim.
///
/// # Errors
/// A [`CaseFailure`](crate::CaseFailure) when a name is refused while only other names are held, or
/// `inspect`, `list`, `renew_many` or `release` does not find every name verbatim, and, [as any
/// case](crate::cases#errors), when a call it needs fails.
///
/// # Cancel safety
/// Not cancel safe, [as every case](crate::cases#cancel-safety): dropped, the names it took stay
/// held until their TTL of a minute runs out, unless it had released them.
pub async fn names_round_trip_verbatim<B: TestBackend>(ctx: &Context<B>) -> CaseResult {
    let store = ctx.store().await?;
    let mut taken = Vec::new();
    for text in awkward_names() {
        let name = LeaseName::new(&text)?;
        ensure!(
            name.as_str().len() <= LeaseName::MAX_LEN,
            "the test name {text:?} is too long"
        );
        let holder = HolderId::generate();
        let fence = store.try_acquire(&name, &holder, long_ttl()).await?;
        ensure!(
            fence.is_some(),
            "{text:?} was refused while only other names were held: the store merged it with \
             one of {:?}",
            taken
                .iter()
                .map(|(name, _): &(LeaseName, HolderId)| name.as_str())
                .collect::<Vec<_>>()
        );
        taken.push((name, holder));
    }
    for (name, holder) in &taken {
        let info = store.inspect(name).await?;
        ensure_eq!(
            info.map(|info| (info.name.as_str().to_owned(), info.holder)),
            Some((name.as_str().to_owned(), holder.clone())),
            "inspect({:?})",
            name.as_str()
        );
    }
    let listed: BTreeSet<String> = store
        .list()
        .await?
        .into_iter()
        .map(|info| info.name.as_str().to_owned())
        .collect();
    let expected: BTreeSet<String> = taken
        .iter()
        .map(|(name, _)| name.as_str().to_owned())
        .collect();
    ensure_eq!(listed, expected, "names reported by list()");
    // Renewed together, in one statement of the SQL stores, each name finds its own row: two
    // given back first answer `false` in their places, every other `true`.
    let given_back = [1, 4];
    for &at in &given_back {
        let (name, holder) = &taken[at];
        ensure!(
            store.release(name, holder, Duration::ZERO).await?,
            "releasing {:?} failed",
            name.as_str()
        );
    }
    let expected: Vec<bool> = (0..taken.len())
        .map(|at| !given_back.contains(&at))
        .collect();
    ensure_eq!(
        store.renew_many(&taken, long_ttl()).await?,
        expected,
        "renew_many of every name in one batch, two of them released"
    );
    for (at, (name, holder)) in taken.iter().enumerate() {
        if given_back.contains(&at) {
            continue;
        }
        ensure!(
            store.release(name, holder, Duration::ZERO).await?,
            "releasing {:?} failed",
            name.as_str()
        );
    }
    ensure_eq!(
        store.list().await?,
        Vec::new(),
        "list() after releasing every name"
    );
    Ok(Verdict::Passed)
}
