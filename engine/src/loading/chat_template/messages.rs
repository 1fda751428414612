//! Chat messages as clients send them, made into what this template takes.
//! Every protocol's messages pass through here before any template, so a
//! template only ever sees shapes it was written for:
//!
//! - content as a string or a list of text parts, per [`ContentForm`];
//! - `content` null or missing on an assistant turn (the official SDKs send
//!   it with `tool_calls`) as empty text;
//! - `developer` as `system`;
//! - image, audio and file parts refused by name (the models served take
//!   text only);
//! - on a template without tool syntax, tools (when it does not show
//!   them) and calls and results (when it does not show calls) in the
//!   plain-text form of [`super::plain_tools`].

use serde_json::{json, Value};

use super::plain_tools;
use super::traits::{ContentForm, TemplateTraits};
use crate::error::{EngineError, Result};

/// Part types that carry text, in any protocol's vocabulary.
const TEXT_PARTS: &[&str] = &["text", "input_text", "output_text"];

/// Part types of other inputs, and the input each one is.
const MEDIA_PARTS: &[(&str, &str)] = &[
    ("image_url", "image"),
    ("input_image", "image"),
    ("image", "image"),
    ("input_audio", "audio"),
    ("audio", "audio"),
    ("file", "file"),
    ("input_file", "file"),
    ("document", "document"),
    ("video_url", "video"),
    ("video", "video"),
];

/// The input a part type carries when it is not text (`image_url` is an
/// image), so every protocol refuses it in the same words.
pub fn media_kind(part_type: &str) -> Option<&'static str> {
    MEDIA_PARTS
        .iter()
        .find(|(t, _)| *t == part_type)
        .map(|(_, kind)| *kind)
}

/// The refusal of a non-text part: what it is and that the model takes no
/// such input.
pub fn media_refused(at: &str, part_type: &str, kind: &str) -> EngineError {
    EngineError::invalid_param(
        &format!("{at}.type"),
        format!("this model takes no {kind} input (a content part of type '{part_type}'); send text parts only"),
    )
}

/// The messages and tools the template is rendered with.
pub fn normalize(
    messages: &[Value],
    tools: Option<&[Value]>,
    traits: TemplateTraits,
) -> Result<(Vec<Value>, Option<Vec<Value>>)> {
    let mut read = Vec::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        let at = format!("messages[{i}]");
        let Some(obj) = m.as_object() else {
            return Err(EngineError::invalid_param(&at, "must be an object"));
        };
        let mut msg = obj.clone();
        let role = match obj.get("role").and_then(Value::as_str) {
            Some("developer") => "system",
            Some(r) => r,
            None => return Err(EngineError::invalid_param(&at, "needs a string 'role'")),
        };
        msg.insert("role".into(), role.into());
        if obj.get("tool_calls").is_some_and(Value::is_null) {
            msg.remove("tool_calls");
        }
        let texts = texts_of(obj.get("content"), role, &format!("{at}.content"))?;
        read.push((Value::Object(msg), texts));
    }
    let tools = tools.filter(|t| !t.is_empty());
    let has_calls = read
        .iter()
        .any(|(m, _)| m.get("tool_calls").is_some() || m["role"] == "tool");
    let plain_tools = tools.filter(|_| !traits.shows_tools);
    let plain_calls = has_calls && !traits.shows_calls;
    let with_content = |(mut m, texts): (Value, Texts)| {
        m["content"] = content_for(texts, traits.content);
        m
    };
    let native_tools = tools.filter(|_| traits.shows_tools).map(<[Value]>::to_vec);
    if plain_tools.is_none() && !plain_calls {
        return Ok((read.into_iter().map(with_content).collect(), native_tools));
    }
    // The plain-text form works on text: parts are joined first.
    let flat = read
        .into_iter()
        .map(|(mut m, texts)| {
            m["content"] = texts.joined().into();
            m
        })
        .collect();
    let out = plain_tools::render(flat, plain_tools.unwrap_or_default(), plain_calls)
        .into_iter()
        .map(|m| {
            let text = m["content"].as_str().unwrap_or_default().to_string();
            with_content((m, Texts::String(text)))
        })
        .collect();
    Ok((out, native_tools))
}

/// A message's text as sent: one string, or the texts of its parts.
enum Texts {
    String(String),
    Parts(Vec<String>),
}

impl Texts {
    fn joined(self) -> String {
        match self {
            Texts::String(s) => s,
            Texts::Parts(p) => p.join("\n"),
        }
    }
}

fn texts_of(content: Option<&Value>, role: &str, at: &str) -> Result<Texts> {
    match content {
        Some(Value::String(s)) => Ok(Texts::String(s.clone())),
        None | Some(Value::Null) if role == "assistant" => Ok(Texts::String(String::new())),
        None | Some(Value::Null) => Err(EngineError::invalid_param(
            at,
            "is required (a string or an array of content parts)",
        )),
        Some(Value::Array(parts)) => parts
            .iter()
            .enumerate()
            .map(|(j, p)| part_text(p, &format!("{at}[{j}]")))
            .collect::<Result<_>>()
            .map(Texts::Parts),
        Some(_) => Err(EngineError::invalid_param(
            at,
            "must be a string or an array of content parts",
        )),
    }
}

