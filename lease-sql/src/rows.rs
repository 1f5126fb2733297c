//! Turning what the statements return into lease-core's types, the same way for every driver.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use lease_core::{BoxError, Fence, HolderId, LeaseInfo, LeaseName, Ttl};

pub use lease_core::MAX_MIN_HOLD;

/// A TTL as the statements bind it: microseconds.
pub fn ttl_micros(ttl: Ttl) -> i64 {
    // Ttl::MAX is 365 days: far inside i64 microseconds.
    i64::try_from(ttl.as_millis() * 1000).unwrap_or(i64::MAX)
}

/// A minimum hold as the statements bind it: microseconds, at most [`MAX_MIN_HOLD`].
pub fn min_hold_micros(min_hold: Duration) -> i64 {
    // MAX_MIN_HOLD is about 3.2e16 microseconds, so the cast cannot overflow.
    min_hold.min(MAX_MIN_HOLD).as_micros() as i64
}

/// A time the statements return, in microseconds since the Unix epoch. Every `i64` is one on
/// Unix; where the platform's times end sooner (Windows: the year 30828), a time past them
/// reads as 9999-12-31T23:59:59Z, or 1601-01-01, rather than panic (an adopted table's
/// `'infinity'` reads as `i64::MAX`).
pub fn time_from_micros(micros: i64) -> SystemTime {
    let offset = Duration::from_micros(micros.unsigned_abs());
    if micros >= 0 {
        SystemTime::UNIX_EPOCH
            .checked_add(offset)
            .unwrap_or(SystemTime::UNIX_EPOCH + Duration::from_secs(253_402_300_799))
    } else {
        SystemTime::UNIX_EPOCH
            .checked_sub(offset)
            .unwrap_or(SystemTime::UNIX_EPOCH - Duration::from_secs(11_644_473_600))
    }
}

/// The fence a try-acquire row carries, when that row says the lease was taken.
///
/// Every dialect's try-acquire returns zero or one row of `(fence, won)`.
///
/// # Errors
/// When the fence is negative, which no statement of this crate ever writes.
pub fn acquired(row: Option<(i64, i64)>) -> Result<Option<Fence>, BoxError> {
    match row {
        Some((fence, won)) if won != 0 => Ok(Some(fence_from(fence)?)),
        _ => Ok(None),
    }
}

fn fence_from(fence: i64) -> Result<Fence, BoxError> {
    u64::try_from(fence)
        .map(Fence::new)
        .map_err(|_| format!("the lease table holds a negative fence ({fence})").into())
}

/// One row of inspect or list: `(name, holder, fence, taken_at, expires_at, observed_at)`, the
/// times in microseconds since the Unix epoch on the database's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRow {
    /// The lease name.
    pub name: String,
    /// The holder id.
    pub holder: String,
    /// The fence of the latest acquisition.
    pub fence: i64,
    /// When the lease was taken.
    pub taken_at: i64,
    /// When it expires.
    pub expires_at: i64,
    /// The database's time when the row was read.
    pub observed_at: i64,
}

impl LeaseRow {
    /// The row as [`LeaseInfo`].
    ///
    /// # Errors
    /// When the table holds what this crate never writes: an invalid name or a negative fence.
    /// The error names the row, so that an operator whose `list` fails on it knows which one
    /// to look at.
    pub fn into_info(self) -> Result<LeaseInfo, BoxError> {
        let fence = fence_from(self.fence)
            .map_err(|error| format!("{error}, in the row named {:?}", self.name))?;
        Ok(LeaseInfo::new(
            LeaseName::new(&self.name)?,
            HolderId::from_stored(self.holder),
            fence,
            time_from_micros(self.taken_at),
            time_from_micros(self.expires_at),
            time_from_micros(self.observed_at),
        ))
    }
}

impl From<(String, String, i64, i64, i64, i64)> for LeaseRow {
    fn from(
        (name, holder, fence, taken_at, expires_at, observed_at): (
            String,
            String,
            i64,
            i64,
            i64,
            i64,
        ),
    ) -> Self {
        Self {
            name,
            holder,
            fence,
            taken_at,
            expires_at,
            observed_at,
        }
    }
}

/// The leases of a renew-many call with repeats removed: renewing a pair twice in one call answers
/// the same for both, so each is sent once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistinctPairs<'a> {
    /// The distinct `(name, holder)` pairs, in first-seen order: what the statements carry.
    pub pairs: Vec<(&'a str, &'a str)>,
    /// For each lease of the call, in order, the index of its pair in
    /// [`pairs`](DistinctPairs::pairs).
    pub slots: Vec<usize>,
}

