//! Medians, percentiles and rates: the arithmetic behind every figure.

use std::time::Duration;

/// The median of `values` (the mean of the middle two for an even count), or `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    Some(if sorted.len().is_multiple_of(2) {
        (sorted[middle - 1] + sorted[middle]) / 2.0
    } else {
        sorted[middle]
    })
}

/// The `p`-th percentile (0 to 100) of `samples` by the nearest-rank method, or `None` when
/// empty. Sorts `samples`.
pub fn percentile(samples: &mut [Duration], p: f64) -> Option<Duration> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_unstable();
    let rank = ((p / 100.0) * samples.len() as f64).ceil() as usize;
    Some(samples[rank.clamp(1, samples.len()) - 1])
}

/// A duration in milliseconds with sensible precision (microseconds below one).
pub fn ms(duration: Duration) -> String {
    let ms = duration.as_secs_f64() * 1000.0;
    if ms < 1.0 {
        let us = ms * 1000.0;
        if us >= 100.0 {
            format!("{us:.0} µs")
        } else {
            format!("{us:.1} µs")
        }
    } else if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else if ms >= 10.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.2} ms")
    }
}

/// A rate or count with thousands separated by commas, rounded to a whole number.
pub fn whole(value: f64) -> String {
    let rounded = value.round() as i64;
    let digits = rounded.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    if rounded < 0 {
        out.insert(0, '-');
    }
    out
}

/// A ratio with two decimals.
pub fn ratio(value: f64) -> String {
    format!("{value:.2}")
}

/// `value / baseline` as [`ratio`] writes it, or `-` when the baseline is not a positive
/// number (nothing finished while it was measured), where the division would give infinity or
/// NaN.
pub fn ratio_to(value: f64, baseline: f64) -> String {
    if baseline > 0.0 && baseline.is_finite() && value.is_finite() {
        ratio(value / baseline)
    } else {
        "-".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn nearest_rank_percentiles() {
        let mut samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(
            percentile(&mut samples, 50.0),
            Some(Duration::from_millis(50))
        );
        assert_eq!(
            percentile(&mut samples, 99.0),
            Some(Duration::from_millis(99))
        );
        assert_eq!(
            percentile(&mut samples, 100.0),
            Some(Duration::from_millis(100))
        );
        assert_eq!(percentile(&mut [], 50.0), None);
    }

    #[test]
    fn formats() {
        assert_eq!(whole(1_234_567.4), "1,234,567");
        assert_eq!(whole(999.0), "999");
        assert_eq!(ms(Duration::from_micros(1500)), "1.50 ms");
        assert_eq!(ms(Duration::from_micros(250)), "250 µs");
        assert_eq!(ms(Duration::from_nanos(1234)), "1.2 µs");
        assert_eq!(ratio(0.912), "0.91");
        assert_eq!(ratio_to(912.0, 1000.0), "0.91");
        assert_eq!(ratio_to(0.0, 1000.0), "0.00");
        assert_eq!(ratio_to(912.0, 0.0), "-");
        assert_eq!(ratio_to(0.0, 0.0), "-");
        assert_eq!(ratio_to(f64::NAN, 1000.0), "-");
    }
}
