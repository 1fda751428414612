//! Anthropic Messages requests read into the engine's request: `system`,
//! content blocks (`text`, `tool_use`, `tool_result`, `thinking`) turned
//! into the chat template's messages, `tools` with `input_schema`,
//! `tool_choice` (auto / any / tool / none), `thinking`, `stop_sequences`,
//! `output_config.format` (structured output).

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::api::error::ApiError;
use crate::api::output_format::output_format;
use crate::api::sampling::Sampling;
use crate::api::thinking::Thinking;
use crate::api::wire::{read_body, string_field};
use crate::loading::chat_template::{media_kind, media_refused};
use crate::runtime::{GenerationRequest, Prompt, ToolChoice, ToolSpec};

/// The engine's parameter names as Messages calls them.
pub const PARAM_NAMES: &[(&str, &str)] = &[("response_format", "output_config.format")];

/// `POST /v1/messages` body. Unknown fields are ignored.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct MessagesRequest {
    pub model: Option<String>,
    pub max_tokens: Option<u32>,
    pub messages: Vec<Value>,
    pub system: Option<Value>,
    pub stop_sequences: Option<Vec<String>>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub top_k: Option<i64>,
    pub stream: bool,
    pub tools: Option<Vec<Value>>,
    pub tool_choice: Option<Value>,
    pub thinking: Option<Value>,
    /// Structured output: `{"format": {"type": "json_schema", "schema": ..}}`.
    pub output_config: Option<Value>,
}

impl MessagesRequest {
    pub fn from_json(body: &[u8]) -> Result<Self, ApiError> {
        read_body(body)
    }

