//! OpenAI chat-completion (and completion) requests as Rust types, and
//! their reading into the engine's [`GenerationRequest`]: OpenAI's ranges,
//! `response_format`, `tools` and `tool_choice`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::api::error::ApiError;
use crate::api::wire::read_body;
use crate::runtime::{Constraint, GenerationRequest, Prompt, SamplingParams, ToolChoice, ToolSpec};

/// At most this many stop strings (OpenAI's limit).
pub const MAX_STOP_STRINGS: usize = 4;

const ROLES: &[&str] = &["system", "developer", "user", "assistant", "tool"];

/// `POST /v1/chat/completions` body (and `/v1/completions`, whose
/// `prompt` is read apart). Unknown fields are ignored.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct ChatRequest {
    pub model: Option<String>,
    pub messages: Vec<Value>,
    pub max_tokens: Option<u32>,
    pub max_completion_tokens: Option<u32>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub top_k: Option<i64>,
    pub min_p: Option<f32>,
    pub repetition_penalty: Option<f32>,
    pub presence_penalty: Option<f32>,
    pub frequency_penalty: Option<f32>,
    /// Token id (as a string) -> bias in [-100, 100].
    pub logit_bias: Option<Map<String, Value>>,
    pub seed: Option<i64>,
    pub stop: Option<StopField>,
    pub stream: bool,
    pub stream_options: Option<StreamOptions>,
    pub logprobs: bool,
    pub top_logprobs: Option<u32>,
    pub n: Option<u32>,
    pub tools: Option<Vec<Value>>,
    pub tool_choice: Option<Value>,
    pub response_format: Option<Value>,
    pub chat_template_kwargs: Option<Map<String, Value>>,
    pub thinking_budget: Option<u32>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum StopField {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

impl ChatRequest {
    /// Parses a request body, naming the problem on failure.
    pub fn from_json(body: &[u8]) -> Result<Self, ApiError> {
        read_body(body)
    }

    /// The chat request the engine runs.
    pub fn to_generation(&self) -> Result<GenerationRequest, ApiError> {
        validate_messages(&self.messages)?;
        self.generation(Prompt::Chat {
            messages: self.messages.clone(),
            template_kwargs: self.chat_template_kwargs.clone().unwrap_or_default(),
        })
    }

    /// The request's settings around `prompt`.
    pub fn generation(&self, prompt: Prompt) -> Result<GenerationRequest, ApiError> {
        if let Some(n) = self.n {
            if n != 1 {
                return Err(ApiError::invalid_param("n", "only n = 1 is supported"));
            }
        }
        let stop = match &self.stop {
            None => Vec::new(),
            Some(StopField::One(s)) => vec![s.clone()],
            Some(StopField::Many(v)) => v.clone(),
        };
        if stop.len() > MAX_STOP_STRINGS {
            return Err(ApiError::invalid_param(
                "stop",
                format!("at most {MAX_STOP_STRINGS} stop strings"),
            ));
        }
        let logprobs = match (self.logprobs, self.top_logprobs) {
            (true, k) => Some(k.unwrap_or(0) as usize),
            (false, Some(_)) => {
                return Err(ApiError::invalid_param(
                    "top_logprobs",
                    "requires logprobs: true",
                ))
            }
            (false, None) => None,
        };
        let sampling = Sampling {
            temperature: self.temperature,
            top_p: self.top_p,
            top_k: self.top_k,
            min_p: self.min_p,
            repetition_penalty: self.repetition_penalty,
            presence_penalty: self.presence_penalty,
            frequency_penalty: self.frequency_penalty,
            seed: self.seed,
            max_temperature: 2.0,
        }
        .read(logit_bias(self.logit_bias.as_ref())?)?;
        Ok(GenerationRequest {
            prompt,
            tools: tool_specs(self.tools.as_deref().unwrap_or_default())?,
            tool_choice: tool_choice(self.tool_choice.as_ref())?,
            sampling,
            max_tokens: self
                .max_completion_tokens
                .or(self.max_tokens)
                .map(|n| n as usize),
            stop,
            logprobs,
            constraint: response_format(self.response_format.as_ref())?,
            thinking_budget: self.thinking_budget.map(|b| b as usize),
        })
    }
}

/// Messages are non-empty and have known roles and string or part-list
/// contents.
pub fn validate_messages(messages: &[Value]) -> Result<(), ApiError> {
    if messages.is_empty() {
        return Err(ApiError::invalid_param("messages", "must not be empty"));
    }
    for (i, m) in messages.iter().enumerate() {
        let param = format!("messages[{i}]");
        let role = m
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| ApiError::invalid_param(&param, "needs a string 'role'"))?;
        if !ROLES.contains(&role) {
            return Err(ApiError::invalid_param(
                &format!("{param}.role"),
                format!(
                    "unknown role '{role}' (expected one of {})",
                    ROLES.join(", ")
                ),
            ));
        }
        match m.get("content") {
            None | Some(Value::Null) if role == "assistant" => {}
            Some(Value::String(_)) | Some(Value::Array(_)) => {}
            _ => {
                return Err(ApiError::invalid_param(
                    &format!("{param}.content"),
                    "must be a string or an array of content parts",
                ))
            }
        }
    }
    Ok(())
}

