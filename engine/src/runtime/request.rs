//! OpenAI chat-completion requests as Rust types, and their validation into
//! what the scheduler runs.
//!
//! Field names and shapes follow the OpenAI wire format, so the server and
//! the harness's in-process target parse the same JSON into the same value.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{EngineError, Result};
use crate::runtime::sampler::SamplingParams;

/// At most this many stop strings (OpenAI's limit).
pub const MAX_STOP_STRINGS: usize = 4;

const ROLES: &[&str] = &["system", "developer", "user", "assistant", "tool"];

/// `POST /v1/chat/completions` body. Unknown fields are ignored.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct ChatRequest {
    #[serde(default)]
    pub model: Option<String>,
    pub messages: Vec<Value>,
    #[serde(default)]
    pub max_tokens: Option<u32>,
    #[serde(default)]
    pub max_completion_tokens: Option<u32>,
    #[serde(default)]
    pub temperature: Option<f32>,
    #[serde(default)]
    pub top_p: Option<f32>,
    #[serde(default)]
    pub top_k: Option<i64>,
    #[serde(default)]
    pub min_p: Option<f32>,
    #[serde(default)]
    pub repetition_penalty: Option<f32>,
    #[serde(default)]
    pub presence_penalty: Option<f32>,
    #[serde(default)]
    pub frequency_penalty: Option<f32>,
    /// Token id (as a string) -> bias in [-100, 100].
    #[serde(default)]
    pub logit_bias: Option<Map<String, Value>>,
    #[serde(default)]
    pub seed: Option<i64>,
    #[serde(default)]
    pub stop: Option<StopField>,
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    pub logprobs: bool,
    #[serde(default)]
    pub top_logprobs: Option<u32>,
    #[serde(default)]
    pub n: Option<u32>,
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    #[serde(default)]
    pub tool_choice: Option<Value>,
    #[serde(default)]
    pub response_format: Option<Value>,
    #[serde(default)]
    pub chat_template_kwargs: Option<Map<String, Value>>,
    #[serde(default)]
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

/// Engine-side limits a request is validated against.
#[derive(Debug, Clone, Copy)]
pub struct RequestLimits {
    pub max_logprobs: usize,
    pub default_max_tokens: usize,
    pub context_length: usize,
    pub vocab_size: usize,
}

/// A validated request's generation settings.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerationSettings {
    pub sampling: SamplingParams,
    pub max_tokens: usize,
    pub stop: Vec<String>,
    /// `Some(k)`: report the chosen token's logprob and the k best.
    pub logprobs: Option<usize>,
}

impl ChatRequest {
    /// Parses a request body, naming the problem on failure.
    pub fn from_json(body: &str) -> Result<Self> {
        serde_json::from_str(body).map_err(|e| EngineError::InvalidRequest {
            message: format!("invalid request body: {e}"),
            param: None,
        })
    }

