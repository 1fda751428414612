//! Output-parser throughput (MB/s) and cost per delta, with criterion.
//!
//! The input is a long output of each format: a reasoning block, content,
//! and tool calls, fed in pieces of a few bytes (about one token) as the
//! engine feeds it; and the same text fed at once.
//!
//! `cargo bench -p afm-engine --bench parsers`

use std::hint::black_box;

use afm_engine::parsers::{OutputConfig, OutputParser, ReasoningFormat, ToolCallFormat};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serde_json::json;

/// Bytes per fed piece: about one token of English or JSON.
const PIECE: usize = 4;

fn output(format: ToolCallFormat) -> String {
    let call = match format {
        ToolCallFormat::Hermes => "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Tokyo\", \"days\": \"3\", \"unit\": \"celsius\"}}\n</tool_call>\n".to_string(),
        ToolCallFormat::Qwen3Coder => "<tool_call>\n<function=get_weather>\n<parameter=location>\nTokyo\n</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=unit>\ncelsius\n</parameter>\n</function>\n</tool_call>\n".to_string(),
        ToolCallFormat::Llama3Json => "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Tokyo\", \"days\": \"3\", \"unit\": \"celsius\"}}; ".to_string(),
        ToolCallFormat::Mistral => "[TOOL_CALLS]get_weather[ARGS]{\"location\": \"Tokyo\", \"days\": \"3\", \"unit\": \"celsius\"}".to_string(),
        ToolCallFormat::Gemma4 => "<|tool_call>call:get_weather{location:<|\"|>Tokyo<|\"|>,days:3,unit:<|\"|>celsius<|\"|>}<tool_call|>".to_string(),
    };
    let thinking = "Let me think about which city and how many days the user means. ".repeat(20);
    let (open, close) = match format {
        ToolCallFormat::Gemma4 => ("<|channel>thought\n", "<channel|>"),
        _ => ("<think>\n", "</think>\n\n"),
    };
    let body = match format {
        // These formats put calls first, without content before them.
        ToolCallFormat::Llama3Json => call.repeat(8),
        ToolCallFormat::Mistral => call.repeat(8),
        _ => format!(
            "{}{}",
            "The forecast follows shortly. ".repeat(10),
            call.repeat(8)
        ),
    };
    format!("{open}{thinking}{close}{body}")
}

fn config(format: ToolCallFormat) -> OutputConfig {
    let reasoning = match format {
        ToolCallFormat::Gemma4 => ReasoningFormat::GemmaChannel,
        _ => ReasoningFormat::Think,
    };
    let mut c = OutputConfig::text(reasoning);
    c.tool_format = Some(format);
    let params = json!({"type": "object", "properties": {
        "location": {"type": "string"}, "days": {"type": "integer"},
        "unit": {"enum": ["celsius", "fahrenheit"]}}});
    c.tools = OutputConfig::tool_schemas([("get_weather", &params)]);
    c
}

fn pieces(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + PIECE).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push(&text[start..end]);
        start = end;
    }
    out
}

fn bench(c: &mut Criterion) {
    for format in ToolCallFormat::ALL {
        let text = output(format);
        let cfg = config(format);
        let parts = pieces(&text);
        let mut group = c.benchmark_group(format!("parser/{}", format.name()));
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function("streamed", |b| {
            b.iter(|| {
                let mut p = OutputParser::new(&cfg);
                let mut n = 0;
                for part in &parts {
                    n += p.feed(black_box(part)).len();
                }
                n + p.finish().len()
            })
        });
        group.bench_function("whole", |b| {
            b.iter(|| {
                let mut p = OutputParser::new(&cfg);
                p.feed(black_box(&text)).len() + p.finish().len()
            })
        });
        group.finish();
        // Per-delta cost: the same work per fed piece.
        let mut group = c.benchmark_group(format!("parser_delta/{}", format.name()));
        group.throughput(Throughput::Elements(parts.len() as u64));
        group.bench_function("per_delta", |b| {
            b.iter(|| {
                let mut p = OutputParser::new(&cfg);
                for part in &parts {
                    black_box(p.feed(part));
                }
                p.finish()
            })
        });
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
