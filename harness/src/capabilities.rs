//! Capability detection (the preflight): small probe requests find out
//! what the target can do, so cases it cannot pass for want of a feature
//! are skipped with the reason instead of failing.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::reply::Reply;
use crate::target::Target;

/// Every capability a case may require.
pub const ALL: [&str; 8] = [
    "chat",
    "streaming",
    "completions",
    "logprobs",
    "tools",
    "grammar",
    "reasoning",
    "prefix_cache",
];

/// What was found: each capability, present or not, with the evidence.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Capabilities {
    pub found: BTreeMap<String, Detected>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Detected {
    pub present: bool,
    pub evidence: String,
}

impl Capabilities {
    /// The reason a case requiring `needs` cannot run, if any.
    pub fn missing(&self, needs: &[String]) -> Option<String> {
        let absent: Vec<String> = needs
            .iter()
            .filter(|n| !self.found.get(*n).is_some_and(|d| d.present))
            .map(|n| match self.found.get(n) {
                Some(d) => format!("{n}: {}", d.evidence),
                None => format!("{n}: unknown capability"),
            })
            .collect();
        (!absent.is_empty()).then(|| format!("target lacks {}", absent.join("; ")))
    }

    /// Marks capabilities the user asserted (`--assume`), skipping probes.
    pub fn assume(&mut self, name: &str) {
        self.found.insert(
            name.into(),
            Detected {
                present: true,
                evidence: "assumed (--assume)".into(),
            },
        );
    }

    /// Probes the target.
    pub async fn detect(target: &Target) -> Capabilities {
        let mut caps = Capabilities::default();
        let mut set = |name: &str, present: bool, evidence: String| {
            caps.found
                .insert(name.into(), Detected { present, evidence });
        };
        let ask = |extra: Value| {
            let mut body = json!({
                "messages": [{"role": "user", "content": "Say hello."}],
                "max_tokens": 8,
                "temperature": 0
            });
            if let (Value::Object(b), Value::Object(e)) = (&mut body, extra) {
                b.extend(e);
            }
            body
        };

        let chat = target.post("/v1/chat/completions", &ask(json!({}))).await;
        let chat_ok = chat.status == 200 && chat.body["choices"].is_array();
        set("chat", chat_ok, format!("status {}", chat.status));
        if !chat_ok {
            for name in ALL.iter().skip(1) {
                set(name, false, "chat completions do not work".into());
            }
            return caps;
        }

        let s = target
            .post("/v1/chat/completions", &ask(json!({"stream": true})))
            .await;
        set(
            "streaming",
            s.status == 200 && !s.chunks.is_empty(),
            format!("status {}, {} chunks", s.status, s.chunks.len()),
        );

        let c = target
            .post(
                "/v1/completions",
                &json!({"prompt": "Hello", "max_tokens": 4, "temperature": 0}),
            )
            .await;
        set(
            "completions",
            c.status == 200 && c.body["choices"][0]["text"].is_string(),
            format!("status {}", c.status),
        );

        let lp = target
            .post(
                "/v1/chat/completions",
                &ask(json!({"logprobs": true, "top_logprobs": 2})),
            )
            .await;
        let lp_reply = Reply::of(&lp);
        set(
            "logprobs",
            !lp_reply.logprobs.is_empty(),
            format!("{} logprob entries", lp_reply.logprobs.len()),
        );

        let tool = json!([{"type": "function", "function": {"name": "get_time",
            "description": "Current time in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"]}}}]);
        let t = target
            .post(
                "/v1/chat/completions",
                &json!({"messages": [{"role": "user", "content": "What time is it in Paris? Use the tool."}],
                        "tools": tool, "tool_choice": "required", "max_tokens": 60, "temperature": 0}),
            )
            .await;
        let t_reply = Reply::of(&t);
        set(
            "tools",
            !t_reply.tool_calls.is_empty(),
            format!(
                "status {}, {} tool calls for tool_choice required",
                t.status,
                t_reply.tool_calls.len()
            ),
        );

        let g = target
            .post(
                "/v1/chat/completions",
                &ask(json!({"response_format": {"type": "json_object"}, "max_tokens": 30})),
            )
            .await;
        let header = g.headers.get("x-grammar-constraints").cloned();
        set(
            "grammar",
            header.as_deref() == Some("enforced"),
            format!("X-Grammar-Constraints: {header:?}"),
        );

        let r = target
            .post(
                "/v1/chat/completions",
                &json!({"messages": [{"role": "user", "content": "Is 17 a prime number? Think first."}],
                        "max_tokens": 64, "temperature": 0}),
            )
            .await;
        let r_reply = Reply::of(&r);
        set(
            "reasoning",
            !r_reply.reasoning.is_empty(),
            format!("{} bytes of reasoning_content", r_reply.reasoning.len()),
        );

        let long = json!({"messages": [
            {"role": "system", "content": format!("Preflight {}", "cache probe text. ".repeat(40))},
            {"role": "user", "content": "Say hello."}], "max_tokens": 2, "temperature": 0});
        let _cold = target.post("/v1/chat/completions", &long).await;
        let warm = target.post("/v1/chat/completions", &long).await;
        let cached = Reply::of(&warm)
            .usage_field("prompt_tokens_details.cached_tokens")
            .unwrap_or(0);
        set(
            "prefix_cache",
            cached > 0,
            format!("{cached} cached tokens on a repeated prompt"),
        );
        caps
    }
}
