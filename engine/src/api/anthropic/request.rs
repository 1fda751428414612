//! Anthropic Messages requests read into the engine's request: `system`,
//! content blocks (`text`, `tool_use`, `tool_result`, `thinking`) turned
//! into the chat template's messages, `tools` with `input_schema`,
//! `tool_choice` (auto / any / tool / none), `thinking` (enabled with a
//! budget, adaptive with `output_config.effort`'s, disabled),
//! `stop_sequences`, `output_config.format` (structured output),
//! `context_management`'s thinking edit. What Claude Code sends besides
//! (`cache_control`, `metadata`, deferred tools, system turns among the
//! messages) is read or accepted as `docs/agents.md` states.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::api::error::ApiError;
use crate::api::output_format::output_format;
use crate::api::sampling::Sampling;
use crate::api::thinking::{open_reasoning, Thinking};
use crate::api::wire::{read_body, string_field};
use crate::loading::chat_template::{media_kind, media_refused};
use crate::runtime::{GenerationRequest, Priority, Prompt, ToolChoice, ToolSpec};

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
    /// Structured output: `{"format": {"type": "json_schema", "schema": ..}}`,
    /// and `effort` (adaptive thinking's budget).
    pub output_config: Option<Value>,
    /// `{"edits": [{"type": "clear_thinking_20251015", "keep": ..}]}`.
    pub context_management: Option<Value>,
}

/// `output_config.effort` levels and the reasoning tokens adaptive thinking
/// may spend at each (`max`: no budget but max_tokens). Anthropic's
/// default is `high`.
const EFFORT_BUDGETS: &[(&str, Option<usize>)] = &[
    ("low", Some(1024)),
    ("medium", Some(4096)),
    ("high", Some(16384)),
    ("xhigh", Some(32768)),
    ("max", None),
];

/// How a reply shows its thinking (`thinking.display`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ThinkingDisplay {
    /// The text in `thinking` blocks.
    #[default]
    Shown,
    /// `omitted`: thinking blocks with empty text (the model still thinks).
    Omitted,
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
        let thinking_budget = self.thinking(&mut template_kwargs)?;
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
                messages: clear_thinking(
                    template_messages(self.system.as_ref(), &self.messages)?,
                    self.context_management.as_ref(),
                )?,
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
            priority: Priority::Interactive,
        })
    }
}

impl MessagesRequest {
    /// How the reply shows thinking.
    pub fn thinking_display(&self) -> ThinkingDisplay {
        match self
            .thinking
            .as_ref()
            .and_then(|t| t.get("display"))
            .and_then(Value::as_str)
        {
            Some("omitted") => ThinkingDisplay::Omitted,
            _ => ThinkingDisplay::Shown,
        }
    }

    /// `thinking` as the template's switch, and the reasoning budget:
    /// `enabled` gives its own, `adaptive` takes `output_config.effort`'s
    /// (the model still decides whether to think; a template without a
    /// thinking mode is unaffected).
    fn thinking(
        &self,
        template_kwargs: &mut Map<String, Value>,
    ) -> Result<Option<usize>, ApiError> {
        let effort = self.effort()?;
        let Some(thinking) = self.thinking.as_ref() else {
            return Ok(None);
        };
        if let Some(display) = thinking.get("display") {
            if !matches!(display.as_str(), Some("summarized" | "omitted")) {
                return Err(ApiError::invalid_param(
                    "thinking.display",
                    format!("must be 'summarized' or 'omitted', not {display}"),
                ));
            }
        }
        match thinking.get("type").and_then(Value::as_str) {
            Some("enabled") => {
                let budget = thinking
                    .get("budget_tokens")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| {
                        ApiError::invalid_param(
                            "thinking.budget_tokens",
                            "is required when thinking is enabled",
                        )
                    })?;
                if self.max_tokens.is_some_and(|m| budget >= u64::from(m)) {
                    return Err(ApiError::invalid_param(
                        "thinking.budget_tokens",
                        "must be less than max_tokens",
                    ));
                }
                Thinking::On(None).apply(template_kwargs);
                Ok(Some(budget as usize))
            }
            Some("adaptive") => {
                Thinking::On(None).apply(template_kwargs);
                Ok(effort)
            }
            Some("disabled") => {
                Thinking::Off.apply(template_kwargs);
                Ok(None)
            }
            Some(other) => Err(ApiError::invalid_param(
                "thinking.type",
                format!("'{other}' is not one of enabled, adaptive, disabled"),
            )),
            None => Err(ApiError::invalid_param(
                "thinking.type",
                "is required (enabled, adaptive or disabled)",
            )),
        }
    }

    /// `output_config.effort`'s reasoning budget (default `high`).
    fn effort(&self) -> Result<Option<usize>, ApiError> {
        let effort = self.output_config.as_ref().and_then(|c| c.get("effort"));
        let name = match effort {
            None | Some(Value::Null) => "high",
            Some(Value::String(e)) => e.as_str(),
            Some(other) => {
                return Err(ApiError::invalid_param(
                    "output_config.effort",
                    format!("must be a string, not {other}"),
                ))
            }
        };
        EFFORT_BUDGETS
            .iter()
            .find(|(level, _)| *level == name)
            .map(|(_, budget)| *budget)
            .ok_or_else(|| {
                let levels: Vec<&str> = EFFORT_BUDGETS.iter().map(|(l, _)| *l).collect();
                ApiError::invalid_param(
                    "output_config.effort",
                    format!("'{name}' is not one of {}", levels.join(", ")),
                )
            })
    }
}

