//! Per-request records (`--save-requests`): one JSON line per request,
//! with its level, when it was due, sent and answered, each output
//! event's time, its usage and its checks, to analyse or replay a run, or
//! to merge several clients' runs into one report (`afm-bench merge`).

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::json;

use crate::bench::load::arrivals::Shape;
use crate::bench::sample::Sample;

/// Appends `samples` of one level (and repetition) to `out`.
pub fn write(
    out: &mut impl Write,
    variant: &str,
    shape: &Shape,
    repetition: usize,
    samples: &[Sample],
) -> Result<()> {
    let level = shape.label();
    for s in samples {
        // The sample itself (every field, so `afm-bench merge` can read it
        // back), with the level's and some derived figures beside it.
        let mut line = serde_json::to_value(s)?;
        let extra = json!({
            "variant": variant,
            "level": level,
            "shape": shape,
            "repetition": repetition,
            "queue_ms": s.queue_ms(),
            "usage": {
                "prompt_tokens": s.prompt_tokens,
                "output_tokens": s.output_tokens,
                "reasoning_tokens": s.reasoning_tokens,
                "cached_tokens": s.cached_tokens,
                "reported": s.usage_reported,
            },
            "tolerated_checks": s.tolerated,
            "correct": s.correct(),
            "reply": s.content,
        });
        if let (Some(o), Some(e)) = (line.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
        }
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// Opens `path` for the run's records.
pub fn create(path: &Path) -> Result<std::io::BufWriter<std::fs::File>> {
    let f = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    Ok(std::io::BufWriter::new(f))
}
