//! The output-parser contract over recorded outputs (`fixtures/parsers`):
//! the expected message, and the same message however the text is split.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use afm_engine::loading::GgufModelFile;
use afm_engine::loading::ModelSource;
use afm_engine::loading::{IncrementalDecoder, TextTokenizer};
use afm_engine::parsers::{
    parse_complete, OutputConfig, OutputParser, ParsedDelta, ParsedMessage, ReasoningFormat,
    ToolCallFormat,
};
use serde_json::Value;

struct Fixture {
    path: PathBuf,
    config: OutputConfig,
    output: String,
    expected: Value,
    stats: Option<Value>,
}

/// (name, parameters) of an OpenAI `tools` entry.
fn openai_tool(t: &Value) -> (&str, &Value) {
    (
        t["function"]["name"].as_str().unwrap(),
        &t["function"]["parameters"],
    )
}

fn fixtures() -> Vec<Fixture> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/parsers");
    let mut out = Vec::new();
    for dir in std::fs::read_dir(&root).unwrap() {
        let dir = dir.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&dir).unwrap() {
            let path = file.unwrap().path();
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let format = ToolCallFormat::from_name(v["parser"].as_str().unwrap()).unwrap();
            assert_eq!(
                dir.file_name().unwrap(),
                format.name(),
                "{}",
                path.display()
            );
            let reasoning = match v["reasoning"].as_str().unwrap() {
                "think" => ReasoningFormat::Think,
                "gemma" => ReasoningFormat::GemmaChannel,
                other => panic!("unknown reasoning {other}"),
            };
            let mut config = OutputConfig::text(reasoning);
            config.tool_format = Some(format);
            config.tools =
                OutputConfig::tool_schemas(v["tools"].as_array().unwrap().iter().map(openai_tool));
            config.prompt_opens_reasoning = v["prompt_opens_reasoning"].as_bool().unwrap();
            out.push(Fixture {
                path,
                config,
                output: v["output"].as_str().unwrap().to_string(),
                expected: v["expected"].clone(),
                stats: v.get("stats").cloned(),
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    assert!(out.len() >= 20, "fixtures missing");
    for f in ToolCallFormat::ALL {
        assert!(
            out.iter().any(|x| x.config.tool_format == Some(f)),
            "no fixture for {}",
            f.name()
        );
    }
    out
}

/// Feeds `pieces` and checks each delta's OpenAI shape on the way.
fn stream(config: &OutputConfig, pieces: &[&str]) -> ParsedMessage {
    let mut parser = OutputParser::new(config);
    let mut message = ParsedMessage::default();
    let mut deltas = Vec::new();
    for p in pieces {
        deltas.extend(parser.feed(p));
    }
    deltas.extend(parser.finish());
    let mut started = HashSet::new();
    for d in &deltas {
        match d {
            ParsedDelta::ToolCallStart { index, .. } => {
                assert_eq!(*index, started.len(), "indices are given in order");
                started.insert(*index);
            }
            ParsedDelta::ToolCallArguments { index, fragment } => {
                assert!(
                    started.contains(index),
                    "arguments before the call's header"
                );
                assert!(!fragment.is_empty());
            }
            ParsedDelta::Content(t) | ParsedDelta::Reasoning(t) => assert!(!t.is_empty()),
        }
        message.apply(d);
    }
    message
}

fn check_expected(f: &Fixture, m: &ParsedMessage) {
    let name = f.path.display();
    assert_eq!(
        m.content,
        f.expected["content"].as_str().unwrap(),
        "{name}: content"
    );
    assert_eq!(
        m.reasoning,
        f.expected["reasoning"].as_str().unwrap(),
        "{name}: reasoning"
    );
    let calls = f.expected["tool_calls"].as_array().unwrap();
    assert_eq!(m.tool_calls.len(), calls.len(), "{name}: number of calls");
    for (got, want) in m.tool_calls.iter().zip(calls) {
        assert_eq!(got.name, want["name"].as_str().unwrap(), "{name}");
        let args: Value = serde_json::from_str(&got.arguments)
            .unwrap_or_else(|e| panic!("{name}: arguments {:?} are not JSON: {e}", got.arguments));
        assert!(args.is_object(), "{name}: arguments are an object");
        assert_eq!(args, want["arguments"], "{name}: arguments");
    }
}

#[test]
fn non_streaming_parse_gives_the_expected_message() {
    for f in fixtures() {
        let (m, stats) = parse_complete(&f.config, &f.output);
        check_expected(&f, &m);
        if let Some(want) = &f.stats {
            let got = serde_json::to_value(stats).unwrap();
            for (k, v) in want.as_object().unwrap() {
                assert_eq!(&got[k], v, "{}: stats.{k}", f.path.display());
            }
        }
    }
}

#[test]
fn every_split_position_gives_the_same_message() {
    for f in fixtures() {
        let (whole, _) = parse_complete(&f.config, &f.output);
        let text = f.output.as_str();
        for (i, _) in text.char_indices().skip(1) {
            let m = stream(&f.config, &[&text[..i], &text[i..]]);
            assert_eq!(m, whole, "{} split at byte {i}", f.path.display());
        }
        let chars: Vec<String> = text.chars().map(String::from).collect();
        let pieces: Vec<&str> = chars.iter().map(String::as_str).collect();
        assert_eq!(
            stream(&f.config, &pieces),
            whole,
            "{} char by char",
            f.path.display()
        );
    }
}

#[test]
fn token_by_token_chunks_give_the_same_message() {
    let source = ModelSource::resolve("smollm2").expect("run scripts/setup.sh first");
    let tok = TextTokenizer::from_gguf(&GgufModelFile::open(source.path()).unwrap()).unwrap();
    for f in fixtures() {
        let (whole, _) = parse_complete(&f.config, &f.output);
        let ids = tok.encode(&f.output).unwrap();
        let mut decoder = IncrementalDecoder::new();
        let mut pieces = Vec::new();
        for id in ids {
            pieces.push(decoder.push(&tok, id).unwrap());
        }
        pieces.push(decoder.finish(&tok).unwrap());
        assert_eq!(
            pieces.concat(),
            f.output,
            "{}: tokenizer round trip",
            f.path.display()
        );
        let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
        assert_eq!(
            stream(&f.config, &refs),
            whole,
            "{} token by token",
            f.path.display()
        );
    }
}

mod malformed {
    //! Random, mostly malformed text made of the formats' own pieces: no
    //! parser panics, and any split gives the same message as no split.
    use super::*;
    use proptest::prelude::*;

    const PIECES: &[&str] = &[
        "<tool_call>",
        "</tool_call>",
        "<tool_",
        "call>",
        "<think>",
        "</think>",
        "</th",
        "<|channel>thought",
        "<channel|>",
        "<|tool_call>",
        "<tool_call|>",
        "call:",
        "<|\"|>",
        "[TOOL_CALLS]",
        "[ARGS]",
        "<|python_tag|>",
        "<function=",
        "<parameter=",
        "</parameter>",
        "</function>",
        "<|im_end|>",
        "<turn|>",
        "{",
        "}",
        "[",
        "]",
        "\"",
        ":",
        ",",
        ";",
        "\\",
        "\"name\"",
        "\"arguments\"",
        "\"parameters\"",
        "\"get_weather\"",
        "\"days\"",
        "f",
        ">",
        "get_weather",
        "days",
        "12",
        "-3.5",
        "true",
        "True",
        "null",
        "x",
        " ",
        "\n",
        "é",
        "日本",
        "&amp;",
        "&#x41;",
        "&",
    ];

    fn text() -> impl Strategy<Value = String> {
        proptest::collection::vec(proptest::sample::select(PIECES), 0..40).prop_map(|v| v.concat())
    }

    fn configs() -> Vec<OutputConfig> {
        let params = serde_json::json!({"type": "object",
            "properties": {"days": {"type": "integer"}, "x": {"anyOf": [{"type": "boolean"}, {"type": "null"}]}}});
        let tools = OutputConfig::tool_schemas([("get_weather", &params)]);
        let mut out = Vec::new();
        for format in ToolCallFormat::ALL {
            for (reasoning, opens) in [
                (ReasoningFormat::Think, false),
                (ReasoningFormat::Think, true),
                (ReasoningFormat::GemmaChannel, false),
            ] {
                let mut c = OutputConfig::text(reasoning);
                c.tool_format = Some(format);
                c.tools = tools.clone();
                c.prompt_opens_reasoning = opens;
                out.push(c);
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn never_panics_and_splits_do_not_matter(t in text(), cuts in proptest::collection::vec(0usize..400, 0..6)) {
            let mut bounds: Vec<usize> = cuts
                .into_iter()
                .map(|c| c % (t.len() + 1))
                .filter(|&c| t.is_char_boundary(c))
                .collect();
            bounds.sort_unstable();
            bounds.dedup();
            let mut pieces = Vec::new();
            let mut prev = 0;
            for b in bounds {
                pieces.push(&t[prev..b]);
                prev = b;
            }
            pieces.push(&t[prev..]);
            for config in configs() {
                let (whole, _) = parse_complete(&config, &t);
                for call in &whole.tool_calls {
                    let args: Value = serde_json::from_str(&call.arguments).expect("arguments are JSON");
                    prop_assert!(args.is_object());
                }
                prop_assert_eq!(stream(&config, &pieces), whole, "format {:?}", config.tool_format);
            }
        }
    }
}
