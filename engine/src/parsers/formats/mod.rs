//! The tool-call wire formats. Each reads the body of a tool-call region
//! (the text after its start marker, up to its end marker or the end of the
//! message) and reports the calls in it so far.
//!
//! A scan of a prefix of a body must report a prefix of what the scan of
//! the whole body reports (same calls, same members, in order); the
//! streaming driver relies on it to emit each piece once.

mod gemma4;
mod hermes;
mod json_calls;
mod llama3_json;
mod mistral;
mod qwen3_coder;

use serde_json::Value;

/// A tool-call syntax, chosen by `--tool-call-parser` or from the template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolCallFormat {
    /// `<tool_call>{"name": .., "arguments": {..}}</tool_call>` (Qwen2.5, Qwen3, Hermes).
    Hermes,
    /// `<tool_call><function=NAME><parameter=KEY>VALUE</parameter></function></tool_call>`.
    Qwen3Coder,
    /// `{"name": .., "parameters": {..}}` as the whole message, or after `<|python_tag|>`.
    Llama3Json,
    /// `[TOOL_CALLS][{"name": .., "arguments": {..}}]` or `[TOOL_CALLS]NAME[ARGS]{..}`.
    Mistral,
    /// `<|tool_call>call:NAME{key:<|"|>text<|"|>,n:3}<tool_call|>`.
    Gemma4,
}

/// An argument value as written: JSON, or text (XML-style formats) that the
/// schema decides the type of.
#[derive(Debug, Clone, PartialEq)]
pub enum RawArg {
    Json(Value),
    Text(String),
}

/// One call found in a body.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallScan {
    pub name: Option<String>,
    /// Complete arguments in the order written (repeats included: the
    /// driver applies the duplicate rule).
    pub members: Vec<(String, RawArg)>,
    /// No more members will come for this call.
    pub closed: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct BodyScan {
    pub calls: Vec<CallScan>,
    /// The body is plainly not a tool call (only for formats whose region
    /// may start without a dedicated marker, e.g. a bare `{`).
    pub not_a_call: bool,
    /// Whole call objects dropped because they repeated the previous one.
    pub repeated_calls: usize,
}

/// How a format's regions are delimited in the text.
pub struct RegionSyntax {
    /// Markers that open a region anywhere in the content.
    pub starts: &'static [&'static str],
    /// Markers that open a region only at the start of the message (after
    /// whitespace); they stay part of the body.
    pub starts_at_beginning: &'static [&'static str],
    /// The marker that closes a region; `None`: the region runs to the end.
    pub end: Option<&'static str>,
    /// Characters after which a body may have grown a complete piece:
    /// rescanning on other deltas finds nothing new.
    pub boundaries: &'static [u8],
}

impl ToolCallFormat {
    pub const ALL: [ToolCallFormat; 5] = [
        ToolCallFormat::Hermes,
        ToolCallFormat::Qwen3Coder,
        ToolCallFormat::Llama3Json,
        ToolCallFormat::Mistral,
        ToolCallFormat::Gemma4,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ToolCallFormat::Hermes => "hermes",
            ToolCallFormat::Qwen3Coder => "qwen3_coder",
            ToolCallFormat::Llama3Json => "llama3_json",
            ToolCallFormat::Mistral => "mistral",
            ToolCallFormat::Gemma4 => "gemma4",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The format a chat template writes tool calls in, from the markers
    /// it contains; templates without any known marker get `hermes`, the
    /// format the grammar forces calls in.
    pub fn detect(template: &str) -> Self {
        if template.contains("<|tool_call>") {
            ToolCallFormat::Gemma4
        } else if template.contains("[TOOL_CALLS]") {
            ToolCallFormat::Mistral
        } else if template.contains("<function=") && template.contains("<parameter=") {
            ToolCallFormat::Qwen3Coder
        } else if template.contains("<tool_call>") {
            ToolCallFormat::Hermes
        } else if template.contains("<|python_tag|>")
            || (template.contains("<|start_header_id|>") && template.contains("\"parameters\""))
        {
            ToolCallFormat::Llama3Json
        } else {
            ToolCallFormat::Hermes
        }
    }

    pub fn regions(self) -> RegionSyntax {
        match self {
            ToolCallFormat::Hermes => RegionSyntax {
                starts: &["<tool_call>"],
                starts_at_beginning: &[],
                end: Some("</tool_call>"),
                boundaries: b",}]",
            },
            ToolCallFormat::Qwen3Coder => RegionSyntax {
                starts: &["<tool_call>"],
                starts_at_beginning: &[],
                end: Some("</tool_call>"),
                boundaries: b">",
            },
            ToolCallFormat::Llama3Json => RegionSyntax {
                starts: &["<|python_tag|>"],
                starts_at_beginning: &["{"],
                end: None,
                boundaries: b",}]",
            },
            ToolCallFormat::Mistral => RegionSyntax {
                starts: &["[TOOL_CALLS]"],
                starts_at_beginning: &[],
                end: None,
                boundaries: b",}]",
            },
            ToolCallFormat::Gemma4 => RegionSyntax {
                starts: &["<|tool_call>"],
                starts_at_beginning: &[],
                end: Some("<tool_call|>"),
                boundaries: b",}]>",
            },
        }
    }

    /// Reads a region body; `complete`: the region has ended.
    pub fn scan(self, body: &str, complete: bool) -> BodyScan {
        match self {
            ToolCallFormat::Hermes => hermes::scan(body, complete),
            ToolCallFormat::Qwen3Coder => qwen3_coder::scan(body, complete),
            ToolCallFormat::Llama3Json => llama3_json::scan(body, complete),
            ToolCallFormat::Mistral => mistral::scan(body, complete),
            ToolCallFormat::Gemma4 => gemma4::scan(body, complete),
        }
    }
}
