//! Inline SVG line charts for the HTML page: a metric against the load
//! (concurrency or request rate; log2 axis, since levels double), one line
//! per variant or report, or against a linear axis (time, prompt tokens).

use std::fmt::Write as _;

const W: f64 = 460.0;
const H: f64 = 260.0;
const LEFT: f64 = 58.0;
const RIGHT: f64 = 14.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 44.0;
const COLORS: [&str; 6] = [
    "#1f6feb", "#d1495b", "#2a9d8f", "#e9a23b", "#7b4fc9", "#56606b",
];

/// A named line of (load, value) points.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// How the x axis is drawn.
#[derive(Clone, Copy, PartialEq)]
enum Scale {
    /// Doubling levels, one tick per value.
    Log2,
    /// Linear (time, tokens), five ticks.
    Linear,
}

/// A chart of `series` against the load; None-valued points must be left
/// out by the caller.
pub fn line_chart(title: &str, unit: &str, axis: &str, series: &[Series]) -> String {
    chart(title, unit, axis, series, Scale::Log2)
}

/// A chart of `series` on a linear x axis (time, prompt tokens).
pub fn linear_chart(title: &str, unit: &str, axis: &str, series: &[Series]) -> String {
    chart(title, unit, axis, series, Scale::Linear)
}

fn chart(title: &str, unit: &str, axis: &str, series: &[Series], scale: Scale) -> String {
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    let (x_min, x_max) = xs
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    let y_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0f64, f64::max);
    let y_top = nice_ceiling(y_max);
    let at = |x: f64| match scale {
        Scale::Log2 => x.max(1.0).log2(),
        Scale::Linear => x,
    };
    let (lx_min, lx_max) = (at(x_min), at(x_max));
    let px = |x: f64| {
        let span = (lx_max - lx_min).max(1e-9);
        if xs.len() <= 1 || lx_max == lx_min {
            LEFT + (W - LEFT - RIGHT) / 2.0
        } else {
            LEFT + (at(x) - lx_min) / span * (W - LEFT - RIGHT)
        }
    };
    let py = |y: f64| TOP + (1.0 - y / y_top) * (H - TOP - BOTTOM);

    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{t}">"#,
        t = escape(title)
    );
    let _ = write!(
        svg,
        r#"<text x="{LEFT}" y="18" font-size="13" font-weight="600">{}</text>"#,
        escape(title)
    );
    // Axes, y grid and labels.
    for k in 0..=4 {
        let v = y_top * k as f64 / 4.0;
        let y = py(v);
        let _ = write!(
            svg,
            r##"<line x1="{LEFT}" x2="{x2}" y1="{y:.1}" y2="{y:.1}" stroke="#e4e7eb"/><text x="{lx}" y="{ty:.1}" font-size="10" text-anchor="end">{v}</text>"##,
            x2 = W - RIGHT,
            lx = LEFT - 6.0,
            ty = y + 3.5,
            v = short_number(v)
        );
    }
    let mut ticks: Vec<f64> = match scale {
        Scale::Log2 => xs.clone(),
        Scale::Linear if xs.is_empty() => Vec::new(),
        Scale::Linear => (0..=4)
            .map(|k| x_min + (x_max - x_min) * k as f64 / 4.0)
            .collect(),
    };
    ticks.sort_by(f64::total_cmp);
    ticks.dedup();
    for x in ticks {
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{}" font-size="10" text-anchor="middle">{}</text>"#,
            px(x),
            H - BOTTOM + 16.0,
            short_number(x)
        );
    }
    let _ = write!(
        svg,
        r#"<text x="{}" y="{}" font-size="11" text-anchor="middle">{}</text><text x="12" y="{}" font-size="11" transform="rotate(-90 12 {})" text-anchor="middle">{}</text>"#,
        (LEFT + W - RIGHT) / 2.0,
        H - 8.0,
        escape(axis),
        (TOP + H - BOTTOM) / 2.0,
        (TOP + H - BOTTOM) / 2.0,
        escape(unit)
    );
    // Lines, points and the legend.
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let path: Vec<String> = s
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let _ = write!(
            svg,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
        for &(x, y) in &s.points {
            let _ = write!(
                svg,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"><title>{}: {} at {}</title></circle>"#,
                px(x),
                py(y),
                escape(&s.name),
                short_number(y),
                short_number(x)
            );
        }
        let ly = TOP + 4.0 + 14.0 * i as f64;
        let _ = write!(
            svg,
            r#"<rect x="{}" y="{}" width="10" height="3" fill="{color}"/><text x="{}" y="{}" font-size="10">{}</text>"#,
            LEFT + 8.0,
            ly,
            LEFT + 22.0,
            ly + 4.0,
            escape(&s.name)
        );
    }
    svg.push_str("</svg>");
    svg
}

/// 1, 2 or 5 times a power of ten, at least `v` (and above zero).
fn nice_ceiling(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|&c| c >= v)
        .unwrap_or(10.0 * p)
}

fn short_number(v: f64) -> String {
    if v >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_has_one_line_and_point_per_series_and_level() {
        let svg = line_chart(
            "output tokens/s",
            "tok/s",
            "concurrency",
            &[
                Series {
                    name: "a <b>".into(),
                    points: vec![(1.0, 10.0), (2.0, 18.0), (8.0, 60.0)],
                },
                Series {
                    name: "c".into(),
                    points: vec![(1.0, 12.0), (8.0, 40.0)],
                },
            ],
        );
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(svg.matches("<circle").count(), 5);
        assert!(svg.contains("a &lt;b&gt;"));
        assert!(svg.contains(">100<"), "y axis tops at a round number");
    }

    #[test]
    fn nice_ceilings() {
        assert_eq!(nice_ceiling(61.0), 100.0);
        assert_eq!(nice_ceiling(14.0), 20.0);
        assert_eq!(nice_ceiling(0.3), 0.5);
        assert_eq!(nice_ceiling(0.0), 1.0);
    }
}
