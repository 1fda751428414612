//! Output parsers: model text in, OpenAI message parts out, incrementally.
//!
//! Text flows through two stages: the [`reasoning`] splitter routes it to
//! reasoning or content (and cuts it at a turn-end marker); content then
//! goes through the [`tool_calls`] driver of the active [`ToolCallFormat`],
//! which turns call regions into tool-call deltas with arguments coerced to
//! each tool's schema. Feeding the same text in any pieces gives the same
//! deltas once folded: the parser holds back only what it cannot decide.
//! The [`thinking_budget`] controller tells the engine when to force the
//! end of reasoning.

pub mod coercion;
pub mod formats;
pub mod json_scan;
pub mod markers;
pub mod reasoning;
pub mod thinking_budget;
pub mod tool_calls;

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

pub use formats::ToolCallFormat;
pub use reasoning::ReasoningFormat;
use reasoning::{ReasoningSplitter, Routed};
pub use thinking_budget::ThinkingBudget;
use tool_calls::{ToolCallParser, ToolSchemas};

/// One piece of parsed output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParsedDelta {
    Content(String),
    Reasoning(String),
    /// A call begins: its index (0, 1, ... in the output) and name.
    ToolCallStart {
        index: usize,
        name: String,
    },
    /// A piece of a call's JSON arguments.
    ToolCallArguments {
        index: usize,
        fragment: String,
    },
}

/// What the parser had to repair or could not read; reported, never hidden.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ParseStats {
    pub tool_calls: usize,
    /// Argument values that fit no type of their schema (left as written).
    pub coercion_failures: usize,
    /// Repeated argument keys dropped (first value wins).
    pub duplicate_keys: usize,
    /// Call objects dropped as verbatim repeats of the previous one.
    pub repeated_calls: usize,
    /// Call regions that held no readable call (kept as content).
    pub unparsed_regions: usize,
    /// Calls whose region never closed (output ended inside them).
    pub unterminated_calls: usize,
    /// Calls found without a name (dropped).
    pub unnamed_calls: usize,
    /// Bytes after a turn-end marker (dropped).
    pub dropped_after_turn_end: usize,
}

impl ParseStats {
    /// Sums another request's counts into these.
    pub fn add(&mut self, o: &ParseStats) {
        self.tool_calls += o.tool_calls;
        self.coercion_failures += o.coercion_failures;
        self.duplicate_keys += o.duplicate_keys;
        self.repeated_calls += o.repeated_calls;
        self.unparsed_regions += o.unparsed_regions;
        self.unterminated_calls += o.unterminated_calls;
        self.unnamed_calls += o.unnamed_calls;
        self.dropped_after_turn_end += o.dropped_after_turn_end;
    }
}

/// What a request's output is parsed for.
#[derive(Debug, Clone)]
pub struct OutputConfig {
    /// `None`: no tool parsing (no tools offered, or `tool_choice: none`).
    pub tool_format: Option<ToolCallFormat>,
    pub tools: ToolSchemas,
    pub reasoning: ReasoningFormat,
    /// The prompt left a reasoning block open.
    pub prompt_opens_reasoning: bool,
}

impl OutputConfig {
    /// Plain text: reasoning recognised, no tools.
    pub fn text(reasoning: ReasoningFormat) -> Self {
        OutputConfig {
            tool_format: None,
            tools: Arc::new(HashMap::new()),
            reasoning,
            prompt_opens_reasoning: false,
        }
    }

    /// Tool schemas by name, from (name, parameters schema) pairs.
    pub fn tool_schemas<'a>(tools: impl IntoIterator<Item = (&'a str, &'a Value)>) -> ToolSchemas {
        let map = tools
            .into_iter()
            .map(|(name, params)| (name.to_string(), params.clone()))
            .collect();
        Arc::new(map)
    }
}