/// Sampling fields as a protocol sends them; each protocol states its own
/// temperature ceiling (OpenAI 2, Anthropic 1).
#[derive(Debug, Clone, Default)]
pub struct Sampling {
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub top_k: Option<i64>,
    pub min_p: Option<f32>,
    pub repetition_penalty: Option<f32>,
    pub presence_penalty: Option<f32>,
    pub frequency_penalty: Option<f32>,
    pub seed: Option<i64>,
    pub max_temperature: f32,
}

impl Sampling {
    /// Checks every field's range.
    pub fn read(&self, logit_bias: Vec<(u32, f32)>) -> Result<SamplingParams, ApiError> {
        let temperature = self.temperature.unwrap_or(1.0);
        in_range("temperature", temperature, 0.0, self.max_temperature)?;
        let top_p = self.top_p.unwrap_or(1.0);
        if !(top_p > 0.0 && top_p <= 1.0) {
            return Err(ApiError::invalid_param("top_p", "must be in (0, 1]"));
        }
        let top_k = match self.top_k {
            None | Some(-1) | Some(0) => 0,
            Some(k) if k > 0 => k as usize,
            Some(_) => {
                return Err(ApiError::invalid_param(
                    "top_k",
                    "must be -1, 0 or positive",
                ))
            }
        };
        let min_p = self.min_p.unwrap_or(0.0);
        in_range("min_p", min_p, 0.0, 1.0)?;
        let repetition_penalty = self.repetition_penalty.unwrap_or(1.0);
        if repetition_penalty <= 0.0 || !repetition_penalty.is_finite() {
            return Err(ApiError::invalid_param("repetition_penalty", "must be > 0"));
        }
        let presence_penalty = self.presence_penalty.unwrap_or(0.0);
        in_range("presence_penalty", presence_penalty, -2.0, 2.0)?;
        let frequency_penalty = self.frequency_penalty.unwrap_or(0.0);
        in_range("frequency_penalty", frequency_penalty, -2.0, 2.0)?;
        Ok(SamplingParams {
            temperature,
            top_p,
            top_k,
            min_p,
            repetition_penalty,
            presence_penalty,
            frequency_penalty,
            logit_bias,
            seed: self.seed.map(|s| s as u64),
        })
    }
}

fn logit_bias(map: Option<&Map<String, Value>>) -> Result<Vec<(u32, f32)>, ApiError> {
    let Some(map) = map else {
        return Ok(Vec::new());
    };
    map.iter()
        .map(|(k, v)| {
            let id: u32 = k.parse().map_err(|_| {
                ApiError::invalid_param("logit_bias", format!("'{k}' is not a token id"))
            })?;
            let bias = v.as_f64().ok_or_else(|| {
                ApiError::invalid_param("logit_bias", format!("bias of '{k}' must be a number"))
            })? as f32;
            in_range("logit_bias", bias, -100.0, 100.0)?;
            Ok((id, bias))
        })
        .collect()
}

/// `tools`: every entry needs a `function` object with a `name`.
pub fn tool_specs(tools: &[Value]) -> Result<Vec<ToolSpec>, ApiError> {
    tools
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let f = t.get("function").ok_or_else(|| {
                ApiError::invalid_param(&format!("tools[{i}]"), "needs a 'function' object")
            })?;
            let name = f.get("name").and_then(Value::as_str).ok_or_else(|| {
                ApiError::invalid_param(&format!("tools[{i}].function.name"), "is required")
            })?;
            Ok(ToolSpec {
                name: name.to_string(),
                description: f
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                parameters: f
                    .get("parameters")
                    .cloned()
                    .unwrap_or_else(|| serde_json::json!({"type": "object"})),
                strict: f.get("strict").and_then(Value::as_bool) == Some(true),
            })
        })
        .collect()
}

