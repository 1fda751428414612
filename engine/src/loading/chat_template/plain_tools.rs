//! Tools for a template that has no tool syntax (the bundled SmolLM2's
//! prints only roles and text), so a tool loop works on every model, as
//! llama.cpp's server does for such templates. The model then sees (each
//! part only where the template lacks its own):
//!
//! - the offered tools at the end of the system message (one is added
//!   first when there is none), as JSON lines inside `<tools>` with how to
//!   call them;
//! - each past call of an assistant turn after its text, as
//!   `<tool_call>\n{"name": .., "arguments": ..}\n</tool_call>`;
//! - tool results as a user turn of `<tool_response>\n..\n</tool_response>`
//!   blocks (consecutive results share one turn, so templates that demand
//!   alternating roles accept it).
//!
//! That is the hermes format, which the engine parses and forces calls in
//! for templates without markers of their own.

use serde_json::{json, Value};

const INSTRUCTIONS: &str = "You may call one or more of the tools below. \
Their signatures, as JSON, are within <tools></tools>:";

const HOW_TO_CALL: &str = "To call a tool, write a JSON object with its name and arguments \
within <tool_call></tool_call> tags:\n<tool_call>\n{\"name\": <tool-name>, \"arguments\": <arguments-object>}\n</tool_call>";

/// `messages` (string contents) with `tools` listed in the system message
/// and, when `calls`, past calls and tool results as text.
pub fn render(mut messages: Vec<Value>, tools: &[Value], calls: bool) -> Vec<Value> {
    if !tools.is_empty() {
        let listed: Vec<String> = tools.iter().map(Value::to_string).collect();
        let block = format!(
            "{INSTRUCTIONS}\n<tools>\n{}\n</tools>\n\n{HOW_TO_CALL}",
            listed.join("\n")
        );
        if messages.first().is_none_or(|m| m["role"] != "system") {
            messages.insert(0, json!({"role": "system", "content": ""}));
        }
        let system = &mut messages[0]["content"];
        *system = match system.as_str().unwrap_or_default() {
            "" => block.into(),
            text => format!("{text}\n\n{block}").into(),
        };
    }
    if !calls {
        return messages;
    }
    let mut out: Vec<Value> = Vec::with_capacity(messages.len());
    // Whether the last turn out is tool results, which the next joins.
    let mut last_is_results = false;
    for mut m in messages {
        let is_results = m["role"] == "tool";
        if is_results {
            let block = format!(
                "<tool_response>\n{}\n</tool_response>",
                m["content"].as_str().unwrap_or_default()
            );
            match out.last_mut() {
                Some(prev) if last_is_results => {
                    let text = prev["content"].as_str().unwrap_or_default();
                    prev["content"] = format!("{text}\n{block}").into();
                }
                _ => out.push(json!({"role": "user", "content": block})),
            }
        } else if let Some(calls) = m.as_object_mut().and_then(|o| o.remove("tool_calls")) {
            let mut text = m["content"].as_str().unwrap_or_default().to_string();
            for call in calls.as_array().into_iter().flatten() {
                let f = &call["function"];
                // Arguments arrive as a JSON string (OpenAI) or an object.
                let args = match &f["arguments"] {
                    Value::String(s) => {
                        serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone()))
                    }
                    other => other.clone(),
                };
                if !text.is_empty() {
                    text.push('\n');
                }
                let call = json!({"name": f["name"], "arguments": args});
                text.push_str(&format!("<tool_call>\n{call}\n</tool_call>"));
            }
            m["content"] = text.into();
            out.push(m);
        } else {
            out.push(m);
        }
        last_is_results = is_results;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_loop_becomes_text_turns() {
        let tools = [json!({"type": "function", "function": {"name": "get_weather"}})];
        let messages = vec![
            json!({"role": "user", "content": "Weather in Paris?"}),
            json!({"role": "assistant", "content": "", "tool_calls": [
                {"id": "a", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
                {"id": "b", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\": \"Lyon\"}"}}]}),
            json!({"role": "tool", "tool_call_id": "a", "content": "18 C"}),
            json!({"role": "tool", "tool_call_id": "b", "content": "20 C"}),
        ];
        let out = render(messages, &tools, true);
        assert_eq!(out.len(), 4);
        assert_eq!(out[0]["role"], "system");
        let system = out[0]["content"].as_str().unwrap();
        assert!(system.contains("<tools>\n{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}}\n</tools>"), "{system}");
        assert_eq!(out[1]["role"], "user");
        assert_eq!(
            out[2]["content"],
            "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}\n</tool_call>\n\
             <tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Lyon\"}}\n</tool_call>"
        );
        assert!(out[2].get("tool_calls").is_none());
        assert_eq!(out[3]["role"], "user");
        assert_eq!(
            out[3]["content"],
            "<tool_response>\n18 C\n</tool_response>\n<tool_response>\n20 C\n</tool_response>"
        );
    }

    #[test]
    fn tools_join_an_existing_system_message() {
        let tools = [json!({"type": "function", "function": {"name": "f"}})];
        let out = render(
            vec![
                json!({"role": "system", "content": "Be brief."}),
                json!({"role": "user", "content": "x"}),
            ],
            &tools,
            false,
        );
        assert_eq!(out.len(), 2);
        assert!(out[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("Be brief.\n\nYou may call"));
    }
}
