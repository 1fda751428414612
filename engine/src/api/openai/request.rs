//! OpenAI chat-completion (and completion) requests as Rust types, and
//! their reading into the engine's [`GenerationRequest`]: messages, stops,
//! logprobs, `logit_bias`, `n`, chat's `tools` and `response_format`, the
//! legacy prompt forms. Fields other protocols share are read once in
//! `api::{sampling, output_format, tool_choice}`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::api::error::ApiError;
use crate::api::output_format::output_format;
use crate::api::sampling::{in_range, Sampling};
use crate::api::thinking::Thinking;
use crate::api::tool_choice::tool_choice;
use crate::api::wire::{integral, present, read_body};
use crate::runtime::{Constraint, GenerationRequest, Priority, Prompt, ToolSpec};

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
    /// A flag in chat; a count of top alternatives in completions.
    pub logprobs: Option<LogprobsField>,
    pub top_logprobs: Option<u32>,
    pub n: Option<u32>,
    pub tools: Option<Vec<Value>>,
    pub tool_choice: Option<Value>,
    /// `false`: at most one tool call.
    pub parallel_tool_calls: Option<bool>,
    pub response_format: Option<Value>,
    pub chat_template_kwargs: Option<Map<String, Value>>,
    /// `none`, `minimal`, `low`, `medium`, `high`: the template's thinking
    /// switch (`api::thinking`).
    pub reasoning_effort: Option<Value>,
    pub thinking_budget: Option<u32>,
    /// vLLM's and llama.cpp's extension: generate `max_tokens` whatever
    /// the model's end of turn.
    pub ignore_eos: Option<bool>,
    /// Legacy function calling, refused by name (never ignored).
    pub functions: Option<Value>,
    pub function_call: Option<Value>,
}

/// Legacy function calling, refused with what to send instead.
const USE_TOOLS: &str = "legacy function calling is not supported; send 'tools' \
(each {\"type\": \"function\", \"function\": {...}}) and 'tool_choice' instead";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum LogprobsField {
    Flag(bool),
    Count(u32),
}

/// Most choices (`n`, times prompts in completions) one request may ask
/// for; each is a sequence of its own in the engine.
pub const MAX_CHOICES: usize = 16;

/// `POST /v1/completions` body: the legacy prompt forms, `echo`,
/// `best_of`, and everything chat shares.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct CompletionRequest {
    pub prompt: Option<Value>,
    pub echo: bool,
    pub best_of: Option<u32>,
    pub suffix: Option<String>,
    #[serde(flatten)]
    pub settings: ChatRequest,
}

impl CompletionRequest {
    pub fn from_json(body: &[u8]) -> Result<Self, ApiError> {
        read_body(body)
    }

