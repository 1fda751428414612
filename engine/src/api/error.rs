//! What a client sees on failure: a status and an error body in its
//! protocol's shape. Every API builds [`ApiError`]s the same way; only the
//! body differs (OpenAI's `{"error": {...}}`, Anthropic's
//! `{"type": "error", "error": {...}}`).

use serde_json::{json, Value};

use crate::error::EngineError;
use crate::runtime::Failure;

/// The wire protocol a request came in on: it decides error bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// Chat completions, completions and Responses share OpenAI's errors.
    OpenAi,
    Anthropic,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    /// OpenAI's `error.type` (`invalid_request_error`, ...).
    pub kind: &'static str,
    pub message: String,
    pub param: Option<String>,
    pub code: Option<String>,
}

impl ApiError {
    /// 408: a request body that did not arrive within `--read-timeout`.
    pub fn body_too_slow(limit: std::time::Duration) -> Self {
        ApiError::new(
            408,
            "invalid_request_error",
            format!(
                "the request body did not arrive within {} s (--read-timeout)",
                limit.as_secs_f64()
            ),
        )
    }

    pub fn new(status: u16, kind: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            kind,
            message: message.into(),
            param: None,
            code: None,
        }
    }

    pub fn bad_request(message: impl Into<String>, param: Option<String>) -> Self {
        ApiError {
            param,
            ..ApiError::new(400, "invalid_request_error", message)
        }
    }

    /// A 400 naming the parameter at fault.
    pub fn invalid_param(param: &str, problem: impl std::fmt::Display) -> Self {
        ApiError::bad_request(format!("{param}: {problem}"), Some(param.to_string()))
    }

    /// A failure of a request that already started (engine events).
    pub fn failure(message: String, client_error: bool) -> Self {
        if client_error {
            ApiError::bad_request(message, None)
        } else {
            ApiError::new(500, "server_error", message)
        }
    }

    /// The engine's parameter names become the protocol's (`max_tokens`
    /// is `max_output_tokens` in Responses, ...).
    pub fn renaming(mut self, names: &[(&str, &str)]) -> Self {
        if let Some(p) = &self.param {
            if let Some((from, to)) = names.iter().find(|(from, _)| from == p) {
                self.message = self.message.replace(from, to);
                self.param = Some(to.to_string());
            }
        }
        self
    }

    /// The error body in `protocol`'s shape.
    pub fn body(&self, protocol: Protocol) -> Value {
        match protocol {
            Protocol::OpenAi => json!({"error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }}),
            Protocol::Anthropic => json!({
                "type": "error",
                "error": {"type": self.anthropic_type(), "message": self.message},
                "request_id": crate::api::ids::new_id("req_"),
            }),
        }
    }

    /// Anthropic's error types go by status.
    fn anthropic_type(&self) -> &'static str {
        match self.status {
            400 | 422 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            503 | 529 => "overloaded_error",
            _ => "api_error",
        }
    }
}

/// A request that ended without finishing: the request's fault (400) or
/// the engine's (500).
impl From<Failure> for ApiError {
    fn from(f: Failure) -> Self {
        ApiError::failure(f.message, f.client_error)
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::InvalidRequest { message, param } => ApiError::bad_request(message, param),
            refused @ EngineError::TemplateRefused(_) => {
                ApiError::bad_request(refused.to_string(), Some("messages".into()))
            }
            // The template failing on a request that passed every check is
            // the server's bug: the details go to the log, not the client.
            EngineError::Template(m) => {
                let id = crate::api::ids::new_id("req_");
                tracing::error!(request_id = %id, "chat template failed: {m}");
                ApiError::new(
                    500,
                    "server_error",
                    format!("the server could not build the model's prompt for this request (logged as {id})"),
                )
            }
            other => ApiError::new(500, "server_error", other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_follow_each_protocol() {
        let e = ApiError::invalid_param("max_tokens", "must be at least 1");
        let openai = e.body(Protocol::OpenAi);
        assert_eq!(openai["error"]["param"], "max_tokens");
        assert_eq!(openai["error"]["type"], "invalid_request_error");
        let anthropic = e.body(Protocol::Anthropic);
        assert_eq!(anthropic["type"], "error");
        assert_eq!(anthropic["error"]["type"], "invalid_request_error");
        let renamed = e.renaming(&[("max_tokens", "max_output_tokens")]);
        assert_eq!(renamed.param.as_deref(), Some("max_output_tokens"));
        assert!(renamed.message.starts_with("max_output_tokens:"));
    }

    #[test]
    fn template_failures_are_the_servers_and_their_text_stays_in_the_log() {
        let e = ApiError::from(EngineError::Template(
            "invalid operation: tried to use + operator (in chat:4)".into(),
        ));
        assert_eq!(e.status, 500);
        assert!(!e.message.contains("operator"), "{}", e.message);
        let refused = ApiError::from(EngineError::TemplateRefused("roles must alternate".into()));
        assert_eq!(refused.status, 400);
        assert!(refused.message.contains("roles must alternate"));
    }
}
