//! OpenAI Responses requests read into the engine's request: `input` as
//! text or items (messages, `function_call`, `function_call_output`;
//! `reasoning` items are context the template does not take), `instructions`,
//! function `tools` (strict unless they say otherwise, as in OpenAI's API),
//! `tool_choice`, `text.format`, `max_output_tokens`.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::api::error::ApiError;
use crate::api::output_format::output_format;
use crate::api::sampling::Sampling;
use crate::api::thinking::Thinking;
use crate::api::tool_choice::tool_choice;
use crate::api::wire::{present, read_body, string_field};
use crate::loading::chat_template::{media_kind, media_refused};
use crate::runtime::{GenerationRequest, Prompt, ToolSpec};

/// `POST /v1/responses` body. Unknown fields are ignored.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct ResponsesRequest {
    pub model: Option<String>,
    pub input: Option<Value>,
    pub instructions: Option<String>,
    pub max_output_tokens: Option<u32>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub top_logprobs: Option<u32>,
    pub stream: bool,
    pub tools: Option<Vec<Value>>,
    pub tool_choice: Option<Value>,
    /// `false`: at most one function call.
    pub parallel_tool_calls: Option<bool>,
    pub text: Option<Value>,
    pub reasoning: Option<Value>,
    pub previous_response_id: Option<String>,
    pub chat_template_kwargs: Option<Map<String, Value>>,
}

/// The engine's parameter names as Responses calls them.
pub const PARAM_NAMES: &[(&str, &str)] = &[
    ("max_tokens", "max_output_tokens"),
    ("messages", "input"),
    ("response_format", "text.format"),
];

impl ResponsesRequest {
    pub fn from_json(body: &[u8]) -> Result<Self, ApiError> {
        read_body(body)
    }

    pub fn to_generation(&self) -> Result<GenerationRequest, ApiError> {
        if self.previous_response_id.is_some() {
            return Err(ApiError::invalid_param(
                "previous_response_id",
                "this server stores no responses; send the conversation as input items",
            ));
        }
        let mut template_kwargs = self.chat_template_kwargs.clone().unwrap_or_default();
        Thinking::from_effort(
            self.reasoning.as_ref().and_then(|r| r.get("effort")),
            "reasoning.effort",
        )?
        .apply(&mut template_kwargs);
        let mut messages = Vec::new();
        if let Some(i) = &self.instructions {
            messages.push(json!({"role": "system", "content": i}));
        }
        match &self.input {
            Some(Value::String(s)) => messages.push(json!({"role": "user", "content": s})),
            Some(Value::Array(items)) => input_items(items, &mut messages)?,
            _ => {
                return Err(ApiError::invalid_param(
                    "input",
                    "must be a string or an array of input items",
                ))
            }
        }
        if messages.is_empty() {
            return Err(ApiError::invalid_param("input", "must not be empty"));
        }
        let constraint = match self.text.as_ref().and_then(|t| t.get("format")) {
            None => None,
            Some(format) => output_format(
                format,
                "text.format",
                format.get("schema"),
                "text.format.schema",
            )?,
        };
        let sampling = Sampling {
            temperature: self.temperature,
            top_p: self.top_p,
            max_temperature: 2.0,
            ..Default::default()
        }
        .read(Vec::new())?;
        Ok(GenerationRequest {
            prompt: Prompt::Chat {
                messages,
                template_kwargs,
            },
            tools: tool_specs(self.tools.as_deref().unwrap_or_default())?,
            tool_choice: tool_choice(self.tool_choice.as_ref())?,
            sampling,
            max_tokens: self.max_output_tokens.map(|n| n as usize),
            stop: Vec::new(),
            logprobs: self.top_logprobs.map(|k| k as usize),
            constraint,
            thinking_budget: None,
            parallel_tool_calls: self.parallel_tool_calls.unwrap_or(true),
        })
    }
}

/// Input items as template messages; consecutive function calls join the
/// assistant turn before them.
fn input_items(items: &[Value], out: &mut Vec<Value>) -> Result<(), ApiError> {
    for (i, item) in items.iter().enumerate() {
        let at = format!("input[{i}]");
        let kind = item.get("type").and_then(Value::as_str);
        match kind {
            None | Some("message") => {
                let role = item.get("role").and_then(Value::as_str);
                let role = match role {
                    Some(r @ ("user" | "system" | "developer" | "assistant")) => r,
                    _ => {
                        return Err(ApiError::invalid_param(
                            &format!("{at}.role"),
                            "must be user, system, developer or assistant",
                        ))
                    }
                };
                let content = content_text(item.get("content"), &format!("{at}.content"))?;
                out.push(json!({"role": role, "content": content}));
            }
            Some("function_call") => {
                let call = json!({
                    "id": string_field(item, "call_id", &at)?,
                    "type": "function",
                    "function": {
                        "name": string_field(item, "name", &at)?,
                        "arguments": string_field(item, "arguments", &at)?,
                    },
                });
                match out.last_mut() {
                    Some(m) if m["role"] == "assistant" => {
                        if !m["tool_calls"].is_array() {
                            m["tool_calls"] = json!([]);
                        }
                        m["tool_calls"].as_array_mut().expect("array").push(call);
                    }
                    _ => {
                        out.push(json!({"role": "assistant", "content": "", "tool_calls": [call]}))
                    }
                }
            }
            Some("function_call_output") => {
                let output = content_text(item.get("output"), &format!("{at}.output"))?;
                out.push(json!({
                    "role": "tool",
                    "tool_call_id": string_field(item, "call_id", &at)?,
                    "content": output,
                }));
            }
            // Earlier reasoning is context templates drop anyway.
            Some("reasoning") => {}
            Some(other) => {
                return Err(ApiError::invalid_param(
                    &format!("{at}.type"),
                    format!("input items of type '{other}' are not supported by this server"),
                ))
            }
        }
    }
    Ok(())
}

