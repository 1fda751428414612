//! The benchmark's HTML page: its charts and tables, from the run report.

use anyhow::{Context as _, Result};
use tera::Context;

use crate::bench::results::charts::{self, Series};
use crate::bench::results::{BenchReport, LevelResult};
use crate::report::html::tera;

type LevelFigure = fn(&LevelResult) -> Option<f64>;

/// The benchmark page's charts: title, unit, figure. Each is drawn
/// against the level's load (users, or requests/s for an open loop).
const BENCH_CHARTS: [(&str, &str, LevelFigure); 8] = [
    ("Output tokens/s", "tokens/s", |l| {
        Some(l.output_tokens_per_s)
    }),
    ("Correct goodput", "requests/s", |l| {
        l.goodput.map(|g| g.correct_good_per_s)
    }),
    ("Correct goodput share", "%", |l| {
        l.goodput.map(|g| 100.0 * g.correct_good_share)
    }),
    ("Corrupted replies", "requests", |l| {
        Some(l.corrupted as f64)
    }),
    ("Time to first token, p50", "ms", |l| {
        l.ttft.as_ref().map(|d| d.p50)
    }),
    ("Inter-token latency, p50", "ms", |l| {
        l.itl.as_ref().map(|d| d.p50)
    }),
    ("End-to-end latency, p50", "ms", |l| {
        l.e2e.as_ref().map(|d| d.p50)
    }),
    ("End-to-end latency, p99", "ms", |l| {
        l.e2e.as_ref().map(|d| d.p99)
    }),
];

/// One line per variant, a point per level that has one.
fn per_variant(
    report: &BenchReport,
    point: impl Fn(&LevelResult) -> Option<(f64, f64)>,
) -> Vec<Series> {
    report
        .variants
        .iter()
        .map(|v| Series {
            name: v.name.clone(),
            points: v.levels.iter().filter_map(&point).collect(),
        })
        .collect()
}

pub fn render(report: &BenchReport) -> Result<String> {
    let svgs: Vec<String> =
        BENCH_CHARTS
            .iter()
            .map(|(title, unit, figure)| {
                let series = per_variant(report, |l| figure(l).map(|y| (l.x, y)));
                let axis =
                    if report.variants.iter().flat_map(|v| &v.levels).any(|l| {
                        matches!(l.shape, crate::bench::load::arrivals::Shape::Open { .. })
                    }) {
                        "request rate (req/s)"
                    } else {
                        "concurrency"
                    };
                charts::line_chart(title, unit, axis, &series)
            })
            .collect();
    let mut svgs = svgs;
    // Throughput against each user's speed, one point per level: the
    // trade-off a deployment picks from (AIPerf's Pareto plot).
    let pareto = per_variant(report, |l| {
        let per_user = l.request_output_tokens_per_s.as_ref()?.p50;
        Some((per_user, l.output_tokens_per_s))
    });
    if pareto.iter().any(|s| s.points.len() > 1) {
        svgs.push(charts::line_chart(
            "Throughput against per-user speed",
            "output tokens/s",
            "output tokens/s per request (p50)",
            &pareto,
        ));
    }
    // The server's running requests over each level, from its /metrics.
    for v in &report.variants {
        let series: Vec<Series> = v
            .levels
            .iter()
            .filter(|l| l.server_timeline.iter().any(|p| p.running.is_some()))
            .map(|l| Series {
                name: l.label.clone(),
                points: l
                    .server_timeline
                    .iter()
                    .filter_map(|p| Some((p.t_ms / 1000.0, p.running?)))
                    .collect(),
            })
            .collect();
        if !series.is_empty() {
            svgs.push(charts::linear_chart(
                &format!("Server: requests running ({})", v.name),
                "requests",
                "seconds into the level",
                &series,
            ));
        }
    }
    // Sessions: time to first token against the prompt's length, a line
    // per turn (cold first turns, then cached ones), per variant and level.
    for v in &report.variants {
        for l in v.levels.iter().filter(|l| !l.turn_points.is_empty()) {
            let last = l.turn_points.iter().map(|p| p.turn).max().unwrap_or(0);
            let series: Vec<Series> = (1..=last)
                .map(|turn| {
                    let mut points: Vec<(f64, f64)> = l
                        .turn_points
                        .iter()
                        .filter(|p| p.turn == turn)
                        .map(|p| (p.prompt_tokens as f64, p.ttft_ms / 1000.0))
                        .collect();
                    points.sort_by(|a, b| a.0.total_cmp(&b.0));
                    Series {
                        name: format!("turn {turn}"),
                        points,
                    }
                })
                .filter(|s| !s.points.is_empty())
                .collect();
            svgs.push(charts::linear_chart(
                &format!("Time to first token by turn ({}, {})", v.name, l.label),
                "s",
                "prompt tokens",
                &series,
            ));
        }
    }
    // Server counters as cells ("-" when the server has no such counter).
    let server: Vec<Vec<[String; 2]>> = report
        .variants
        .iter()
        .map(|v| {
            v.levels
                .iter()
                .map(|l| {
                    let s = l.server.clone().unwrap_or_default();
                    let cell = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.0}"));
                    [cell(s.prefill_computed_tokens), cell(s.cache_hits)]
                })
                .collect()
        })
        .collect();
    let mut ctx = Context::new();
    ctx.insert("report", report);
    ctx.insert("charts", &svgs);
    ctx.insert("server", &server);
    tera()?
        .render("bench.html", &ctx)
        .context("rendering the benchmark page")
}
