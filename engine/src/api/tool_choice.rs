//! `tool_choice` in the OpenAI family's shapes (chat completions and
//! Responses), read into the engine's [`ToolChoice`].

use serde_json::Value;

use crate::api::error::ApiError;
use crate::runtime::ToolChoice;

/// `tool_choice`; absent means `auto`. Responses name the function at the
/// top level (`{"type": "function", "name": ..}`), chat under `function`.
pub fn tool_choice(choice: Option<&Value>) -> Result<ToolChoice, ApiError> {
    match choice {
        None => Ok(ToolChoice::Auto),
        Some(Value::String(s)) if s == "auto" => Ok(ToolChoice::Auto),
        Some(Value::String(s)) if s == "none" => Ok(ToolChoice::None),
        Some(Value::String(s)) if s == "required" => Ok(ToolChoice::Required),
        Some(choice @ Value::Object(_)) => match choice.get("type").and_then(Value::as_str) {
            None | Some("function") => choice
                .pointer("/function/name")
                .or_else(|| choice.get("name"))
                .and_then(Value::as_str)
                .map(|n| ToolChoice::Named(n.to_string()))
                .ok_or_else(|| ApiError::invalid_param("tool_choice", "needs function.name")),
            Some(other) => Err(ApiError::invalid_param(
                "tool_choice.type",
                format!(
                    "'{other}' is not supported by this server \
                     (auto, none, required, or a function by name)"
                ),
            )),
        },
        Some(other) => Err(ApiError::invalid_param(
            "tool_choice",
            format!("unsupported value {other}"),
        )),
    }
}
