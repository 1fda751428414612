//! OpenAI Responses requests read into the engine's request: `input` as
//! text or items (messages, `function_call`, `function_call_output`,
//! `reasoning` items whose `encrypted_content` this server wrote),
//! `instructions`, function `tools` (strict unless they say otherwise, as in
//! OpenAI's API) and `namespace` tools of them, hosted tools (left out:
//! this server runs none), `tool_choice`, `text.format`,
//! `max_output_tokens`. What Codex sends besides (`store`, `include`,
//! `prompt_cache_key`, `client_metadata`, `reasoning.summary`) is read or
//! accepted as `docs/agents.md` states.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::api::error::ApiError;
use crate::api::output_format::output_format;
use crate::api::sampling::Sampling;
use crate::api::thinking::{open_reasoning, Thinking};
use crate::api::tool_choice::tool_choice;
use crate::api::wire::{present, read_body, string_field};
use crate::loading::chat_template::{media_kind, media_refused};
use crate::runtime::{GenerationRequest, Priority, Prompt, ToolChoice, ToolSpec};

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
    /// `["reasoning.encrypted_content"]`: reasoning items carry their text
    /// for the client to send back (stateless reasoning, `store: false`).
    pub include: Option<Vec<String>>,
    /// Accepted: this server stores no responses either way.
    pub store: Option<bool>,
    /// Accepted: the prefix cache matches every prompt by its tokens, so
    /// requests of one key reuse each other's prefix without it.
    pub prompt_cache_key: Option<String>,
}

/// Tool types OpenAI runs on its side (`web_search`, ...): this server runs
/// none of them, so they are not offered to the model; a `tool_choice`
/// forcing one is refused.
pub const HOSTED_TOOLS: &[&str] = &[
    "web_search",
    "web_search_preview",
    "web_search_preview_2025_03_11",
    "file_search",
    "code_interpreter",
    "image_generation",
    "computer_use_preview",
    "mcp",
];

/// Flat names joining a namespace and its tool's name, as the model sees
/// them (Codex's own flat form, `multi_agent_v1__spawn_agent`).
const NAMESPACE_JOINER: &str = "__";

/// The function tools the model is offered under flat names, and the
/// namespace each came from, so a call comes back as the client named it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolNames {
    /// (flat name, namespace, name in the namespace).
    namespaced: Vec<(String, String, String)>,
}

impl ToolNames {
    /// The namespace and name a call of `flat` is reported with.
    pub fn split<'a>(&'a self, flat: &'a str) -> (Option<&'a str>, &'a str) {
        match self.namespaced.iter().find(|(f, _, _)| f == flat) {
            Some((_, ns, name)) => (Some(ns.as_str()), name.as_str()),
            None => (None, flat),
        }
    }

    /// The flat name of `name` in `namespace` (none: the name itself).
    fn join(namespace: Option<&str>, name: &str) -> String {
        match namespace {
            Some(ns) if !ns.is_empty() => format!("{ns}{NAMESPACE_JOINER}{name}"),
            _ => name.to_string(),
        }
    }
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

    /// Whether reasoning items carry `encrypted_content`.
    pub fn include_reasoning(&self) -> bool {
        self.include
            .as_deref()
            .unwrap_or_default()
            .iter()
            .any(|i| i == "reasoning.encrypted_content")
    }

    /// The tools' flat names and their namespaces.
    pub fn tool_names(&self) -> ToolNames {
        let mut names = ToolNames::default();
        for t in self.tools.as_deref().unwrap_or_default() {
            if t.get("type").and_then(Value::as_str) != Some("namespace") {
                continue;
            }
            let ns = t.get("name").and_then(Value::as_str).unwrap_or_default();
            for inner in t
                .get("tools")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default()
            {
                if let Some(name) = inner.get("name").and_then(Value::as_str) {
                    names.namespaced.push((
                        ToolNames::join(Some(ns), name),
                        ns.to_string(),
                        name.to_string(),
                    ));
                }
            }
        }
        names
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
            tool_choice: responses_tool_choice(self.tool_choice.as_ref())?,
            sampling,
            max_tokens: self.max_output_tokens.map(|n| n as usize),
            stop: Vec::new(),
            logprobs: self.top_logprobs.map(|k| k as usize),
            constraint,
            thinking_budget: None,
            parallel_tool_calls: self.parallel_tool_calls.unwrap_or(true),
            priority: Priority::Interactive,
        })
    }
}