    /// The request the engine runs. `max_tokens` is required (as in
    /// Anthropic's API) unless only the prompt is wanted (`count_tokens`).
    pub fn to_generation(&self, needs_max_tokens: bool) -> Result<GenerationRequest, ApiError> {
        if needs_max_tokens && self.max_tokens.is_none() {
            return Err(ApiError::invalid_param("max_tokens", "is required"));
        }
        let mut template_kwargs = Map::new();
        let mut thinking_budget = None;
        match self
            .thinking
            .as_ref()
            .map(|t| (t.get("type").and_then(Value::as_str), t))
        {
            None => {}
            Some((Some("enabled"), t)) => {
                let budget = t
                    .get("budget_tokens")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| {
                        ApiError::invalid_param(
                            "thinking.budget_tokens",
                            "is required when enabled",
                        )
                    })?;
                if self.max_tokens.is_some_and(|m| budget >= u64::from(m)) {
                    return Err(ApiError::invalid_param(
                        "thinking.budget_tokens",
                        "must be less than max_tokens",
                    ));
                }
                thinking_budget = Some(budget as usize);
                Thinking::On(None).apply(&mut template_kwargs);
            }
            Some((Some("disabled"), _)) => Thinking::Off.apply(&mut template_kwargs),
            Some((other, _)) => {
                return Err(ApiError::invalid_param(
                    "thinking.type",
                    format!("unsupported value {other:?} (enabled, disabled)"),
                ))
            }
        }
        let tools = tool_specs(self.tools.as_deref().unwrap_or_default())?;
        let tool_choice = tool_choice(self.tool_choice.as_ref())?;
        let sampling = Sampling {
            temperature: self.temperature,
            top_p: self.top_p,
            top_k: self.top_k,
            max_temperature: 1.0,
            ..Default::default()
        }
        .read(Vec::new())?;
        Ok(GenerationRequest {
            prompt: Prompt::Chat {
                messages: template_messages(self.system.as_ref(), &self.messages)?,
                template_kwargs,
            },
            tools,
            tool_choice,
            sampling,
            max_tokens: self.max_tokens.map(|n| n as usize),
            stop: self.stop_sequences.clone().unwrap_or_default(),
            logprobs: None,
            constraint: match self.output_config.as_ref().and_then(|c| c.get("format")) {
                None | Some(Value::Null) => None,
                Some(format) => output_format(
                    format,
                    "output_config.format",
                    format.get("schema"),
                    "output_config.format.schema",
                )?,
            },
            thinking_budget,
            // `tool_choice: {"type": ..., "disable_parallel_tool_use": true}`.
            parallel_tool_calls: !self
                .tool_choice
                .as_ref()
                .and_then(|c| c.get("disable_parallel_tool_use"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
        })
    }
}

/// `system` and `messages` as the chat template's messages: text blocks
/// joined, `tool_result` blocks as `tool` messages (before the user's
/// text, as they answer the previous turn), `tool_use` as `tool_calls`,
/// `thinking` as `reasoning_content`.
fn template_messages(system: Option<&Value>, messages: &[Value]) -> Result<Vec<Value>, ApiError> {
    if messages.is_empty() {
        return Err(ApiError::invalid_param("messages", "must not be empty"));
    }
    let mut out = Vec::new();
    if let Some(system) = system {
        let text = match system {
            Value::String(s) => s.clone(),
            Value::Array(_) => text_of(system, "system")?,
            _ => {
                return Err(ApiError::invalid_param(
                    "system",
                    "must be a string or text blocks",
                ))
            }
        };
        out.push(json!({"role": "system", "content": text}));
    }
    for (i, m) in messages.iter().enumerate() {
        let at = format!("messages[{i}]");
        let role = m.get("role").and_then(Value::as_str);
        let blocks = match m.get("content") {
            Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
            Some(Value::Array(blocks)) => blocks.clone(),
            _ => {
                return Err(ApiError::invalid_param(
                    &format!("{at}.content"),
                    "must be a string or an array of content blocks",
                ))
            }
        };
        match role {
            Some("user") => user_turn(&blocks, &at, &mut out)?,
            Some("assistant") => out.push(assistant_turn(&blocks, &at)?),
            _ => {
                return Err(ApiError::invalid_param(
                    &format!("{at}.role"),
                    "must be 'user' or 'assistant'",
                ))
            }
        }
    }
    Ok(out)
}

fn user_turn(blocks: &[Value], at: &str, out: &mut Vec<Value>) -> Result<(), ApiError> {
    let mut text = Vec::new();
    for (j, b) in blocks.iter().enumerate() {
        let here = format!("{at}.content[{j}]");
        match b.get("type").and_then(Value::as_str) {
            Some("text") => text.push(string_field(b, "text", &here)?),
            Some("tool_result") => {
                let id = string_field(b, "tool_use_id", &here)?;
                let content = match b.get("content") {
                    None | Some(Value::Null) => String::new(),
                    Some(Value::String(s)) => s.clone(),
                    Some(blocks @ Value::Array(_)) => text_of(blocks, &format!("{here}.content"))?,
                    Some(_) => {
                        return Err(ApiError::invalid_param(
                            &format!("{here}.content"),
                            "must be a string or text blocks",
                        ))
                    }
                };
                out.push(json!({"role": "tool", "tool_call_id": id, "content": content}));
            }
            other => return Err(unsupported_block(other, &here)),
        }
    }
    if !text.is_empty() {
        out.push(json!({"role": "user", "content": text.join("\n")}));
    }
    Ok(())
}

fn assistant_turn(blocks: &[Value], at: &str) -> Result<Value, ApiError> {
    let (mut text, mut reasoning, mut calls) = (Vec::new(), Vec::new(), Vec::new());
    for (j, b) in blocks.iter().enumerate() {
        let here = format!("{at}.content[{j}]");
        match b.get("type").and_then(Value::as_str) {
            Some("text") => text.push(string_field(b, "text", &here)?),
            Some("thinking") => reasoning.push(string_field(b, "thinking", &here)?),
            Some("redacted_thinking") => {}
            Some("tool_use") => {
                let input = b.get("input").filter(|i| i.is_object()).ok_or_else(|| {
                    ApiError::invalid_param(&format!("{here}.input"), "must be an object")
                })?;
                calls.push(json!({
                    "id": string_field(b, "id", &here)?,
                    "type": "function",
                    "function": {
                        "name": string_field(b, "name", &here)?,
                        "arguments": input.to_string(),
                    },
                }));
            }
            other => return Err(unsupported_block(other, &here)),
        }
    }
    let mut m = json!({"role": "assistant", "content": text.join("\n")});
    if !reasoning.is_empty() {
        m["reasoning_content"] = reasoning.join("\n").into();
    }
    if !calls.is_empty() {
        m["tool_calls"] = calls.into();
    }
    Ok(m)
}

fn unsupported_block(kind: Option<&str>, at: &str) -> ApiError {
    if let Some((k, media)) = kind.and_then(|k| Some((k, media_kind(k)?))) {
        return media_refused(at, k, media).into();
    }
    ApiError::invalid_param(
        &format!("{at}.type"),
        match kind {
            Some(k) => format!("content blocks of type '{k}' are not supported by this server"),
            None => "is required".into(),
        },
    )
}

/// Text blocks' texts, joined.
fn text_of(blocks: &Value, at: &str) -> Result<String, ApiError> {
    let blocks = blocks.as_array().map(Vec::as_slice).unwrap_or_default();
    let mut parts = Vec::new();
    for (j, b) in blocks.iter().enumerate() {
        let here = format!("{at}[{j}]");
        match b.get("type").and_then(Value::as_str) {
            Some("text") => parts.push(string_field(b, "text", &here)?),
            other => return Err(unsupported_block(other, &here)),
        }
    }
    Ok(parts.join("\n"))
}

/// `tools`: each a custom tool with `name` and `input_schema`.
fn tool_specs(tools: &[Value]) -> Result<Vec<ToolSpec>, ApiError> {
    tools
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let at = format!("tools[{i}]");
            if let Some(kind) = t.get("type").and_then(Value::as_str) {
                if kind != "custom" {
                    return Err(ApiError::invalid_param(
                        &format!("{at}.type"),
                        format!("server tool '{kind}' is not supported by this server"),
                    ));
                }
            }
            let name = string_field(t, "name", &at)?;
            let schema = t
                .get("input_schema")
                .filter(|s| s.is_object())
                .ok_or_else(|| {
                    ApiError::invalid_param(&format!("{at}.input_schema"), "must be an object")
                })?;
            Ok(ToolSpec {
                name,
                description: t
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                parameters: schema.clone(),
                strict: t.get("strict").and_then(Value::as_bool) == Some(true),
            })
        })
        .collect()
}