    /// The prompts, one per choice group: a string, strings, token ids,
    /// or lists of token ids.
    pub fn prompts(&self) -> Result<Vec<Prompt>, ApiError> {
        let bad = || {
            ApiError::invalid_param(
                "prompt",
                "must be a string, an array of strings, an array of token ids, \
                 or an array of arrays of token ids",
            )
        };
        let ids = |v: &[Value]| -> Result<Vec<u32>, ApiError> {
            v.iter()
                .map(|t| {
                    integral(t)
                        .and_then(|t| u32::try_from(t).ok())
                        .ok_or_else(bad)
                })
                .collect()
        };
        let prompts = match &self.prompt {
            // OpenAI's default: the model sees only the document start.
            None => vec![Prompt::Text(String::new())],
            Some(Value::String(s)) => vec![Prompt::Text(s.clone())],
            Some(Value::Array(items)) if items.is_empty() => vec![Prompt::Text(String::new())],
            Some(Value::Array(items)) if items.iter().all(Value::is_string) => items
                .iter()
                .map(|s| Prompt::Text(s.as_str().unwrap_or_default().to_string()))
                .collect(),
            Some(Value::Array(items)) if items.iter().all(Value::is_number) => {
                vec![Prompt::Tokens(ids(items)?)]
            }
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| {
                    i.as_array()
                        .ok_or_else(bad)
                        .and_then(|v| ids(v))
                        .map(Prompt::Tokens)
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(bad()),
        };
        if self.suffix.as_deref().is_some_and(|s| !s.is_empty()) {
            return Err(ApiError::invalid_param(
                "suffix",
                "insertion after a suffix is not supported by this server's models",
            ));
        }
        Ok(prompts)
    }

    /// Top alternatives per token (legacy `logprobs`: an integer).
    pub fn logprobs(&self) -> Option<usize> {
        match self.settings.logprobs {
            None | Some(LogprobsField::Flag(false)) => None,
            Some(LogprobsField::Flag(true)) => Some(0),
            Some(LogprobsField::Count(k)) => Some(k as usize),
        }
    }

    /// Choices per prompt; `best_of` may only equal it (no sample is
    /// ranked and dropped here).
    pub fn choices(&self) -> Result<usize, ApiError> {
        let n = self.settings.choices()?;
        match self.best_of {
            Some(b) if b as usize != n && b > 1 => Err(ApiError::invalid_param(
                "best_of",
                format!(
                    "only best_of = n ({n}) is supported: this server returns every \
                     sample it draws and ranks none"
                ),
            )),
            _ => Ok(n),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum StopField {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct StreamOptions {
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
        let logprobs = match self.logprobs {
            None | Some(LogprobsField::Flag(false)) => false,
            Some(LogprobsField::Flag(true)) => true,
            Some(LogprobsField::Count(_)) => {
                return Err(ApiError::invalid_param(
                    "logprobs",
                    "must be a boolean in chat completions (top_logprobs sets how many)",
                ))
            }
        };
        let logprobs = match (logprobs, self.top_logprobs) {
            (true, k) => Some(k.unwrap_or(0) as usize),
            (false, Some(_)) => {
                return Err(ApiError::invalid_param(
                    "top_logprobs",
                    "requires logprobs: true",
                ))
            }
            (false, None) => None,
        };
        let mut template_kwargs = self.chat_template_kwargs.clone().unwrap_or_default();
        Thinking::from_effort(self.reasoning_effort.as_ref(), "reasoning_effort")?
            .apply(&mut template_kwargs);
        self.generation(
            Prompt::Chat {
                messages: self.messages.clone(),
                template_kwargs,
            },
            logprobs,
        )
    }

    /// Choices to generate (`n`).
    pub fn choices(&self) -> Result<usize, ApiError> {
        match self.n.unwrap_or(1) as usize {
            0 => Err(ApiError::invalid_param("n", "must be at least 1")),
            n if n > MAX_CHOICES => Err(ApiError::invalid_param(
                "n",
                format!("must be at most {MAX_CHOICES}"),
            )),
            n => Ok(n),
        }
    }

    /// The request's settings around `prompt`, with `logprobs` top
    /// alternatives per token when asked.
    pub fn generation(
        &self,
        prompt: Prompt,
        logprobs: Option<usize>,
    ) -> Result<GenerationRequest, ApiError> {
        if self.functions.is_some() {
            return Err(ApiError::invalid_param("functions", USE_TOOLS));
        }
        if self.function_call.is_some() {
            return Err(ApiError::invalid_param("function_call", USE_TOOLS));
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
        let mut sampling = Sampling {
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
        sampling.ignore_eos = self.ignore_eos.unwrap_or(false);
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
            parallel_tool_calls: self.parallel_tool_calls.unwrap_or(true),
            priority: Priority::Interactive,
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
        if role == "function" || m.get("function_call").is_some_and(|f| !f.is_null()) {
            return Err(ApiError::invalid_param(&param, USE_TOOLS));
        }
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
                parameters: present(f, "parameters")
                    .cloned()
                    .unwrap_or_else(|| serde_json::json!({"type": "object"})),
                strict: f.get("strict").and_then(Value::as_bool) == Some(true),
            })
        })
        .collect()
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
        assert_eq!(
            param_of(req(r#","logprobs":2"#)).as_deref(),
            Some("logprobs")
        );
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
    fn every_null_field_reads_as_absent() {
        let base = serde_json::json!({"messages": [{"role": "user", "content": "hi"}]});
        crate::api::wire::assert_nulls_mean_absent::<ChatRequest, _>(base, &["messages"], |b| {
            ChatRequest::from_json(b)?.to_generation()
        });
        let base = serde_json::json!({"prompt": "Once upon"});
        crate::api::wire::assert_nulls_mean_absent::<CompletionRequest, _>(
            base,
            &["prompt"],
            |b| {
                let r = CompletionRequest::from_json(b)?;
                let prompts = r.prompts()?;
                Ok((
                    r.choices()?,
                    r.echo,
                    r.logprobs(),
                    r.settings.generation(prompts[0].clone(), r.logprobs())?,
                ))
            },
        );
    }

    #[test]
    fn completion_prompts_take_every_legacy_form() {
        let prompts = |p: &str| {
            CompletionRequest::from_json(format!(r#"{{"prompt":{p}}}"#).as_bytes())?.prompts()
        };
        assert_eq!(prompts(r#""a""#).unwrap(), vec![Prompt::Text("a".into())]);
        assert_eq!(
            prompts(r#"["a","b"]"#).unwrap(),
            vec![Prompt::Text("a".into()), Prompt::Text("b".into())]
        );
        assert_eq!(prompts("[1,2]").unwrap(), vec![Prompt::Tokens(vec![1, 2])]);
        assert_eq!(
            prompts("[[1],[2,3]]").unwrap(),
            vec![Prompt::Tokens(vec![1]), Prompt::Tokens(vec![2, 3])]
        );
        assert_eq!(
            prompts("[1.0,2]").unwrap(),
            vec![Prompt::Tokens(vec![1, 2])]
        );
        assert_eq!(prompts("[]").unwrap(), vec![Prompt::Text(String::new())]);
        for bad in ["[1,\"a\"]", "[-1]", "[1.5]", "{}", "[[1],\"a\"]"] {
            assert!(prompts(bad).is_err(), "{bad}");
        }
        let r = CompletionRequest::from_json(br#"{"prompt":"a","logprobs":2,"n":2,"best_of":2}"#)
            .unwrap();
        assert_eq!((r.logprobs(), r.choices().unwrap()), (Some(2), 2));
        let r = CompletionRequest::from_json(br#"{"prompt":"a","n":1,"best_of":3}"#).unwrap();
        assert_eq!(r.choices().unwrap_err().param.as_deref(), Some("best_of"));
    }

    #[test]
    fn legacy_function_calling_is_refused_by_name() {
        assert_eq!(
            param_of(req(r#","functions":[{"name":"f","parameters":{}}]"#)).as_deref(),
            Some("functions")
        );
        assert_eq!(
            param_of(req(r#","function_call":"auto""#)).as_deref(),
            Some("function_call")
        );
        let err = param_of(
            ChatRequest::from_json(
                br#"{"messages":[{"role":"user","content":"x"},{"role":"function","name":"f","content":"1"}]}"#,
            )
            .unwrap()
            .to_generation(),
        );
        assert_eq!(err.as_deref(), Some("messages[1]"));
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