/// Input items as template messages; consecutive function calls join the
/// assistant turn before them, and a reasoning item this server wrote
/// (`encrypted_content`, or plain `reasoning_text` content) becomes the
/// `reasoning_content` of the assistant turn it precedes.
fn input_items(items: &[Value], out: &mut Vec<Value>) -> Result<(), ApiError> {
    let mut reasoning: Option<String> = None;
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
                let mut m = json!({"role": role, "content": content});
                if role == "assistant" {
                    if let Some(r) = reasoning.take() {
                        m["reasoning_content"] = r.into();
                    }
                }
                out.push(m);
            }
            Some("function_call") => {
                let name = string_field(item, "name", &at)?;
                let namespace = item.get("namespace").and_then(Value::as_str);
                let call = json!({
                    "id": string_field(item, "call_id", &at)?,
                    "type": "function",
                    "function": {
                        "name": ToolNames::join(namespace, &name),
                        "arguments": string_field(item, "arguments", &at)?,
                    },
                });
                match out.last_mut() {
                    Some(m) if m["role"] == "assistant" && reasoning.is_none() => {
                        if !m["tool_calls"].is_array() {
                            m["tool_calls"] = json!([]);
                        }
                        m["tool_calls"].as_array_mut().expect("array").push(call);
                    }
                    _ => {
                        let mut m =
                            json!({"role": "assistant", "content": "", "tool_calls": [call]});
                        if let Some(r) = reasoning.take() {
                            m["reasoning_content"] = r.into();
                        }
                        out.push(m)
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
            Some("reasoning") => reasoning = reasoning_text(item),
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

/// A reasoning item's text: this server's `encrypted_content`, else its
/// `reasoning_text` parts; `None` when it holds neither (OpenAI's own
/// encrypted reasoning, a summary only), which the template then lacks.
fn reasoning_text(item: &Value) -> Option<String> {
    if let Some(text) = item
        .get("encrypted_content")
        .and_then(Value::as_str)
        .and_then(open_reasoning)
    {
        return Some(text);
    }
    let parts: Vec<&str> = item
        .get("content")
        .and_then(Value::as_array)?
        .iter()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some("reasoning_text"))
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n"))
}

/// `tool_choice`: the shared forms, and a hosted tool's type, which this
/// server cannot force.
fn responses_tool_choice(choice: Option<&Value>) -> Result<ToolChoice, ApiError> {
    if let Some(kind) = choice
        .and_then(|c| c.get("type"))
        .and_then(Value::as_str)
        .filter(|k| HOSTED_TOOLS.contains(k))
    {
        return Err(ApiError::invalid_param(
            "tool_choice",
            format!("forces the hosted tool '{kind}', which this server does not run"),
        ));
    }
    tool_choice(choice)
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

/// Function tools (`{"type": "function", "name", "parameters", "strict"}`),
/// the function tools of each `namespace` under their flat names, and no
/// hosted tool.
fn tool_specs(tools: &[Value]) -> Result<Vec<ToolSpec>, ApiError> {
    let mut specs = Vec::new();
    for (i, t) in tools.iter().enumerate() {
        let at = format!("tools[{i}]");
        match t.get("type").and_then(Value::as_str) {
            Some("function") => specs.push(function_spec(t, None, &at)?),
            Some("namespace") => {
                let ns = string_field(t, "name", &at)?;
                let inner = t.get("tools").and_then(Value::as_array).ok_or_else(|| {
                    ApiError::invalid_param(&format!("{at}.tools"), "must be an array of tools")
                })?;
                for (j, f) in inner.iter().enumerate() {
                    let here = format!("{at}.tools[{j}]");
                    match f.get("type").and_then(Value::as_str) {
                        Some("function") => specs.push(function_spec(f, Some(&ns), &here)?),
                        other => return Err(unsupported_tool(other, &here)),
                    }
                }
            }
            Some(kind) if HOSTED_TOOLS.contains(&kind) => {}
            other => return Err(unsupported_tool(other, &at)),
        }
    }
    Ok(specs)
}

fn function_spec(t: &Value, namespace: Option<&str>, at: &str) -> Result<ToolSpec, ApiError> {
    Ok(ToolSpec {
        name: ToolNames::join(namespace, &string_field(t, "name", at)?),
        description: t
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_string),
        parameters: present(t, "parameters")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object"})),
        strict: t.get("strict").and_then(Value::as_bool).unwrap_or(true),
    })
}

fn unsupported_tool(kind: Option<&str>, at: &str) -> ApiError {
    ApiError::invalid_param(
        &format!("{at}.type"),
        match kind {
            Some(t) => format!(
                "tools of type '{t}' are not supported by this server \
                 (function and namespace tools are; hosted tools are left out)"
            ),
            None => "is required".to_string(),
        },
    )
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
            param(json!({"input": "hi", "tools": [{"type": "computer"}]})).as_deref(),
            Some("tools[0].type")
        );
        assert_eq!(
            param(json!({"input": "hi", "tools": [{"type": "web_search"}], "tool_choice": {"type": "web_search"}}))
                .as_deref(),
            Some("tool_choice")
        );
        assert_eq!(
            param(json!({"input": "hi", "text": {"format": {"type": "json_schema"}}})).as_deref(),
            Some("text.format.schema")
        );
    }

    #[test]
    fn namespace_tools_are_offered_flat_and_hosted_tools_left_out() {
        let body = json!({
            "input": "hi",
            "tools": [
                {"type": "function", "name": "exec_command", "strict": false, "parameters": {"type": "object"}},
                {"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.", "tools": [
                    {"type": "function", "name": "spawn_agent", "strict": false, "parameters": {"type": "object"}}
                ]},
                {"type": "web_search", "external_web_access": false}
            ]
        });
        let g = read(body.clone()).unwrap();
        let names: Vec<&str> = g.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["exec_command", "multi_agent_v1__spawn_agent"]);
        let r = ResponsesRequest::from_json(body.to_string().as_bytes()).unwrap();
        let tool_names = r.tool_names();
        assert_eq!(
            tool_names.split("multi_agent_v1__spawn_agent"),
            (Some("multi_agent_v1"), "spawn_agent")
        );
        assert_eq!(tool_names.split("exec_command"), (None, "exec_command"));
    }

    #[test]
    fn reasoning_this_server_sealed_comes_back_to_the_template() {
        let sealed = crate::api::thinking::seal_reasoning("list the folder — with ls");
        assert_eq!(
            open_reasoning(&sealed).as_deref(),
            Some("list the folder — with ls")
        );
        assert_eq!(open_reasoning("gAAAAB-openai-opaque"), None);
        let g = read(json!({
            "input": [
                {"role": "user", "content": "List the files."},
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": sealed},
                {"type": "function_call", "call_id": "c1", "name": "spawn_agent", "namespace": "multi_agent_v1", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "ok"},
                {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAAAB-opaque"},
                {"role": "assistant", "content": [{"type": "output_text", "text": "Done."}]}
            ]
        }))
        .unwrap();
        let Prompt::Chat { messages, .. } = &g.prompt else {
            panic!("a chat prompt")
        };
        assert_eq!(
            messages[1]["reasoning_content"],
            "list the folder — with ls"
        );
        assert_eq!(
            messages[1]["tool_calls"][0]["function"]["name"],
            "multi_agent_v1__spawn_agent"
        );
        assert!(
            messages[3].get("reasoning_content").is_none(),
            "{}",
            messages[3]
        );
    }
}
