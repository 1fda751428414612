//! What a request's output must match, as the request states it; the
//! grammar module compiles it. Its own module, so requests carry it
//! without depending on the compiler.

use serde_json::Value;

use crate::runtime::tool_spec::ToolSpec;

/// What a request's output must match.
#[derive(Debug, Clone, PartialEq)]
pub enum Constraint {
    /// Any JSON object.
    JsonObject,
    /// Valid against a JSON Schema.
    JsonSchema(Value),
    /// A call of one of these tools, in the hermes format
    /// (`<tool_call>{"name": .., "arguments": {..}}</tool_call>`), with
    /// arguments valid against the tool's parameters.
    ToolCall(Vec<ToolSpec>),
    /// Either free text without a call, or text and then one valid call
    /// of these tools (`strict: true` tools under `tool_choice: auto`).
    MaybeToolCall(Vec<ToolSpec>),
    /// Free text that never contains one of these markers
    /// (`tool_choice: "none"`: the markers open a call in the model's
    /// tool-call format).
    NoToolCalls(Vec<String>),
}

impl Constraint {
    /// The request parameter whose promise only an enforced grammar keeps
    /// (served unconstrained, its reply could break it): `None` for
    /// `tool_choice: "none"`, which the output parser already keeps.
    pub fn needs_enforcing(&self) -> Option<&'static str> {
        match self {
            Constraint::JsonObject | Constraint::JsonSchema(_) => Some("response_format"),
            Constraint::ToolCall(_) => Some("tool_choice"),
            Constraint::MaybeToolCall(_) => Some("tools"),
            Constraint::NoToolCalls(_) => None,
        }
    }
}