    /// Checks the messages (non-empty, known roles).
    pub fn validate_messages(&self) -> Result<()> {
        if self.messages.is_empty() {
            return Err(EngineError::invalid_param("messages", "must not be empty"));
        }
        for (i, m) in self.messages.iter().enumerate() {
            let param = format!("messages[{i}]");
            let role = m
                .get("role")
                .and_then(Value::as_str)
                .ok_or_else(|| EngineError::invalid_param(&param, "needs a string 'role'"))?;
            if !ROLES.contains(&role) {
                return Err(EngineError::invalid_param(
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
                    return Err(EngineError::invalid_param(
                        &format!("{param}.content"),
                        "must be a string or an array of content parts",
                    ))
                }
            }
        }
        Ok(())
    }

    /// Validates every generation field against `limits`.
    pub fn settings(&self, limits: &RequestLimits) -> Result<GenerationSettings> {
        self.validate_messages()?;
        if let Some(n) = self.n {
            if n != 1 {
                return Err(EngineError::invalid_param("n", "only n = 1 is supported"));
            }
        }
        let max_tokens = match self.max_completion_tokens.or(self.max_tokens) {
            Some(0) => {
                return Err(EngineError::invalid_param(
                    "max_tokens",
                    "must be at least 1",
                ))
            }
            Some(n) => n as usize,
            None => limits.default_max_tokens,
        };
        let temperature = self.temperature.unwrap_or(1.0);
        in_range("temperature", temperature, 0.0, 2.0)?;
        let top_p = self.top_p.unwrap_or(1.0);
        if !(top_p > 0.0 && top_p <= 1.0) {
            return Err(EngineError::invalid_param("top_p", "must be in (0, 1]"));
        }
        let top_k = match self.top_k {
            None | Some(-1) | Some(0) => 0,
            Some(k) if k > 0 => k as usize,
            Some(_) => {
                return Err(EngineError::invalid_param(
                    "top_k",
                    "must be -1, 0 or positive",
                ))
            }
        };
        let min_p = self.min_p.unwrap_or(0.0);
        in_range("min_p", min_p, 0.0, 1.0)?;
        let repetition_penalty = self.repetition_penalty.unwrap_or(1.0);
        if repetition_penalty <= 0.0 || !repetition_penalty.is_finite() {
            return Err(EngineError::invalid_param(
                "repetition_penalty",
                "must be > 0",
            ));
        }
        let presence_penalty = self.presence_penalty.unwrap_or(0.0);
        in_range("presence_penalty", presence_penalty, -2.0, 2.0)?;
        let frequency_penalty = self.frequency_penalty.unwrap_or(0.0);
        in_range("frequency_penalty", frequency_penalty, -2.0, 2.0)?;
        let logit_bias = self.logit_bias(limits.vocab_size)?;
        let stop = match &self.stop {
            None => Vec::new(),
            Some(StopField::One(s)) => vec![s.clone()],
            Some(StopField::Many(v)) => v.clone(),
        };
        if stop.len() > MAX_STOP_STRINGS {
            return Err(EngineError::invalid_param(
                "stop",
                format!("at most {MAX_STOP_STRINGS} stop strings"),
            ));
        }
        let logprobs = match (self.logprobs, self.top_logprobs) {
            (_, Some(k)) if k as usize > limits.max_logprobs => {
                return Err(EngineError::invalid_param(
                    "top_logprobs",
                    format!("must be at most {}", limits.max_logprobs),
                ))
            }
            (true, k) => Some(k.unwrap_or(0) as usize),
            (false, Some(_)) => {
                return Err(EngineError::invalid_param(
                    "top_logprobs",
                    "requires logprobs: true",
                ))
            }
            (false, None) => None,
        };
        Ok(GenerationSettings {
            sampling: SamplingParams {
                temperature,
                top_p,
                top_k,
                min_p,
                repetition_penalty,
                presence_penalty,
                frequency_penalty,
                logit_bias,
                seed: self.seed.map(|s| s as u64),
            },
            max_tokens,
            stop,
            logprobs,
        })
    }

    fn logit_bias(&self, vocab_size: usize) -> Result<Vec<(u32, f32)>> {
        let Some(map) = &self.logit_bias else {
            return Ok(Vec::new());
        };
        map.iter()
            .map(|(k, v)| {
                let id: u32 = k
                    .parse()
                    .ok()
                    .filter(|&id| (id as usize) < vocab_size)
                    .ok_or_else(|| {
                        EngineError::invalid_param(
                            "logit_bias",
                            format!("'{k}' is not a token id of this model"),
                        )
                    })?;
                let bias = v.as_f64().ok_or_else(|| {
                    EngineError::invalid_param(
                        "logit_bias",
                        format!("bias of '{k}' must be a number"),
                    )
                })? as f32;
                in_range("logit_bias", bias, -100.0, 100.0)?;
                Ok((id, bias))
            })
            .collect()
    }
}

/// One offered tool: a function's name, its parameters' JSON Schema, and
/// whether it asked for strict arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub parameters: Value,
    pub strict: bool,
}

/// `tool_choice`, read once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    Auto,
    /// No call may be made.
    None,
    /// Some call must be made.
    Required,
    /// This function must be called.
    Named(String),
}

