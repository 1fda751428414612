//! What a chat template can take, found by rendering it, not by reading
//! its source: whether it iterates over content parts or prints `content`
//! as a string, and whether it shows tools and tool calls at all.
//!
//! Real clients send content as a string or as a list of parts, and
//! templates are written for one or the other (vLLM detects the same from
//! the template's syntax tree). A probe render decides it per template, so
//! a template that reads parts gets parts and one that concatenates
//! strings gets a string.

use serde_json::{json, Value};

/// How a template reads `message.content`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentForm {
    /// `content` is printed as a string: parts are joined before rendering.
    Text,
    /// The template loops over parts (`{% for part in message.content %}`):
    /// parts stay parts; `strings` says whether it takes a plain string too.
    Parts { strings: bool },
}

/// What the template takes, probed once when it is compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TemplateTraits {
    pub content: ContentForm,
    /// The template shows the offered tools; if not, they are listed in
    /// afm's plain-text form (`plain_tools`).
    pub shows_tools: bool,
    /// The template shows the assistant's past calls; if not, calls and
    /// tool results are written in the plain-text form.
    pub shows_calls: bool,
}

const TEXT_A: &str = "afm-probe-text-a";
const TEXT_B: &str = "afm-probe-text-b";
const TOOL: &str = "afm_probe_tool";
const CALL: &str = "afm_probe_call";

impl TemplateTraits {
    /// Probes a template through `render(messages, tools)`, which renders
    /// exactly what the template sees (no normalization).
    pub fn probe(render: impl Fn(&[Value], Option<&[Value]>) -> Option<String>) -> Self {
        let user = |content: Value| vec![json!({"role": "user", "content": content})];
        let strings = render(&user(json!(TEXT_A)), None).is_some_and(|out| out.contains(TEXT_A));
        let parts = json!([{"type": "text", "text": TEXT_A}, {"type": "text", "text": TEXT_B}]);
        // A template that prints the list prints its repr, keys included.
        let iterates_parts = render(&user(parts), None).is_some_and(|out| {
            out.contains(TEXT_A)
                && out.contains(TEXT_B)
                && !out.contains("\"type\"")
                && !out.contains("'type'")
        });
        let content = if iterates_parts {
            ContentForm::Parts { strings }
        } else {
            ContentForm::Text
        };
        let text = |s: &str| match content {
            ContentForm::Parts { strings: false } => json!([{"type": "text", "text": s}]),
            _ => json!(s),
        };
        let tool = json!({"type": "function", "function": {
            "name": TOOL, "description": "probe", "parameters": {"type": "object", "properties": {}}}});
        let shows_tools = render(
            &[json!({"role": "user", "content": text("x")})],
            Some(std::slice::from_ref(&tool)),
        )
        .is_some_and(|out| out.contains(TOOL));
        let call = json!({"id": "call_0", "type": "function",
            "function": {"name": CALL, "arguments": "{}"}});
        let shows_calls = render(
            &[
                json!({"role": "user", "content": text("x")}),
                json!({"role": "assistant", "content": text(""), "tool_calls": [call]}),
                json!({"role": "tool", "tool_call_id": "call_0", "content": text("y")}),
            ],
            Some(&[tool]),
        )
        .is_some_and(|out| out.contains(CALL));
        TemplateTraits {
            content,
            shows_tools,
            shows_calls,
        }
    }
}
