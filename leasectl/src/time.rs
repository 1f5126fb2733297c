//! Times as an operator reads them: UTC RFC 3339 with milliseconds, and "expires in".

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `time` as UTC RFC 3339, to the millisecond: `2026-11-30T12:19:23.123Z`.
pub(crate) fn rfc3339(time: SystemTime) -> String {
    let (sign, since) = match time.duration_since(UNIX_EPOCH) {
        Ok(since) => (1i64, since),
        Err(before) => (-1, before.duration()),
    };
    // Whole milliseconds since the epoch, rounded down also before it.
    let mut millis = sign * since.as_millis() as i64;
    if sign < 0 && since.as_nanos() % 1_000_000 != 0 {
        millis -= 1;
    }
    let secs = millis.div_euclid(1000);
    let (days, of_day) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60,
        millis.rem_euclid(1000)
    )
}

/// The proleptic Gregorian date of a day counted from 1970-01-01 (Howard Hinnant's
/// `civil_from_days`): years of 400 years, each of 146,097 days, starting in March so the leap
/// day falls at the end.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// A duration as `1h 02m 03s`, `2m 05s` or `4.2s`.
pub(crate) fn span(duration: Duration) -> String {
    let secs = duration.as_secs();
    if secs >= 3600 {
        format!("{}h {:02}m {:02}s", secs / 3600, secs / 60 % 60, secs % 60)
    } else if secs >= 60 {
        format!("{}m {:02}s", secs / 60, secs % 60)
    } else {
        format!("{:.1}s", duration.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64, millis: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(millis)
    }

    #[test]
    fn formats_utc_dates_across_leap_years_and_centuries() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(at(951_782_400, 5)), "2000-02-29T00:00:00.005Z");
        assert_eq!(rfc3339(at(1_709_251_199, 999)), "2024-02-29T23:59:59.999Z");
        assert_eq!(rfc3339(at(4_107_542_400, 0)), "2100-03-01T00:00:00.000Z");
        assert_eq!(rfc3339(at(1_798_761_599, 0)), "2026-12-31T23:59:59.000Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH - Duration::from_millis(1)),
            "1969-12-31T23:59:59.999Z"
        );
    }

    /// An adopted PostgreSQL table's `'infinity'` and `'-infinity'` read as the latest and
    /// earliest times the store's microseconds hold: shown as dates, not a failure.
    #[test]
    fn formats_the_times_infinity_reads_as() {
        let latest = UNIX_EPOCH + Duration::from_micros(i64::MAX.unsigned_abs());
        let earliest = UNIX_EPOCH - Duration::from_micros(i64::MIN.unsigned_abs());
        assert_eq!(rfc3339(latest), "294247-01-10T04:00:54.775Z");
        assert_eq!(rfc3339(earliest), "-290308-12-21T19:59:05.224Z");
    }

    #[test]
    fn every_day_of_four_centuries_follows_the_one_before() {
        let mut previous = civil_from_days(-1);
        for days in 0..146_097 {
            let (y, m, d) = civil_from_days(days);
            let (py, pm, pd) = previous;
            let next_day = (y, m) == (py, pm) && d == pd + 1;
            let next_month = y == py && m == pm + 1 && d == 1 && pd == days_in(py, pm);
            let next_year = y == py + 1 && m == 1 && d == 1 && pm == 12 && pd == 31;
            assert!(
                next_day || next_month || next_year,
                "{previous:?} -> {:?}",
                (y, m, d)
            );
            previous = (y, m, d);
        }
    }

    fn days_in(year: i64, month: u32) -> u32 {
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
        match month {
            2 if leap => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        }
    }

    #[test]
    fn spans_read_naturally() {
        assert_eq!(span(Duration::from_millis(4_240)), "4.2s");
        assert_eq!(span(Duration::from_secs(125)), "2m 05s");
        assert_eq!(span(Duration::from_secs(3_723)), "1h 02m 03s");
    }
}
