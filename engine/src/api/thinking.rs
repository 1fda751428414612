//! A request's thinking switch, however its protocol spells it (OpenAI's
//! `reasoning_effort`, Responses' `reasoning.effort`, Anthropic's
//! `thinking.type`), turned into the chat template's own switch. Templates
//! read `enable_thinking` (Qwen3, Gemma 4, ...) and some read
//! `reasoning_effort`; a model that thinks only when asked (Gemma 4 puts
//! `<|think|>` in the system turn then) must see the ask in its template,
//! or the request is silently answered without thinking. A key the client
//! set itself in `chat_template_kwargs` wins.

use serde_json::{Map, Value};

use crate::api::error::ApiError;

/// OpenAI's effort levels; `none` switches thinking off.
const EFFORTS: &[&str] = &["none", "minimal", "low", "medium", "high", "xhigh"];

/// What the request asked of the model's thinking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Thinking<'a> {
    /// Nothing: the template's default.
    Default,
    Off,
    /// On, with OpenAI's effort level when one was named.
    On(Option<&'a str>),
}

impl<'a> Thinking<'a> {
    /// An OpenAI effort level (`param` names the field in errors).
    pub fn from_effort(effort: Option<&'a Value>, param: &str) -> Result<Self, ApiError> {
        match effort {
            None | Some(Value::Null) => Ok(Thinking::Default),
            Some(Value::String(e)) if e == "none" => Ok(Thinking::Off),
            Some(Value::String(e)) if EFFORTS.contains(&e.as_str()) => Ok(Thinking::On(Some(e))),
            Some(other) => Err(ApiError::invalid_param(
                param,
                format!("unsupported value {other} ({})", EFFORTS.join(", ")),
            )),
        }
    }

    /// Sets the template's switches the client did not set itself.
    pub fn apply(self, kwargs: &mut Map<String, Value>) {
        let (enable, effort) = match self {
            Thinking::Default => return,
            Thinking::Off => (false, None),
            Thinking::On(effort) => (true, effort),
        };
        kwargs
            .entry("enable_thinking")
            .or_insert(Value::Bool(enable));
        if let Some(e) = effort {
            kwargs
                .entry("reasoning_effort")
                .or_insert_with(|| Value::String(e.to_string()));
        }
    }
}

/// Marks reasoning this server handed a client to keep (Responses'
/// `encrypted_content`, Messages' thinking `signature`): the text's UTF-8 in
/// hex. It is not encrypted (nothing here is secret from the client); it
/// only lets a stateless client hand the reasoning back, even when the
/// reply showed none of it (`display: omitted`).
const REASONING_TAG: &str = "afm-reasoning-v1:";

/// A reasoning text sealed for the client to keep.
pub fn seal_reasoning(text: &str) -> String {
    let mut out = String::with_capacity(REASONING_TAG.len() + 2 * text.len());
    out.push_str(REASONING_TAG);
    for b in text.bytes() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// The reasoning text of a seal this server wrote; `None` for anyone
/// else's (OpenAI's and Anthropic's are opaque).
pub fn open_reasoning(sealed: &str) -> Option<String> {
    let hex = sealed.strip_prefix(REASONING_TAG)?;
    if hex.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kwargs(t: Thinking, given: Value) -> Value {
        let mut k = given.as_object().unwrap().clone();
        t.apply(&mut k);
        Value::Object(k)
    }

    #[test]
    fn an_effort_switches_the_template_on_and_none_switches_it_off() {
        let high = json!("high");
        let on = Thinking::from_effort(Some(&high), "reasoning_effort").unwrap();
        assert_eq!(
            kwargs(on, json!({})),
            json!({"enable_thinking": true, "reasoning_effort": "high"})
        );
        let none = json!("none");
        let off = Thinking::from_effort(Some(&none), "reasoning_effort").unwrap();
        assert_eq!(kwargs(off, json!({})), json!({"enable_thinking": false}));
        assert_eq!(kwargs(Thinking::Default, json!({})), json!({}));
    }

    #[test]
    fn the_clients_own_template_kwargs_win() {
        let given = json!({"enable_thinking": false, "reasoning_effort": "low"});
        assert_eq!(kwargs(Thinking::On(Some("high")), given.clone()), given);
    }

    #[test]
    fn an_unknown_effort_is_refused_by_name() {
        let e = Thinking::from_effort(Some(&json!("max")), "reasoning.effort").unwrap_err();
        assert_eq!(e.param.as_deref(), Some("reasoning.effort"));
    }
}