impl ChatRequest {
    /// The `tools` array, read in one place with one strictness: every
    /// entry needs a `function` object with a `name`.
    pub fn tool_specs(&self) -> Result<Vec<ToolSpec>> {
        let tools = self.tools.as_deref().unwrap_or_default();
        tools
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let f = t.get("function").ok_or_else(|| {
                    EngineError::invalid_param(&format!("tools[{i}]"), "needs a 'function' object")
                })?;
                let name = f.get("name").and_then(Value::as_str).ok_or_else(|| {
                    EngineError::invalid_param(&format!("tools[{i}].function.name"), "is required")
                })?;
                Ok(ToolSpec {
                    name: name.to_string(),
                    parameters: f
                        .get("parameters")
                        .cloned()
                        .unwrap_or_else(|| serde_json::json!({"type": "object"})),
                    strict: f.get("strict").and_then(Value::as_bool) == Some(true),
                })
            })
            .collect()
    }

    /// `tool_choice`; absent means `auto`.
    pub fn tool_choice(&self) -> Result<ToolChoice> {
        match &self.tool_choice {
            None => Ok(ToolChoice::Auto),
            Some(Value::String(s)) if s == "auto" => Ok(ToolChoice::Auto),
            Some(Value::String(s)) if s == "none" => Ok(ToolChoice::None),
            Some(Value::String(s)) if s == "required" => Ok(ToolChoice::Required),
            Some(choice @ Value::Object(_)) => choice
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .map(|n| ToolChoice::Named(n.to_string()))
                .ok_or_else(|| EngineError::invalid_param("tool_choice", "needs function.name")),
            Some(other) => Err(EngineError::invalid_param(
                "tool_choice",
                format!("unsupported value {other}"),
            )),
        }
    }
}

fn in_range(param: &str, value: f32, lo: f32, hi: f32) -> Result<()> {
    if value.is_finite() && (lo..=hi).contains(&value) {
        Ok(())
    } else {
        Err(EngineError::invalid_param(
            param,
            format!("must be in [{lo}, {hi}], got {value}"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: RequestLimits = RequestLimits {
        max_logprobs: 20,
        default_max_tokens: 100,
        context_length: 2048,
        vocab_size: 1000,
    };

    fn req(extra: &str) -> Result<GenerationSettings> {
        let body = format!(r#"{{"messages":[{{"role":"user","content":"hi"}}]{extra}}}"#);
        ChatRequest::from_json(&body)?.settings(&LIMITS)
    }

    fn param_of(r: Result<GenerationSettings>) -> Option<String> {
        match r {
            Err(EngineError::InvalidRequest { param, .. }) => param,
            other => panic!("expected an invalid request, got {other:?}"),
        }
    }

    #[test]
    fn defaults_and_fields_are_read() {
        let s = req(r#","max_tokens":7,"temperature":0,"seed":5,"stop":"END","logprobs":true,"top_logprobs":3,"logit_bias":{"12":-100}"#).unwrap();
        assert_eq!(s.max_tokens, 7);
        assert_eq!(s.sampling.temperature, 0.0);
        assert_eq!(s.sampling.seed, Some(5));
        assert_eq!(s.stop, vec!["END"]);
        assert_eq!(s.logprobs, Some(3));
        assert_eq!(s.sampling.logit_bias, vec![(12, -100.0)]);
        assert_eq!(req("").unwrap().max_tokens, 100);
    }

    #[test]
    fn bad_fields_name_their_param() {
        assert_eq!(
            param_of(req(r#","top_logprobs":21,"logprobs":true"#)).as_deref(),
            Some("top_logprobs")
        );
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
            param_of(req(r#","logit_bias":{"5000":1}"#)).as_deref(),
            Some("logit_bias")
        );
        assert_eq!(
            param_of(req(r#","max_tokens":0"#)).as_deref(),
            Some("max_tokens")
        );
    }

    #[test]
    fn bad_messages_are_rejected() {
        let empty = ChatRequest::from_json(r#"{"messages":[]}"#).unwrap();
        assert!(empty.validate_messages().is_err());
        let role =
            ChatRequest::from_json(r#"{"messages":[{"role":"wizard","content":"x"}]}"#).unwrap();
        let err = role.validate_messages().unwrap_err().to_string();
        assert!(err.contains("unknown role 'wizard'"), "{err}");
        assert!(ChatRequest::from_json(r#"{"messages":"hi"}"#).is_err());
        assert!(ChatRequest::from_json(
            r#"{"messages":[{"role":"user","content":"x"}],"max_tokens":"5"}"#
        )
        .is_err());
    }
}