/// `tool_choice`; absent means `auto`. Responses name the function at the
/// top level (`{"type": "function", "name": ..}`), chat under `function`.
pub fn tool_choice(choice: Option<&Value>) -> Result<ToolChoice, ApiError> {
    match choice {
        None => Ok(ToolChoice::Auto),
        Some(Value::String(s)) if s == "auto" => Ok(ToolChoice::Auto),
        Some(Value::String(s)) if s == "none" => Ok(ToolChoice::None),
        Some(Value::String(s)) if s == "required" => Ok(ToolChoice::Required),
        Some(choice @ Value::Object(_)) => choice
            .pointer("/function/name")
            .or_else(|| choice.get("name"))
            .and_then(Value::as_str)
            .map(|n| ToolChoice::Named(n.to_string()))
            .ok_or_else(|| ApiError::invalid_param("tool_choice", "needs function.name")),
        Some(other) => Err(ApiError::invalid_param(
            "tool_choice",
            format!("unsupported value {other}"),
        )),
    }
}

/// `response_format` (chat) as a constraint.
fn response_format(format: Option<&Value>) -> Result<Option<Constraint>, ApiError> {
    let Some(format) = format else {
        return Ok(None);
    };
    output_format(
        format,
        "response_format",
        format.get("json_schema").and_then(|s| s.get("schema")),
        "response_format.json_schema.schema",
    )
}

/// A requested output format (`text`, `json_object`, `json_schema` with
/// its schema) as a constraint; `at` and `schema_at` name the fields in
/// errors.
pub fn output_format(
    format: &Value,
    at: &str,
    schema: Option<&Value>,
    schema_at: &str,
) -> Result<Option<Constraint>, ApiError> {
    match format.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(Constraint::JsonObject)),
        Some("json_schema") => {
            let schema = schema.cloned().ok_or_else(|| {
                ApiError::invalid_param(schema_at, "is required for type json_schema")
            })?;
            if !schema.is_object() && !schema.is_boolean() {
                return Err(ApiError::invalid_param(
                    schema_at,
                    "must be a JSON Schema object",
                ));
            }
            Ok(Some(Constraint::JsonSchema(schema)))
        }
        other => Err(ApiError::invalid_param(
            &format!("{at}.type"),
            format!("unsupported value {other:?} (text, json_object, json_schema)"),
        )),
    }
}

fn in_range(param: &str, value: f32, lo: f32, hi: f32) -> Result<(), ApiError> {
    if value.is_finite() && (lo..=hi).contains(&value) {
        Ok(())
    } else {
        Err(ApiError::invalid_param(
            param,
            format!("must be in [{lo}, {hi}], got {value}"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(extra: &str) -> Result<GenerationRequest, ApiError> {
        let body = format!(r#"{{"messages":[{{"role":"user","content":"hi"}}]{extra}}}"#);
        ChatRequest::from_json(body.as_bytes())?.to_generation()
    }

    fn param_of(r: Result<GenerationRequest, ApiError>) -> Option<String> {
        match r {
            Err(e) => e.param,
            Ok(other) => panic!("expected an invalid request, got {other:?}"),
        }
    }

    #[test]
    fn defaults_and_fields_are_read() {
        let g = req(r#","max_tokens":7,"temperature":0,"seed":5,"stop":"END","logprobs":true,"top_logprobs":3,"logit_bias":{"12":-100}"#).unwrap();
        assert_eq!(g.max_tokens, Some(7));
        assert_eq!(g.sampling.temperature, 0.0);
        assert_eq!(g.sampling.seed, Some(5));
        assert_eq!(g.stop, vec!["END"]);
        assert_eq!(g.logprobs, Some(3));
        assert_eq!(g.sampling.logit_bias, vec![(12, -100.0)]);
        assert_eq!(req("").unwrap().max_tokens, None);
    }

    #[test]
    fn bad_fields_name_their_param() {
        assert_eq!(
            param_of(req(r#","temperature":3"#)).as_deref(),
            Some("temperature")
        );
        assert_eq!(
            param_of(req(r#","stop":["a","b","c","d","e"]"#)).as_deref(),
            Some("stop")
        );
        assert_eq!(param_of(req(r#","n":2"#)).as_deref(), Some("n"));
        assert_eq!(
            param_of(req(r#","logit_bias":{"x":1}"#)).as_deref(),
            Some("logit_bias")
        );
        assert_eq!(
            param_of(req(r#","top_logprobs":2"#)).as_deref(),
            Some("top_logprobs")
        );
        assert_eq!(
            param_of(req(r#","response_format":{"type":"xml"}"#)).as_deref(),
            Some("response_format.type")
        );
    }

    #[test]
    fn bad_messages_are_rejected() {
        assert!(validate_messages(&[]).is_err());
        let err = validate_messages(&[serde_json::json!({"role": "wizard", "content": "x"})])
            .unwrap_err()
            .message;
        assert!(err.contains("unknown role 'wizard'"), "{err}");
        assert!(ChatRequest::from_json(br#"{"messages":"hi"}"#).is_err());
        assert!(ChatRequest::from_json(
            br#"{"messages":[{"role":"user","content":"x"}],"max_tokens":"5"}"#
        )
        .is_err());
    }
}