/// A message's content: a string, or text parts (`input_text`,
/// `output_text`) joined.
fn content_text(content: Option<&Value>, at: &str) -> Result<String, ApiError> {
    match content {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::new();
            for (j, p) in parts.iter().enumerate() {
                let here = format!("{at}[{j}]");
                match p.get("type").and_then(Value::as_str) {
                    Some("input_text" | "output_text" | "text") => {
                        texts.push(string_field(p, "text", &here)?)
                    }
                    // An earlier reply's refusal, sent back as history.
                    Some("refusal") => texts.push(string_field(p, "refusal", &here)?),
                    Some(other) => {
                        return Err(match media_kind(other) {
                            Some(media) => media_refused(&here, other, media).into(),
                            None => ApiError::invalid_param(
                                &format!("{here}.type"),
                                format!(
                                    "content of type '{other}' is not supported by this server"
                                ),
                            ),
                        })
                    }
                    None => {
                        return Err(ApiError::invalid_param(
                            &format!("{here}.type"),
                            "is required",
                        ))
                    }
                }
            }
            Ok(texts.join("\n"))
        }
        _ => Err(ApiError::invalid_param(
            at,
            "must be a string or an array of text parts",
        )),
    }
}

/// Function tools (`{"type": "function", "name", "parameters", "strict"}`).
fn tool_specs(tools: &[Value]) -> Result<Vec<ToolSpec>, ApiError> {
    tools
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let at = format!("tools[{i}]");
            match t.get("type").and_then(Value::as_str) {
                Some("function") => {}
                other => {
                    return Err(ApiError::invalid_param(
                        &format!("{at}.type"),
                        match other {
                            Some(t) => format!(
                                "tools of type '{t}' are not supported by this server \
                                 (function tools are)"
                            ),
                            None => "is required".to_string(),
                        },
                    ))
                }
            }
            Ok(ToolSpec {
                name: string_field(t, "name", &at)?,
                description: t
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                parameters: present(t, "parameters")
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object"})),
                strict: t.get("strict").and_then(Value::as_bool).unwrap_or(true),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(body: Value) -> Result<GenerationRequest, ApiError> {
        ResponsesRequest::from_json(body.to_string().as_bytes())?.to_generation()
    }

    #[test]
    fn every_null_field_reads_as_absent() {
        let base = json!({"input": "hi"});
        crate::api::wire::assert_nulls_mean_absent::<ResponsesRequest, _>(base, &["input"], |b| {
            ResponsesRequest::from_json(b)?.to_generation()
        });
    }

    #[test]
    fn items_of_a_tool_round_trip_become_template_messages() {
        let g = read(json!({
            "instructions": "Be brief.",
            "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "18C"}
            ],
            "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
            "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}},
            "max_output_tokens": 9
        }))
        .unwrap();
        let Prompt::Chat { messages, .. } = &g.prompt else {
            panic!("a chat prompt")
        };
        let roles: Vec<&str> = messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool"]);
        assert_eq!(messages[2]["tool_calls"][0]["id"], "call_1");
        assert!(g.tools[0].strict, "function tools are strict by default");
        assert_eq!(g.max_tokens, Some(9));
        assert!(g.constraint.is_some());
    }

    #[test]
    fn bad_requests_name_their_field() {
        let param = |body: Value| read(body).unwrap_err().param;
        assert_eq!(param(json!({})).as_deref(), Some("input"));
        assert_eq!(
            param(json!({"input": "hi", "previous_response_id": "resp_1"})).as_deref(),
            Some("previous_response_id")
        );
        assert_eq!(
            param(json!({"input": "hi", "tools": [{"type": "web_search"}]})).as_deref(),
            Some("tools[0].type")
        );
        assert_eq!(
            param(json!({"input": "hi", "text": {"format": {"type": "json_schema"}}})).as_deref(),
            Some("text.format.schema")
        );
    }
}
