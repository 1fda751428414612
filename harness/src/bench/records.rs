//! Per-request records (`--save-requests`): one JSON line per request,
//! with its level, when it was due, sent and answered, each output
//! event's time, its usage and its checks, to analyse or replay a run.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::json;

use super::sample::Sample;

/// Appends `samples` of one level (and repetition) to `out`.
pub fn write(
    out: &mut impl Write,
    variant: &str,
    level: &str,
    repetition: usize,
    samples: &[Sample],
) -> Result<()> {
    for s in samples {
        let line = json!({
            "variant": variant,
            "level": level,
            "repetition": repetition,
            "conversation": s.conversation,
            "turn": s.turn,
            "scheduled_ms": s.scheduled_ms,
            "sent_ms": s.sent_ms,
            "queue_ms": s.queue_ms(),
            "ttft_ms": s.ttft_ms,
            "ttfa_ms": s.ttfa_ms,
            "e2e_ms": s.e2e_ms,
            "token_ms": s.token_ms,
            "usage": {
                "prompt_tokens": s.prompt_tokens,
                "output_tokens": s.output_tokens,
                "reasoning_tokens": s.reasoning_tokens,
                "cached_tokens": s.cached_tokens,
                "reported": s.usage_reported,
            },
            "expected_cached": s.expected_cached,
            "marker": s.marker,
            "schema": s.schema,
            "finish_reason": s.finish_reason,
            "error": s.error,
            "failed_checks": s.failed_checks,
            "tolerated_checks": s.tolerated,
            "correct": s.correct(),
            "reply": s.content,
        });
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// Opens `path` for the run's records.
pub fn create(path: &Path) -> Result<std::io::BufWriter<std::fs::File>> {
    let f = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    Ok(std::io::BufWriter::new(f))
}