/// `context_management.edits`: `clear_thinking_20251015` keeps the
/// thinking of the last `keep` assistant turns (`"all"`, `{"type":
/// "all"}`, or `{"type": "thinking_turns", "value": N}`; default 1) and
/// clears the rest. Other edits clear what a context far larger than this
/// server's models' would hold, and are refused by name rather than
/// silently skipped.
fn clear_thinking(
    mut messages: Vec<Value>,
    management: Option<&Value>,
) -> Result<Vec<Value>, ApiError> {
    let Some(management) = management else {
        return Ok(messages);
    };
    let edits = match management.get("edits") {
        None | Some(Value::Null) => return Ok(messages),
        Some(Value::Array(edits)) => edits,
        Some(_) => {
            return Err(ApiError::invalid_param(
                "context_management.edits",
                "must be an array of edits",
            ))
        }
    };
    for (i, edit) in edits.iter().enumerate() {
        let at = format!("context_management.edits[{i}]");
        match edit.get("type").and_then(Value::as_str) {
            Some("clear_thinking_20251015") => {}
            Some(other) => {
                return Err(ApiError::invalid_param(
                    &format!("{at}.type"),
                    format!(
                        "the edit '{other}' is not supported by this server \
                         (clear_thinking_20251015 is)"
                    ),
                ))
            }
            None => {
                return Err(ApiError::invalid_param(
                    &format!("{at}.type"),
                    "is required",
                ))
            }
        }
        let keep = match edit.get("keep") {
            None | Some(Value::Null) => Some(1),
            Some(Value::String(s)) if s == "all" => None,
            Some(k) if k.get("type").and_then(Value::as_str) == Some("all") => None,
            Some(k) if k.get("type").and_then(Value::as_str) == Some("thinking_turns") => {
                Some(k.get("value").and_then(Value::as_u64).ok_or_else(|| {
                    ApiError::invalid_param(&format!("{at}.keep.value"), "must be a whole number")
                })? as usize)
            }
            Some(other) => {
                return Err(ApiError::invalid_param(
                    &format!("{at}.keep"),
                    format!("must be \"all\" or {{\"type\": \"thinking_turns\", \"value\": N}}, not {other}"),
                ))
            }
        };
        if let Some(keep) = keep {
            let assistant: Vec<usize> = (0..messages.len())
                .filter(|&k| messages[k]["role"] == "assistant")
                .collect();
            let cleared = assistant.len().saturating_sub(keep);
            for &k in &assistant[..cleared] {
                if let Some(m) = messages[k].as_object_mut() {
                    m.remove("reasoning_content");
                }
            }
        }
    }
    Ok(messages)
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
            // Claude Code sends its environment as a system turn among the
            // messages; the template places it as it places any. Alone, with
            // no user turn, it is no conversation: refused below.
            Some("system") => out.push(json!({
                "role": "system",
                "content": text_of(&Value::Array(blocks), &format!("{at}.content"))?,
            })),
            _ => {
                return Err(ApiError::invalid_param(
                    &format!("{at}.role"),
                    "must be 'user', 'assistant' or 'system'",
                ))
            }
        }
    }
    let user = |m: &Value| m["role"] == "user" || m["role"] == "tool";
    if !out.iter().any(user) {
        let first_system = messages
            .iter()
            .position(|m| m.get("role").and_then(Value::as_str) == Some("system"));
        if let Some(i) = first_system {
            return Err(ApiError::invalid_param(
                &format!("messages[{i}].role"),
                "a system turn among the messages needs a user turn with it",
            ));
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
            // Shown thinking comes back as its text; omitted thinking
            // only in the signature this server sealed it in.
            Some("thinking") => {
                let text = string_field(b, "thinking", &here)?;
                let sealed = b
                    .get("signature")
                    .and_then(Value::as_str)
                    .and_then(open_reasoning);
                match (text.is_empty(), sealed) {
                    (true, Some(sealed)) => reasoning.push(sealed),
                    _ => reasoning.push(text),
                }
            }
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

/// `tools`: each a custom tool with `name` and `input_schema`. A tool with
/// `defer_loading: true` is one the client loads only when its tool search
/// finds it: it is left out of the prompt, as Anthropic leaves it.
fn tool_specs(tools: &[Value]) -> Result<Vec<ToolSpec>, ApiError> {
    tools
        .iter()
        .enumerate()
        .filter(|(_, t)| t.get("defer_loading").and_then(Value::as_bool) != Some(true))
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
        Some(other) => Err(ApiError::invalid_param(
            "tool_choice.type",
            format!("'{other}' is not one of auto, any, tool, none"),
        )),
        None => Err(ApiError::invalid_param(
            "tool_choice.type",
            "is required (auto, any, tool or none)",
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

    /// Claude Code's first request, as it sends it (texts shortened).
    fn claude_code() -> Value {
        json!({
            "model": "m",
            "max_tokens": 32000,
            "stream": true,
            "metadata": {"user_id": "{\"device_id\":\"d\"}"},
            "thinking": {"type": "adaptive", "display": "omitted"},
            "output_config": {"effort": "high"},
            "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
            "system": [
                {"type": "text", "text": "x-anthropic-billing-header: cc_version=2"},
                {"type": "text", "text": "You are a Claude agent.", "cache_control": {"type": "ephemeral"}}
            ],
            "tools": [
                {"name": "Bash", "description": "Run a command.", "input_schema": {"type": "object"}},
                {"name": "DeferredToolPlaceholder", "description": "x", "input_schema": {"type": "object"}, "defer_loading": true}
            ],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "List the files here.", "cache_control": {"type": "ephemeral"}}]},
                {"role": "system", "content": "# Environment"}
            ]
        })
    }

    #[test]
    fn claude_codes_request_is_served_with_adaptive_thinking_at_its_effort() {
        let g = read(claude_code()).unwrap();
        let Prompt::Chat {
            messages,
            template_kwargs,
        } = &g.prompt
        else {
            panic!("a chat prompt")
        };
        assert_eq!(template_kwargs["enable_thinking"], true);
        assert_eq!(g.thinking_budget, Some(16384), "high effort's budget");
        let roles: Vec<&str> = messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["system", "user", "system"]);
        let names: Vec<&str> = g.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["Bash"], "deferred tools are left out");
        let mut low = claude_code();
        low["output_config"]["effort"] = json!("low");
        assert_eq!(read(low).unwrap().thinking_budget, Some(1024));
        let r = MessagesRequest::from_json(claude_code().to_string().as_bytes()).unwrap();
        assert_eq!(r.thinking_display(), ThinkingDisplay::Omitted);
    }

    #[test]
    fn clear_thinking_keeps_the_last_turns_thinking() {
        let turn = |t: &str| {
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": t, "signature": ""},
                {"type": "text", "text": "ok"}
            ]})
        };
        let user = json!({"role": "user", "content": "go"});
        let body = |keep: Value| {
            json!({
                "max_tokens": 10,
                "messages": [user, turn("one"), user, turn("two"), user],
                "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": keep}]}
            })
        };
        let reasoning = |keep: Value| -> Vec<Value> {
            let Prompt::Chat { messages, .. } = read(body(keep)).unwrap().prompt else {
                panic!("a chat prompt")
            };
            messages
                .iter()
                .filter(|m| m["role"] == "assistant")
                .map(|m| m.get("reasoning_content").cloned().unwrap_or(Value::Null))
                .collect()
        };
        assert_eq!(reasoning(json!("all")), [json!("one"), json!("two")]);
        assert_eq!(
            reasoning(json!({"type": "thinking_turns", "value": 1})),
            [Value::Null, json!("two")]
        );
        assert_eq!(
            read(json!({"max_tokens": 5, "messages": [user], "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]}}))
                .unwrap_err()
                .param
                .as_deref(),
            Some("context_management.edits[0].type")
        );
    }

    #[test]
    fn omitted_thinking_comes_back_through_its_signature() {
        let sealed = crate::api::thinking::seal_reasoning("think it over");
        let g = read(json!({
            "max_tokens": 10,
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "", "signature": sealed}, {"type": "text", "text": "Hello"}]},
                {"role": "user", "content": "again"}
            ]
        }))
        .unwrap();
        let Prompt::Chat { messages, .. } = &g.prompt else {
            panic!("a chat prompt")
        };
        assert_eq!(messages[1]["reasoning_content"], "think it over");
    }

    #[test]
    fn refusals_speak_plain_words() {
        let user = json!([{"role": "user", "content": "hi"}]);
        for body in [
            json!({"max_tokens": 5, "messages": user, "thinking": {"type": "sometimes"}}),
            json!({"max_tokens": 5, "messages": user, "thinking": {}}),
            json!({"max_tokens": 5, "messages": user, "tool_choice": {"type": "sometimes"}}),
            json!({"max_tokens": 5, "messages": user, "tool_choice": {}}),
            json!({"max_tokens": 5, "messages": user, "output_config": {"effort": "extreme"}}),
            json!({"max_tokens": 5, "messages": user, "output_config": {"format": {"type": "xml"}}}),
            json!({"max_tokens": 5, "messages": user, "output_config": {"format": {}}}),
        ] {
            let e = read(body.clone()).unwrap_err();
            assert!(
                !e.message.contains("Some(") && !e.message.contains("None"),
                "{body}: {}",
                e.message
            );
        }
    }
}
