//! `afm-bench compare A B`: two runs side by side, per variant and
//! concurrency level, every metric with the ratio B/A and which way is
//! better.

use std::fmt::Write as _;

use crate::bench::results::{BenchReport, LevelResult, Variant};

type Getter = fn(&LevelResult) -> Option<f64>;

/// Metric, whether higher is better, and how to read it.
const METRICS: [(&str, bool, Getter); 14] = [
    ("output tok/s", true, |l| Some(l.output_tokens_per_s)),
    ("total tok/s", true, |l| Some(l.total_tokens_per_s)),
    ("requests/s", true, |l| Some(l.requests_per_s)),
    ("TTFT p50 ms", false, |l| l.ttft.as_ref().map(|d| d.p50)),
    ("TTFT p99 ms", false, |l| l.ttft.as_ref().map(|d| d.p99)),
    ("TPOT p50 ms", false, |l| l.tpot.as_ref().map(|d| d.p50)),
    ("ITL p50 ms", false, |l| l.itl.as_ref().map(|d| d.p50)),
    ("ITL p99 ms", false, |l| l.itl.as_ref().map(|d| d.p99)),
    ("E2E p50 ms", false, |l| l.e2e.as_ref().map(|d| d.p50)),
    ("E2E p99 ms", false, |l| l.e2e.as_ref().map(|d| d.p99)),
    ("TTFA p50 ms", false, |l| l.ttfa.as_ref().map(|d| d.p50)),
    ("errors", false, |l| Some(l.errors as f64)),
    ("corrupted", false, |l| Some(l.corrupted as f64)),
    ("correct good/s", true, |l| {
        l.goodput.map(|g| g.correct_good_per_s)
    }),
];

/// Changes smaller than this fraction are called even.
const EVEN: f64 = 0.05;

/// Variants matched by name, or the only variant of each run with the
/// other's (two servers measured with the same scenario).
fn pairs<'a>(a: &'a BenchReport, b: &'a BenchReport) -> Vec<(&'a Variant, &'a Variant)> {
    let by_name: Vec<_> = a
        .variants
        .iter()
        .filter_map(|va| {
            b.variants
                .iter()
                .find(|vb| vb.name == va.name)
                .map(|vb| (va, vb))
        })
        .collect();
    if by_name.is_empty() && a.variants.len() == 1 && b.variants.len() == 1 {
        return vec![(&a.variants[0], &b.variants[0])];
    }
    by_name
}

pub fn text(a: &BenchReport, b: &BenchReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "A: {} ({}), {}",
        a.run.target, a.run.model, a.run.started
    );
    let _ = writeln!(
        out,
        "B: {} ({}), {}",
        b.run.target, b.run.model, b.run.started
    );
    if a.run.prompts != b.run.prompts || a.run.max_tokens != b.run.max_tokens {
        let _ = writeln!(
            out,
            "note: different workloads (A: {} prompts, max_tokens {}; B: {} prompts, max_tokens {})",
            a.run.prompts, a.run.max_tokens, b.run.prompts, b.run.max_tokens
        );
    }
    let pairs = pairs(a, b);
    if pairs.is_empty() {
        let _ = writeln!(out, "no variant in common: nothing to compare");
    }
    for (va, vb) in pairs {
        let title = if va.name == vb.name {
            va.name.clone()
        } else {
            format!("{} vs {}", va.name, vb.name)
        };
        for la in &va.levels {
            let Some(lb) = vb.levels.iter().find(|l| l.label == la.label) else {
                continue;
            };
            let _ = writeln!(out, "\n{title}, {}", la.label);
            let _ = writeln!(
                out,
                "  {:<14} {:>11} {:>11} {:>8}",
                "metric", "A", "B", "B/A"
            );
            for (name, higher_better, get) in METRICS {
                let (x, y) = (get(la), get(lb));
                let fig = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
                let (ratio, verdict) = match (x, y) {
                    (Some(x), Some(y)) if x > 0.0 => {
                        let r = y / x;
                        let verdict = if (r - 1.0).abs() < EVEN {
                            ""
                        } else if (r > 1.0) == higher_better {
                            "B better"
                        } else {
                            "B worse"
                        };
                        (format!("{r:.2}x"), verdict)
                    }
                    _ => ("-".to_string(), ""),
                };
                let _ = writeln!(
                    out,
                    "  {:<14} {:>11} {:>11} {:>8}  {}",
                    name,
                    fig(x),
                    fig(y),
                    ratio,
                    verdict
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::load::arrivals::Shape;
    use crate::bench::results::{BenchRun, LevelResult, Variant};
    use crate::bench::stats::Dist;

    fn level(c: usize, tok_s: f64, ttft: f64) -> LevelResult {
        let d = Dist {
            n: 1,
            mean: ttft,
            p50: ttft,
            p90: ttft,
            p99: ttft,
            max: ttft,
            at: vec![],
        };
        let shape = Shape::Closed { concurrency: c };
        LevelResult {
            shape,
            label: shape.label(),
            x: c as f64,
            requests: 4,
            ttft: Some(d.clone()),
            e2e: Some(d),
            output_tokens_per_s: tok_s,
            total_tokens_per_s: tok_s,
            requests_per_s: 1.0,
            output_tokens_per_s_runs: vec![tok_s],
            ..Default::default()
        }
    }

    fn report(name: &str, levels: Vec<LevelResult>) -> BenchReport {
        BenchReport::new(
            BenchRun::default(),
            vec![Variant {
                name: name.into(),
                server_flags: vec![],
                levels,
                search: None,
                stopped: None,
                schema_probe: None,
            }],
        )
    }

    #[test]
    fn ratios_say_which_side_is_better() {
        let a = report(
            "afm-serve",
            vec![level(1, 20.0, 100.0), level(8, 80.0, 300.0)],
        );
        let b = report(
            "llama-server",
            vec![level(1, 40.0, 50.0), level(4, 1.0, 1.0)],
        );
        let t = text(&a, &b);
        assert!(
            t.contains("afm-serve vs llama-server, concurrency 1"),
            "{t}"
        );
        assert!(
            !t.contains("concurrency 8") && !t.contains("concurrency 4"),
            "{t}"
        );
        let line = |m: &str| {
            t.lines()
                .find(|l| l.trim_start().starts_with(m))
                .unwrap()
                .to_string()
        };
        assert!(line("output tok/s").contains("2.00x  B better"), "{t}");
        assert!(line("TTFT p50").contains("0.50x  B better"), "{t}");
        assert!(line("requests/s").trim_end().ends_with("1.00x"), "{t}");
    }
}