/// Parses one request's output as it is generated.
pub struct OutputParser {
    splitter: ReasoningSplitter,
    tools: Option<ToolCallParser>,
    routed: Vec<Routed>,
}

impl OutputParser {
    pub fn new(config: &OutputConfig) -> Self {
        OutputParser {
            splitter: ReasoningSplitter::new(config.reasoning, config.prompt_opens_reasoning),
            tools: config
                .tool_format
                .map(|f| ToolCallParser::new(f, config.tools.clone())),
            routed: Vec::new(),
        }
    }

    pub fn feed(&mut self, text: &str) -> Vec<ParsedDelta> {
        let mut routed = std::mem::take(&mut self.routed);
        self.splitter.feed(text, &mut routed);
        self.route(routed, false)
    }

    /// The output has ended: releases everything held back.
    pub fn finish(&mut self) -> Vec<ParsedDelta> {
        let mut routed = std::mem::take(&mut self.routed);
        self.splitter.finish(&mut routed);
        self.route(routed, true)
    }

    /// Whether the text so far ends inside a reasoning block.
    pub fn in_reasoning(&self) -> bool {
        self.splitter.in_reasoning()
    }

    pub fn stats(&self) -> ParseStats {
        let mut s = self.tools.as_ref().map(|t| t.stats).unwrap_or_default();
        s.dropped_after_turn_end = self.splitter.dropped_after_turn_end;
        s
    }

    fn route(&mut self, mut routed: Vec<Routed>, last: bool) -> Vec<ParsedDelta> {
        let mut out = Vec::new();
        for piece in routed.drain(..) {
            match piece {
                Routed::Reasoning(t) => out.push(ParsedDelta::Reasoning(t)),
                Routed::Content(t) => match &mut self.tools {
                    Some(p) => p.feed(&t, &mut out),
                    None => out.push(ParsedDelta::Content(t)),
                },
            }
        }
        if last {
            if let Some(p) = &mut self.tools {
                p.finish(&mut out);
            }
        }
        self.routed = routed; // keep the allocation
        out
    }
}

/// A whole message, folded from deltas.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ParsedMessage {
    pub content: String,
    pub reasoning: String,
    pub tool_calls: Vec<ParsedToolCall>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ParsedToolCall {
    pub name: String,
    /// A JSON object, as text.
    pub arguments: String,
}

impl ParsedMessage {
    pub fn apply(&mut self, delta: &ParsedDelta) {
        match delta {
            ParsedDelta::Content(t) => self.content.push_str(t),
            ParsedDelta::Reasoning(t) => self.reasoning.push_str(t),
            ParsedDelta::ToolCallStart { index, name } => {
                fold_tool_call(&mut self.tool_calls, *index, Some(name.clone()), "")
            }
            ParsedDelta::ToolCallArguments { index, fragment } => {
                fold_tool_call(&mut self.tool_calls, *index, None, fragment)
            }
        }
    }
}

/// Folds one piece of a streamed tool call into whole calls: `start` (the
/// name) opens call `index`, `fragment` extends its arguments. The one
/// fold of tool-call pieces, for parsed output and for engine events alike.
pub fn fold_tool_call(
    calls: &mut Vec<ParsedToolCall>,
    index: usize,
    start: Option<String>,
    fragment: &str,
) {
    if let Some(name) = start {
        debug_assert_eq!(index, calls.len(), "calls open in index order");
        calls.push(ParsedToolCall {
            name,
            arguments: String::new(),
        });
    }
    if let Some(call) = calls.get_mut(index) {
        call.arguments.push_str(fragment);
    }
}

/// Parses a whole output at once (the non-streaming path).
pub fn parse_complete(config: &OutputConfig, text: &str) -> (ParsedMessage, ParseStats) {
    let mut parser = OutputParser::new(config);
    let mut message = ParsedMessage::default();
    for d in parser.feed(text).iter().chain(parser.finish().iter()) {
        message.apply(d);
    }
    (message, parser.stats())
}
