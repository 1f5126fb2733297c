//! The chart: cycles per second against concurrent tasks, one panel per backend, the library
//! beside the bare statements. Plain SVG written by hand, so the program needs no plotting
//! library.

use std::fmt::Write as _;

use crate::report::ChartPoint;

const PANEL_WIDTH: f64 = 300.0;
const PANEL_HEIGHT: f64 = 210.0;
const COLUMNS: usize = 3;
const MARGIN: f64 = 48.0;
const LIBRARY: &str = "#1f77b4";
const BARE: &str = "#ff7f0e";

/// The chart of `points` as an SVG document.
pub fn svg(points: &[ChartPoint]) -> String {
    let mut backends: Vec<&str> = Vec::new();
    for point in points {
        if !backends.contains(&point.backend.as_str()) {
            backends.push(&point.backend);
        }
    }
    let rows = backends.len().div_ceil(COLUMNS).max(1);
    let width = PANEL_WIDTH * COLUMNS as f64;
    let height = PANEL_HEIGHT * rows as f64 + 40.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="10" y="18" font-size="13">Acquire and release cycles per second against concurrent tasks (pool check off)</text>"#
    );
    let _ = writeln!(
        out,
        r#"<line x1="10" y1="30" x2="30" y2="30" stroke="{LIBRARY}" stroke-width="2"/><text x="34" y="34">library</text><line x1="90" y1="30" x2="110" y2="30" stroke="{BARE}" stroke-width="2" stroke-dasharray="5,3"/><text x="114" y="34">bare statements (prepared where the driver can), same pool</text>"#
    );
    for (i, backend) in backends.iter().enumerate() {
        let x0 = PANEL_WIDTH * (i % COLUMNS) as f64;
        let y0 = 40.0 + PANEL_HEIGHT * (i / COLUMNS) as f64;
        let mut series: Vec<&ChartPoint> =
            points.iter().filter(|p| p.backend == *backend).collect();
        series.sort_by_key(|p| p.tasks);
        panel(&mut out, backend, &series, x0, y0);
    }
    out.push_str("</svg>\n");
    out
}

fn panel(out: &mut String, backend: &str, series: &[&ChartPoint], x0: f64, y0: f64) {
    let (left, right) = (x0 + MARGIN, x0 + PANEL_WIDTH - 12.0);
    let (top, bottom) = (y0 + 22.0, y0 + PANEL_HEIGHT - 30.0);
    let top_rate = series
        .iter()
        .flat_map(|p| [p.library, p.bare])
        .fold(0.0_f64, f64::max)
        .max(1.0);
    let scale_top = nice_ceiling(top_rate);
    // Tasks are 1, 4, 16: evenly spaced on a log scale.
    let max_tasks = series.iter().map(|p| p.tasks).max().unwrap_or(1).max(2) as f64;
    let x = |tasks: usize| left + (right - left) * (tasks as f64).ln() / max_tasks.ln();
    let y = |rate: f64| bottom - (bottom - top) * rate / scale_top;
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" font-size="12" font-weight="bold">{backend}</text>"#,
        x0 + MARGIN,
        y0 + 14.0
    );
    let _ = writeln!(
        out,
        r##"<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#444"/><line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#444"/>"##
    );
    for step in 0..=4 {
        let rate = scale_top * f64::from(step) / 4.0;
        let yy = y(rate);
        let _ = writeln!(
            out,
            r##"<line x1="{left}" y1="{yy:.1}" x2="{right}" y2="{yy:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            left - 4.0,
            yy + 4.0,
            short(rate)
        );
    }
    for point in series {
        let xx = x(point.tasks);
        let _ = writeln!(
            out,
            r#"<text x="{xx:.1}" y="{}" text-anchor="middle">{}</text>"#,
            bottom + 14.0,
            point.tasks
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">tasks</text>"#,
        (left + right) / 2.0,
        bottom + 27.0
    );
    for (color, dash, value) in [
        (
            LIBRARY,
            "",
            (|p: &ChartPoint| p.library) as fn(&ChartPoint) -> f64,
        ),
        (BARE, r#" stroke-dasharray="5,3""#, |p: &ChartPoint| p.bare),
    ] {
        let path: Vec<String> = series
            .iter()
            .map(|p| format!("{:.1},{:.1}", x(p.tasks), y(value(p))))
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{}"/>"#,
            path.join(" ")
        );
        for p in series {
            let _ = writeln!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{color}"/>"#,
                x(p.tasks),
                y(value(p))
            );
        }
    }
}

/// The smallest 1, 2 or 5 times a power of ten at or above `value`.
fn nice_ceiling(value: f64) -> f64 {
    let power = 10_f64.powf(value.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|v| *v >= value)
        .unwrap_or(10.0 * power)
}

/// A rate in few characters: 950, 12k, 1.5M.
fn short(rate: f64) -> String {
    if rate >= 1e6 {
        format!("{:.1}M", rate / 1e6)
    } else if rate >= 1e3 {
        format!("{:.0}k", rate / 1e3)
    } else {
        format!("{rate:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_panel_per_backend_with_both_lines() {
        let point = |backend: &str, tasks, library, bare| ChartPoint {
            backend: backend.to_owned(),
            tasks,
            library,
            bare,
        };
        let svg = svg(&[
            point("memory", 1, 1e6, 1.1e6),
            point("memory", 16, 2e6, 2.1e6),
            point("sqlx-postgres", 1, 1000.0, 1100.0),
            point("sqlx-postgres", 16, 3000.0, 3100.0),
        ]);
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 4);
        assert!(svg.contains(">sqlx-postgres<"));
    }

    #[test]
    fn scales_round_up() {
        assert_eq!(nice_ceiling(3100.0), 5000.0);
        assert_eq!(nice_ceiling(1000.0), 1000.0);
        assert_eq!(short(1_500_000.0), "1.5M");
    }
}