fn part_text(part: &Value, at: &str) -> Result<String> {
    let field = |key: &str| {
        part.get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| EngineError::invalid_param(&format!("{at}.{key}"), "must be a string"))
    };
    match part.get("type").and_then(Value::as_str) {
        Some(t) if TEXT_PARTS.contains(&t) => field("text"),
        // An assistant turn the client got back with a refusal part.
        Some("refusal") => field("refusal"),
        Some(t) => match media_kind(t) {
            Some(kind) => Err(media_refused(at, t, kind)),
            None => Err(EngineError::invalid_param(
                &format!("{at}.type"),
                format!("unknown content part type '{t}' (text parts are supported)"),
            )),
        },
        None => Err(EngineError::invalid_param(
            &format!("{at}.type"),
            "is required",
        )),
    }
}

/// Text in the template's form. Parts are joined with line breaks for a
/// string template (as vLLM joins them).
fn content_for(texts: Texts, form: ContentForm) -> Value {
    let part = |t: &str| json!({"type": "text", "text": t});
    match (texts, form) {
        (Texts::String(s), ContentForm::Text | ContentForm::Parts { strings: true }) => s.into(),
        (Texts::String(s), ContentForm::Parts { strings: false }) if s.is_empty() => json!([]),
        (Texts::String(s), ContentForm::Parts { strings: false }) => json!([part(&s)]),
        (texts @ Texts::Parts(_), ContentForm::Text) => texts.joined().into(),
        (Texts::Parts(p), ContentForm::Parts { .. }) => p.iter().map(|t| part(t)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: TemplateTraits = TemplateTraits {
        content: ContentForm::Text,
        shows_tools: true,
        shows_calls: true,
    };

    fn one(m: Value, traits: TemplateTraits) -> Result<Value> {
        Ok(normalize(&[m], None, traits)?.0.remove(0))
    }

    #[test]
    fn parts_are_joined_for_string_templates_and_kept_for_part_templates() {
        let m = json!({"role": "user", "content": [
            {"type": "text", "text": "a"}, {"type": "input_text", "text": "b"}]});
        assert_eq!(one(m.clone(), TEXT).unwrap()["content"], "a\nb");
        let parts = TemplateTraits {
            content: ContentForm::Parts { strings: false },
            ..TEXT
        };
        assert_eq!(
            one(m, parts).unwrap()["content"],
            json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
        );
        let s = json!({"role": "user", "content": "hi"});
        assert_eq!(
            one(s.clone(), parts).unwrap()["content"],
            json!([{"type": "text", "text": "hi"}])
        );
        let both = TemplateTraits {
            content: ContentForm::Parts { strings: true },
            ..TEXT
        };
        assert_eq!(one(s, both).unwrap()["content"], "hi");
    }

    #[test]
    fn assistant_content_may_be_null_or_missing() {
        let call = json!([{"id": "c", "type": "function",
            "function": {"name": "f", "arguments": "{}"}}]);
        for m in [
            json!({"role": "assistant", "content": null, "tool_calls": call}),
            json!({"role": "assistant", "tool_calls": call}),
        ] {
            let out = one(m, TEXT).unwrap();
            assert_eq!(out["content"], "");
            assert_eq!(out["tool_calls"], call);
        }
        let err = one(json!({"role": "user", "content": null}), TEXT).unwrap_err();
        assert!(err.to_string().contains("messages[0].content"), "{err}");
    }

    #[test]
    fn developer_is_system() {
        let out = one(json!({"role": "developer", "content": "be brief"}), TEXT).unwrap();
        assert_eq!(out["role"], "system");
    }

    #[test]
    fn media_parts_are_refused_by_name() {
        let m = json!({"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]});
        match one(m, TEXT).unwrap_err() {
            EngineError::InvalidRequest { message, param } => {
                assert_eq!(param.as_deref(), Some("messages[0].content[1].type"));
                assert!(message.contains("takes no image input"), "{message}");
                assert!(message.contains("image_url"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        let audio = json!({"role": "user", "content": [{"type": "input_audio"}]});
        assert!(one(audio, TEXT)
            .unwrap_err()
            .to_string()
            .contains("no audio input"));
    }

    #[test]
    fn tools_stay_for_templates_with_tool_syntax() {
        let tools = [json!({"type": "function", "function": {"name": "f"}})];
        let msgs = [json!({"role": "user", "content": "x"})];
        let (m, t) = normalize(&msgs, Some(&tools), TEXT).unwrap();
        assert_eq!(m, msgs.to_vec());
        assert_eq!(t.unwrap(), tools.to_vec());
    }
}