/// `tool_choice`: `{"type": "auto" | "any" | "tool" | "none"}`.
fn tool_choice(choice: Option<&Value>) -> Result<ToolChoice, ApiError> {
    let Some(choice) = choice else {
        return Ok(ToolChoice::Auto);
    };
    match choice.get("type").and_then(Value::as_str) {
        Some("auto") => Ok(ToolChoice::Auto),
        Some("any") => Ok(ToolChoice::Required),
        Some("none") => Ok(ToolChoice::None),
        Some("tool") => Ok(ToolChoice::Named(string_field(
            choice,
            "name",
            "tool_choice",
        )?)),
        other => Err(ApiError::invalid_param(
            "tool_choice.type",
            format!("unsupported value {other:?} (auto, any, tool, none)"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(body: Value) -> Result<GenerationRequest, ApiError> {
        MessagesRequest::from_json(body.to_string().as_bytes())?.to_generation(true)
    }

    #[test]
    fn every_null_field_reads_as_absent() {
        let base = json!({"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]});
        crate::api::wire::assert_nulls_mean_absent::<MessagesRequest, _>(
            base,
            &["messages", "max_tokens"],
            |b| MessagesRequest::from_json(b)?.to_generation(true),
        );
    }

    #[test]
    fn a_tool_round_trip_becomes_template_messages() {
        let g = read(json!({
            "max_tokens": 10,
            "system": [{"type": "text", "text": "Be brief."}],
            "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "tool", "name": "get_weather"},
            "messages": [
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "use the tool", "signature": ""},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "18C"}]},
                    {"type": "text", "text": "And now?"}
                ]}
            ]
        }))
        .unwrap();
        let Prompt::Chat { messages, .. } = &g.prompt else {
            panic!("a chat prompt")
        };
        let roles: Vec<&str> = messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool", "user"]);
        assert_eq!(
            messages[2]["tool_calls"][0]["function"]["arguments"],
            r#"{"city":"Paris"}"#
        );
        assert_eq!(messages[2]["reasoning_content"], "use the tool");
        assert_eq!(messages[3]["tool_call_id"], "toolu_1");
        assert_eq!(messages[3]["content"], "18C");
        assert_eq!(g.tool_choice, ToolChoice::Named("get_weather".into()));
    }

    #[test]
    fn bad_requests_name_their_field() {
        let param = |body: Value| read(body).unwrap_err().param;
        let user = json!([{"role": "user", "content": "hi"}]);
        assert_eq!(
            param(json!({"messages": user})).as_deref(),
            Some("max_tokens")
        );
        assert_eq!(
            param(json!({"max_tokens": 5, "messages": user, "temperature": 1.5})).as_deref(),
            Some("temperature")
        );
        assert_eq!(
            param(json!({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]}))
                .as_deref(),
            Some("messages[0].role")
        );
        assert_eq!(
            param(json!({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}))
                .as_deref(),
            Some("messages[0].content[0].type")
        );
        assert_eq!(
            param(json!({"max_tokens": 5, "messages": user, "tool_choice": {"type": "sometimes"}}))
                .as_deref(),
            Some("tool_choice.type")
        );
    }
}