/// The distinct pairs of `leases`, borrowed from them (see [`DistinctPairs`]).
pub fn distinct_pairs(leases: &[(LeaseName, HolderId)]) -> DistinctPairs<'_> {
    let mut index: HashMap<(&str, &str), usize> = HashMap::with_capacity(leases.len());
    let mut pairs = Vec::with_capacity(leases.len());
    let slots = leases
        .iter()
        .map(|(name, holder)| {
            let pair = (name.as_str(), holder.as_str());
            *index.entry(pair).or_insert_with(|| {
                pairs.push(pair);
                pairs.len() - 1
            })
        })
        .collect();
    DistinctPairs { pairs, slots }
}

/// Where in `batch` each renewed `(name, holder)` row stands: for SQLite's renew-many
/// ([`RenewManyResult::Pairs`](crate::RenewManyResult::Pairs)), whose rows cannot carry a
/// position. The batch's pairs are distinct, so each row has one place; a row that is not in the
/// batch (no statement of this crate returns one) is left out.
pub fn positions_in_batch(batch: &[(&str, &str)], renewed: &[(String, String)]) -> Vec<usize> {
    let index: HashMap<(&str, &str), usize> = batch
        .iter()
        .enumerate()
        .map(|(position, &pair)| (pair, position))
        .collect();
    renewed
        .iter()
        .filter_map(|(name, holder)| index.get(&(name.as_str(), holder.as_str())).copied())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(name: &str, holder: &str) -> (LeaseName, HolderId) {
        (LeaseName::new(name).unwrap(), HolderId::from_stored(holder))
    }

    #[test]
    fn durations_bind_as_microseconds_and_long_holds_are_capped() {
        assert_eq!(ttl_micros(Ttl::from_millis(1500).unwrap()), 1_500_000);
        assert_eq!(ttl_micros(Ttl::MAX), 365 * 24 * 3600 * 1_000_000);
        assert_eq!(min_hold_micros(Duration::from_micros(7)), 7);
        assert_eq!(
            min_hold_micros(Duration::MAX),
            min_hold_micros(MAX_MIN_HOLD)
        );
    }

    #[test]
    fn times_come_back_from_microseconds_either_side_of_the_epoch() {
        assert_eq!(
            time_from_micros(1_700_000_000_123_456),
            SystemTime::UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_000)
        );
        assert_eq!(
            time_from_micros(-1),
            SystemTime::UNIX_EPOCH - Duration::from_micros(1)
        );
        // The bounds an adopted table's 'infinity' reads as: a time, never a panic, and the
        // latest after every other.
        let (latest, earliest) = (time_from_micros(i64::MAX), time_from_micros(i64::MIN));
        assert!(
            latest > time_from_micros(1_700_000_000_123_456),
            "{latest:?}"
        );
        assert!(earliest < time_from_micros(-1), "{earliest:?}");
    }

    #[test]
    fn only_a_won_row_is_an_acquisition() {
        assert_eq!(acquired(None).unwrap(), None);
        assert_eq!(acquired(Some((4, 0))).unwrap(), None);
        assert_eq!(acquired(Some((4, 1))).unwrap(), Some(Fence::new(4)));
        assert!(acquired(Some((-1, 1))).is_err());
    }

    #[test]
    fn rows_become_lease_info_and_bad_rows_are_errors() {
        let row = LeaseRow::from(("sweep".to_owned(), "h".to_owned(), 3, 1_000, 2_000, 1_500));
        let info = row.clone().into_info().unwrap();
        assert_eq!(info.name.as_str(), "sweep");
        assert_eq!(info.fence, Fence::new(3));
        assert!(!info.is_expired());
        assert_eq!(info.expires_in(), Duration::from_micros(500));
        assert!(
            LeaseRow {
                name: String::new(),
                ..row.clone()
            }
            .into_info()
            .is_err()
        );
        let negative = LeaseRow { fence: -2, ..row }.into_info().unwrap_err();
        assert_eq!(
            negative.to_string(),
            "the lease table holds a negative fence (-2), in the row named \"sweep\""
        );
    }

    #[test]
    fn repeats_are_sent_once_and_rows_find_their_place_in_the_batch() {
        let leases = [
            pair("a", "1"),
            pair("b", "2"),
            pair("a", "1"),
            pair("a", "9"),
        ];
        let distinct = distinct_pairs(&leases);
        assert_eq!(distinct.pairs, vec![("a", "1"), ("b", "2"), ("a", "9")]);
        assert_eq!(distinct.slots, vec![0, 1, 0, 2]);
        let renewed = [
            ("a".to_owned(), "9".to_owned()),
            ("a".to_owned(), "1".to_owned()),
            ("z".to_owned(), "1".to_owned()),
        ];
        assert_eq!(positions_in_batch(&distinct.pairs, &renewed), vec![2, 0]);
    }
}
