//! `GET /metrics`: engine and server counters in Prometheus text format.

use std::fmt::Write;

use crate::runtime::{EngineStats, BATCH_SIZE_BUCKETS};

/// Requests the server answered without reaching the engine.
#[derive(Debug, Default, Clone, Copy)]
pub struct RejectedRequests {
    /// 4xx answers (bad input, unknown model, auth, size).
    pub client_errors: u64,
}

pub fn render(stats: &EngineStats, rejected: RejectedRequests) -> String {
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, samples: &[(&str, u64)]| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(out, "{name}{labels} {value}");
        }
    };
    metric(
        "afm_requests_total",
        "counter",
        "Requests by outcome.",
        &[
            ("{outcome=\"finished\"}", stats.requests_finished),
            ("{outcome=\"cancelled\"}", stats.requests_cancelled),
            ("{outcome=\"failed\"}", stats.requests_failed),
            ("{outcome=\"rejected\"}", rejected.client_errors),
        ],
    );
    let counters = [
        (
            "afm_prompt_tokens_total",
            "Prompt tokens of started requests.",
            stats.prompt_tokens,
        ),
        (
            "afm_completion_tokens_total",
            "Tokens generated.",
            stats.completion_tokens,
        ),
        (
            "afm_cached_tokens_total",
            "Prompt tokens served from the prefix cache.",
            stats.cached_tokens,
        ),
        (
            "afm_prefill_computed_tokens_total",
            "Prompt tokens run through the model.",
            stats.prefill_computed_tokens,
        ),
        (
            "afm_prefix_cache_hits_total",
            "Requests that reused a cached prefix.",
            stats.cache_hits,
        ),
        (
            "afm_prefix_cache_misses_total",
            "Requests that found no cached prefix.",
            stats.cache_misses,
        ),
        (
            "afm_reasoning_tokens_total",
            "Completion tokens spent inside reasoning.",
            stats.reasoning_tokens,
        ),
        (
            "afm_tool_calls_total",
            "Tool calls parsed from model output.",
            stats.output.tool_calls as u64,
        ),
    ];
    for (name, help, value) in counters {
        metric(name, "counter", help, &[("", value)]);
    }
    let o = &stats.output;
    metric(
        "afm_output_repairs_total",
        "counter",
        "What the output parsers repaired or could not read, by kind.",
        &[
            ("{kind=\"coercion_failure\"}", o.coercion_failures as u64),
            ("{kind=\"duplicate_key\"}", o.duplicate_keys as u64),
            ("{kind=\"repeated_call\"}", o.repeated_calls as u64),
            ("{kind=\"unparsed_region\"}", o.unparsed_regions as u64),
            ("{kind=\"unterminated_call\"}", o.unterminated_calls as u64),
            ("{kind=\"unnamed_call\"}", o.unnamed_calls as u64),
            ("{kind=\"after_turn_end\"}", o.dropped_after_turn_end as u64),
        ],
    );
    metric(
        "afm_running_sequences",
        "gauge",
        "Sequences being decoded.",
        &[("", stats.running as u64)],
    );
    metric(
        "afm_waiting_sequences",
        "gauge",
        "Requests waiting for a slot.",
        &[("", stats.waiting as u64)],
    );
    metric(
        "afm_prefix_cache_bytes",
        "gauge",
        "KV the prefix cache holds, as its budget counts it.",
        &[("", stats.prefix_cache_bytes as u64)],
    );
    let kernels = format!(
        "{{requested=\"{}\",active=\"{}\"}}",
        crate::cpu::kernels::chosen(),
        crate::cpu::active_kernels()
    );
    metric(
        "afm_kernels_info",
        "gauge",
        "The kernels the model runs with: as asked (--kernels) and what runs (afm's CPU primitives, MLX's ops, or mixed).",
        &[(kernels.as_str(), 1)],
    );
    let device = crate::device::memory_use();
    metric(
        "afm_device_memory_bytes",
        "gauge",
        "MLX's memory on the model's device: in live arrays, freed but cached for reuse, the most in live arrays since start, and the cache's bound.",
        &[
            ("{state=\"active\"}", device.active as u64),
            ("{state=\"cached\"}", device.cache as u64),
            ("{state=\"peak\"}", device.peak as u64),
            ("{state=\"cache_limit\"}", device.cache_limit as u64),
        ],
    );
    if let Some(heap) = heap() {
        // Where resident memory goes when it grows: held by live objects
        // (a leak, or a cache past its count) or freed but kept by malloc
        // (fragmentation).
        metric(
            "afm_heap_bytes",
            "gauge",
            "The C heap (glibc's mallinfo2): in use, incl. mmapped blocks, and free but kept.",
            &[("{state=\"in_use\"}", heap.0), ("{state=\"free\"}", heap.1)],
        );
    }

    let _ = writeln!(out, "# HELP afm_batch_size Sequences per forward pass.");
    let _ = writeln!(out, "# TYPE afm_batch_size histogram");
    let mut cumulative = 0;
    for (bound, count) in BATCH_SIZE_BUCKETS.iter().zip(&stats.batch_size_steps) {
        cumulative += count;
        let _ = writeln!(out, "afm_batch_size_bucket{{le=\"{bound}\"}} {cumulative}");
    }
    cumulative += stats.batch_size_steps[BATCH_SIZE_BUCKETS.len()];
    let _ = writeln!(out, "afm_batch_size_bucket{{le=\"+Inf\"}} {cumulative}");
    let _ = writeln!(out, "afm_batch_size_sum {}", stats.batched_sequences);
    let _ = writeln!(out, "afm_batch_size_count {}", stats.steps);
    out
}

/// Bytes of the C heap in use and free-but-kept, over all arenas.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn heap() -> Option<(u64, u64)> {
    // SAFETY: mallinfo2 only reads the allocator's counters.
    let m = unsafe { libc::mallinfo2() };
    Some(((m.uordblks + m.hblkhd) as u64, m.fordblks as u64))
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn heap() -> Option<(u64, u64)> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let mut stats = EngineStats {
            steps: 3,
            batched_sequences: 1 + 3 + 100,
            requests_finished: 2,
            ..Default::default()
        };
        stats.batch_size_steps[0] = 1; // 1
        stats.batch_size_steps[2] = 1; // 3 -> le 4
        stats.batch_size_steps[7] = 1; // 100 -> +Inf only
        let text = render(&stats, RejectedRequests { client_errors: 4 });
        assert!(text.contains("afm_batch_size_bucket{le=\"1\"} 1\n"));
        assert!(text.contains("afm_batch_size_bucket{le=\"4\"} 2\n"));
        assert!(text.contains("afm_batch_size_bucket{le=\"64\"} 2\n"));
        assert!(text.contains("afm_batch_size_bucket{le=\"+Inf\"} 3\n"));
        assert!(text.contains("afm_requests_total{outcome=\"rejected\"} 4\n"));
        assert!(text.contains("afm_requests_total{outcome=\"finished\"} 2\n"));
        for state in ["active", "cached", "peak", "cache_limit"] {
            let line = format!("afm_device_memory_bytes{{state=\"{state}\"}} ");
            assert!(text.contains(&line), "{line} missing");
        }
    }
}
