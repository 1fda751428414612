//! Load from more than one machine: several afm-bench processes run the
//! same levels from a shared start (`--start-at`), each keeping its
//! per-request records (`--save-requests`); `afm-bench merge` reads them
//! back and computes every level again over all their requests, as if one
//! client had sent them. Times are each process's own, counted from its
//! level's start, so levels line up across processes when they start
//! together: the first level with `--start-at`, or a run of one level.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use crate::bench::load::arrivals::Shape;
use crate::bench::load::LevelRun;
use crate::bench::results::goodput::Slo;
use crate::bench::results::{BenchReport, LevelResult, Variant};
use crate::bench::sample::Sample;

/// A record line's place in the run (its sample is the rest of the line).
#[derive(Deserialize)]
struct Place {
    variant: String,
    shape: Shape,
    repetition: usize,
}

type Key = (String, String, usize);

/// Merges the runs in `dirs` (each holding bench.json and requests.jsonl)
/// into one report; the first run gives its settings.
pub fn merge(dirs: &[PathBuf]) -> Result<BenchReport> {
    let Some(first) = dirs.first() else {
        bail!("merge: name the runs' folders");
    };
    let base = BenchReport::read(&first.join("bench.json"))?;
    let mut samples: BTreeMap<Key, Vec<Sample>> = BTreeMap::new();
    for dir in dirs {
        read_records(&dir.join("requests.jsonl"), &mut samples)?;
    }
    let slo = Slo::parse(std::slice::from_ref(&base.run.slo)).map_err(anyhow::Error::msg)?;
    let variants = base
        .variants
        .iter()
        .map(|v| Variant {
            name: v.name.clone(),
            server_flags: v.server_flags.clone(),
            levels: v
                .levels
                .iter()
                .map(|l| level(&samples, &v.name, l, &slo, &base.run.percentiles))
                .collect(),
            search: None,
            stopped: None,
            schema_probe: v.schema_probe.clone(),
        })
        .collect();
    let mut run = base.run.clone();
    run.target = format!("{} ({} clients merged)", run.target, dirs.len());
    Ok(BenchReport::new(run, variants))
}

fn read_records(path: &Path, into: &mut BTreeMap<Key, Vec<Sample>>) -> Result<()> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "reading {} (run afm-bench with --save-requests)",
            path.display()
        )
    })?;
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let at = || format!("{} line {}", path.display(), n + 1);
        let place: Place = serde_json::from_str(line).with_context(at)?;
        let sample: Sample = serde_json::from_str(line).with_context(at)?;
        into.entry((place.variant, place.shape.label(), place.repetition))
            .or_default()
            .push(sample);
    }
    Ok(())
}

/// One level again over every process's requests: each repetition's
/// wall time is its longest-running process's.
fn level(
    samples: &BTreeMap<Key, Vec<Sample>>,
    variant: &str,
    l: &LevelResult,
    slo: &Slo,
    percentiles: &[f64],
) -> LevelResult {
    let runs: Vec<LevelRun> = samples
        .iter()
        .filter(|((v, label, _), _)| v == variant && *label == l.label)
        .map(|(_, s)| {
            let end = s.iter().map(|s| s.sent_ms + s.e2e_ms).fold(0.0, f64::max);
            let last_sent = s.iter().map(|s| s.sent_ms).fold(0.0, f64::max);
            LevelRun {
                samples: s.clone(),
                bodies: Vec::new(),
                wall_s: end / 1000.0,
                steady_s: if last_sent > 0.0 {
                    last_sent / 1000.0
                } else {
                    end / 1000.0
                },
                background: Vec::new(),
            }
        })
        .collect();
    LevelResult::of(l.shape, &runs, None, slo, percentiles)
}
