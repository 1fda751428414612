//! Capability detection (the preflight): small probe requests find out
//! what the target does, judged by behaviour, not by what it claims.
//!
//! A capability is absent only when the server says so (a 4xx or 501 that
//! names the parameter, a missing endpoint, AFM's `downgraded` grammar
//! header) or the user does (`--assume-absent`, a profile); then the cases
//! that need it are skipped with that evidence. A parameter accepted with
//! 200 and then ignored is the very bug class of the seed reports, so its
//! cases run, fail, and say "accepted and ignored". Each probe's request
//! outcome is kept as evidence in the report.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::outcome::clip_to;
use crate::protocol::endpoint::{Endpoint, MODELS_PATH};
use crate::protocol::exchange::Exchange;
use crate::protocol::reply::Reply;
use crate::server::{Auth, Outgoing, Target};

/// Every capability a case may require. `batch_invariance` is not probed
/// (its cases are the test); it is absent only when the target says so:
/// the in-process engine whose model refuses `--deterministic` (routed
/// experts), or `--assume-absent`.
pub const ALL: [&str; 15] = [
    "chat",
    "messages",
    "responses",
    "api_key",
    "cors",
    "streaming",
    "completions",
    "logprobs",
    "tools",
    "grammar",
    "reasoning",
    "prefix_cache",
    "batch_invariance",
    "batch",
    "owned_process",
];

/// Markers of a thinking mode that must never reach `content`.
pub const REASONING_MARKERS: [&str; 4] = ["<think>", "</think>", "<|channel>", "<channel|>"];

/// What a probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// It works.
    Present,
    /// The server or the user says it is not there (or, for `reasoning`,
    /// the model shows no thinking mode): its cases are skipped.
    Absent,
    /// Accepted (200) and then ignored: its cases run and fail.
    Ignored,
    /// The server does not report what the cases measure (no
    /// `cached_tokens` field): its cases are skipped as "not reported".
    Unreported,
    /// The ability shows up in the wrong place (thinking markers in
    /// `content`): its cases run and fail.
    Misplaced,
    /// The probe failed without naming the parameter (5xx, transport
    /// error, or chat itself does not work): its cases run.
    Broken,
}

impl State {
    /// Whether cases needing the capability run.
    pub fn runs(self) -> bool {
        !matches!(self, State::Absent | State::Unreported)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            State::Present => "present",
            State::Absent => "absent",
            State::Ignored => "accepted and ignored",
            State::Unreported => "not reported",
            State::Misplaced => "misplaced",
            State::Broken => "broken",
        }
    }
}

/// What a probe saw of a capability a failed case needs, for its reason.
#[derive(Debug, Clone)]
pub struct ProbeNote {
    pub text: String,
    /// The probe's own evidence, to leave out a note the reason already
    /// tells (a case not run names the endpoint's first failure, which
    /// is often the probe's).
    pub evidence: String,
}

impl ProbeNote {
    /// Whether `reason` already tells what the probe saw: its evidence,
    /// or the evidence after the request it names (`POST /v1/...: `).
    fn told_in(&self, reason: &str) -> bool {
        let after_request = self
            .evidence
            .split_once(": ")
            .filter(|(request, _)| request.contains(" /"))
            .map(|(_, rest)| rest);
        reason.contains(self.evidence.as_str()) || after_request.is_some_and(|e| reason.contains(e))
    }
}

/// `reason` with the notes it does not already tell appended.
pub fn with_notes(reason: Option<String>, notes: &[ProbeNote]) -> Option<String> {
    let told = reason.as_deref().unwrap_or("");
    let new: Vec<&str> = notes
        .iter()
        .filter(|n| !n.told_in(told))
        .map(|n| n.text.as_str())
        .collect();
    match (reason, new.is_empty()) {
        (reason, true) => reason,
        (Some(r), false) => Some(format!("{r}; {}", new.join("; "))),
        (None, false) => Some(new.join("; ")),
    }
}

/// What was found: each capability with its state and the evidence.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Capabilities {
    pub found: BTreeMap<String, Detected>,
    /// The `model` of the chat probe's reply: the model actually served.
    #[serde(default)]
    pub served_model: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Detected {
    pub state: State,
    pub evidence: String,
}

/// Whether `name` is a capability cases may require.
pub fn is_known(name: &str) -> bool {
    ALL.contains(&name)
}

impl Capabilities {
    fn set(&mut self, name: &str, state: State, evidence: impl Into<String>) {
        self.found.insert(
            name.into(),
            Detected {
                state,
                evidence: evidence.into(),
            },
        );
    }

    /// The reason a case requiring `needs` is skipped, if it is.
    pub fn missing(&self, needs: &[String]) -> Option<String> {
        let absent: Vec<String> = needs
            .iter()
            .filter_map(|n| {
                let d = self.found.get(n)?;
                (!d.state.runs()).then(|| format!("{n} {}: {}", d.state.as_str(), d.evidence))
            })
            .collect();
        (!absent.is_empty()).then(|| format!("target lacks {}", absent.join("; ")))
    }

    /// What the probes saw of `needs` that explains a failure of a case
    /// that ran anyway (a capability accepted and ignored, misplaced, or
    /// broken).
    pub fn notes(&self, needs: &[String]) -> Vec<ProbeNote> {
        needs
            .iter()
            .filter_map(|n| {
                let d = self.found.get(n)?;
                (d.state.runs() && d.state != State::Present).then(|| ProbeNote {
                    text: format!("{n} {}: {}", d.state.as_str(), d.evidence),
                    evidence: d.evidence.clone(),
                })
            })
            .collect()
    }

    /// Marks a capability the user asserted (`--assume`), skipping its probe.
    pub fn assume(&mut self, name: &str) {
        self.set(name, State::Present, "assumed (--assume)");
    }

    /// Marks a capability the user declared absent (`--assume-absent`, a
    /// profile), with the reason given.
    pub fn assume_absent(&mut self, name: &str, reason: &str) {
        self.set(name, State::Absent, format!("declared absent: {reason}"));
    }

    /// Probes the target for every capability not already set. `nonce`
    /// keeps the cache probe's prompt unique to this run.
    pub async fn detect(target: &Target, nonce: &str) -> Capabilities {
        Self::default().probe(target, nonce).await
    }

    /// Probes what is not already set (by `--assume` or a profile), in
    /// [`ALL`]'s order.
    pub async fn probe(mut self, target: &Target, nonce: &str) -> Capabilities {
        // The three protocols' endpoints at once: a server that hangs on
        // each costs the run one request time limit, not three.
        let unset = |name| !self.found.contains_key(name);
        let hello = ask(json!({}));
        let (mut chat, messages, responses) = tokio::join!(
            target.post(CHAT, &hello),
            when(unset("messages"), probe_messages(target)),
            when(unset("responses"), probe_responses(target)),
        );
        let mut endpoints = [("messages", messages), ("responses", responses)];
        // A server that generates one request at a time may turn a probe
        // away only because the others were in flight (vllm-mlx: 503
        // `text_generation_busy`, 500 on /v1/messages). So each that did
        // not succeed is asked once more, alone. An endpoint that went
        // unanswered is not sent again (`Exchange::unanswered`), so a hang
        // still costs the run one time limit.
        if !chat_answered(&chat) {
            chat = target.post(CHAT, &hello).await;
        }
        for (name, probed) in endpoints.iter_mut() {
            if probed
                .as_ref()
                .is_some_and(|(state, _)| *state == State::Broken)
            {
                *probed = Some(match *name {
                    "messages" => probe_messages(target).await,
                    _ => probe_responses(target).await,
                });
            }
        }
        let chat_ok = chat_answered(&chat);
        self.served_model = chat.body["model"].as_str().map(str::to_string);
        for name in ALL {
            if self.found.contains_key(name) {
                continue;
            }
            if let Some((_, probed)) = endpoints.iter_mut().find(|(n, _)| *n == name) {
                if let Some((state, evidence)) = probed.take() {
                    self.set(name, state, evidence);
                }
                continue;
            }
            if !chat_ok && ALL[NEED_CHAT_FROM..].contains(&name) {
                // Nothing else can be told apart; every case runs and shows why.
                self.set(name, State::Broken, "not probed: chat completions fail");
                continue;
            }
            if let Some((state, evidence)) = probe_one(name, target, nonce, &chat, chat_ok).await {
                self.set(name, state, evidence);
            }
        }
        self
    }
}

/// Whether the chat probe got a chat completion.
fn chat_answered(chat: &Exchange) -> bool {
    chat.status == 200 && chat.body["choices"].is_array()
}

/// `probe`'s result, when `wanted` (else it is never polled: no request).
async fn when<T>(wanted: bool, probe: impl std::future::Future<Output = T>) -> Option<T> {
    match wanted {
        true => Some(probe.await),
        false => None,
    }
}

/// From here on in [`ALL`] (`streaming` onwards), a probe can tell a
/// capability apart only when chat works.
const NEED_CHAT_FROM: usize = 5;

/// One capability's probe: its state and the evidence (`None`: not probed,
/// as `batch_invariance`, whose cases are the test).
async fn probe_one(
    name: &str,
    target: &Target,
    nonce: &str,
    chat: &Exchange,
    chat_ok: bool,
) -> Option<(State, String)> {
    Some(match name {
        "chat" => {
            let state = if chat_ok {
                State::Present
            } else {
                State::Broken
            };
            (state, outcome(chat))
        }
        "api_key" => probe_api_key(target).await,
        "cors" => probe_cors(target).await,
        "streaming" => probe_streaming(target).await,
        "completions" => probe_completions(target).await,
        "logprobs" => probe_logprobs(target).await,
        "tools" => probe_tools(target).await,
        "grammar" => probe_grammar(target).await,
        "reasoning" => probe_reasoning(target).await,
        "prefix_cache" => probe_prefix_cache(target, nonce).await,
        "batch" => probe_batch(target).await,
        "owned_process" => match target.owned() {
            Some(pid) => (
                State::Present,
                format!("started by afm-test, process group {pid}"),
            ),
            None => (
                State::Absent,
                "afm-test did not start this server (--server)".into(),
            ),
        },
        _ => return None,
    })
}

async fn probe_messages(target: &Target) -> (State, String) {
    let m = target
        .post(
            Endpoint::Messages.path(),
            &json!({"max_tokens": 8, "messages": [{"role": "user", "content": "Say hello."}]}),
        )
        .await;
    let ok = m.status == 200 && m.body["type"] == "message";
    (endpoint_state(&m, ok), outcome(&m))
}

async fn probe_responses(target: &Target) -> (State, String) {
    let r = target
        .post(
            Endpoint::Responses.path(),
            &json!({"input": "Say hello.", "max_output_tokens": 16}),
        )
        .await;
    let ok = r.status == 200 && r.body["object"] == "response";
    (endpoint_state(&r, ok), outcome(&r))
}

/// OpenAI's Batch API: its list of batches answers.
async fn probe_batch(target: &Target) -> (State, String) {
    let b = target.get("/v1/batches?limit=1").await;
    let ok = b.status == 200 && b.body["object"] == "list";
    (endpoint_state(&b, ok), outcome(&b))
}

async fn probe_streaming(target: &Target) -> (State, String) {
    let s = target.post(CHAT, &ask(json!({"stream": true}))).await;
    let (state, seen) = if s.status == 200 && !s.chunks.is_empty() {
        (State::Present, format!("{} chunks", s.chunks.len()))
    } else {
        accepted_or_refused(&s, &["stream"], "no SSE chunks")
    };
    (state, format!("{}; {seen}", outcome(&s)))
}

async fn probe_completions(target: &Target) -> (State, String) {
    let c = target
        .post(
            Endpoint::Completions.path(),
            &json!({"prompt": "Hello", "max_tokens": 4, "temperature": 0}),
        )
        .await;
    let ok = c.status == 200 && c.body["choices"][0]["text"].is_string();
    (endpoint_state(&c, ok), outcome(&c))
}

async fn probe_logprobs(target: &Target) -> (State, String) {
    let lp = target
        .post(CHAT, &ask(json!({"logprobs": true, "top_logprobs": 2})))
        .await;
    let n = Reply::of(&lp).logprobs.len();
    let (state, seen) = if lp.status == 200 && n > 0 {
        (State::Present, format!("{n} logprob entries"))
    } else {
        accepted_or_refused(&lp, &["logprobs"], "no logprobs in the reply")
    };
    (state, format!("{}; {seen}", outcome(&lp)))
}

async fn probe_tools(target: &Target) -> (State, String) {
    let t = target.post(CHAT, &forced_tool_call("required")).await;
    let n = Reply::of(&t).tool_calls.len();
    if t.status == 200 && n > 0 {
        return (State::Present, format!("{}; {n} tool calls", outcome(&t)));
    }
    let (state, seen) = accepted_or_refused(
        &t,
        &["tool"],
        "no tool call although tool_choice was required",
    );
    let required = format!("{}; {seen}", outcome(&t));
    if state != State::Absent {
        return (state, required);
    }
    // A server may refuse only "required" (mistral.rs's ToolChoice takes
    // "auto", "none" and a named function). Calling tools absent for that
    // would turn every tools case's failure into a skip, so ask once more
    // with "auto": a tool call then shows the server has tools.
    let a = target.post(CHAT, &forced_tool_call("auto")).await;
    let m = Reply::of(&a).tool_calls.len();
    if a.status == 200 && m > 0 {
        (
            State::Present,
            format!(
                "{required}; with tool_choice \"auto\": {}; {m} tool calls",
                outcome(&a)
            ),
        )
    } else {
        (
            State::Absent,
            format!(
                "{required}; with tool_choice \"auto\": {}, no tool call",
                outcome(&a)
            ),
        )
    }
}

/// Thinking asked for by the template switch local servers pass on (vLLM,
/// llama-server, mlx-lm): a model that thinks only when asked (Gemma 4)
/// would otherwise look thoughtless and its reasoning cases would hide as
/// skips. A server that refuses the field is asked again without it.
async fn probe_reasoning(target: &Target) -> (State, String) {
    let mut ask_thinking = json!({"messages": [{"role": "user", "content": "Is 17 a prime number? Think first."}],
                    "max_tokens": 64, "temperature": 0,
                    "chat_template_kwargs": {"enable_thinking": true}});
    let mut r = target.post(CHAT, &ask_thinking).await;
    if r.status == 400 {
        ask_thinking
            .as_object_mut()
            .map(|o| o.remove("chat_template_kwargs"));
        r = target.post(CHAT, &ask_thinking).await;
    }
    let reply = Reply::of(&r);
    let leaked: Vec<&str> = REASONING_MARKERS
        .iter()
        .copied()
        .filter(|m| reply.content.contains(m))
        .collect();
    let (state, seen) = if !reply.reasoning.is_empty() {
        (
            State::Present,
            format!("{} bytes of reasoning", reply.reasoning.len()),
        )
    } else if !leaked.is_empty() {
        (
            State::Misplaced,
            format!("thinking markers {leaked:?} in content"),
        )
    } else {
        (
            State::Absent,
            "no reasoning and no thinking markers: the model shows no thinking mode".into(),
        )
    };
    (state, format!("{}; {seen}", outcome(&r)))
}

async fn probe_prefix_cache(target: &Target, nonce: &str) -> (State, String) {
    let long = json!({"messages": [
        {"role": "system", "content": format!("Preflight {nonce}. {}", crate::suite::filler::sentences(40))},
        {"role": "user", "content": "Say hello."}], "max_tokens": 2, "temperature": 0});
    let _cold = target.post(CHAT, &long).await;
    let warm = target.post(CHAT, &long).await;
    let reply = Reply::of(&warm);
    let prompt = reply.usage_field("prompt_tokens").unwrap_or(0);
    let (state, seen) = match reply.usage_field("prompt_tokens_details.cached_tokens") {
        Some(0) => (
            State::Ignored,
            format!("cached_tokens 0 of {prompt} on a repeated prompt"),
        ),
        Some(n) => (
            State::Present,
            format!("cached_tokens {n} of {prompt} on a repeated prompt"),
        ),
        None if warm.status == 200 => (
            State::Unreported,
            "usage.prompt_tokens_details.cached_tokens is not in the reply".into(),
        ),
        None => (State::Broken, "no usable reply".into()),
    };
    (state, format!("{}; {seen}", outcome(&warm)))
}

const CHAT: &str = Endpoint::Chat.path();

fn ask(extra: Value) -> Value {
    let mut body = json!({
        "messages": [{"role": "user", "content": "Say hello."}],
        "max_tokens": 8,
        "temperature": 0
    });
    if let (Value::Object(b), Value::Object(e)) = (&mut body, extra) {
        b.extend(e);
    }
    body
}

/// A request the model answers with a call to `get_time`; `tool_choice`
/// "required" forces it where the server supports that.
fn forced_tool_call(tool_choice: &str) -> Value {
    json!({"messages": [{"role": "user", "content": "What time is it in Paris? Use the tool."}],
           "tools": [{"type": "function", "function": {"name": "get_time",
               "description": "Current time in a city",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                              "required": ["city"]}}}],
           "tool_choice": tool_choice, "max_tokens": 60, "temperature": 0})
}

/// A schema no unconstrained reply to "Say hello." meets: only a server
/// that enforces it gives a valid reply.
fn probe_schema() -> Value {
    json!({"type": "object",
           "properties": {"probe_code": {"type": "integer", "minimum": 7000, "maximum": 7999},
                          "probe_word": {"enum": ["zephyr-quartz"]}},
           "required": ["probe_code", "probe_word"], "additionalProperties": false})
}

async fn probe_grammar(target: &Target) -> (State, String) {
    let schema = probe_schema();
    let g = target
        .post(
            CHAT,
            &ask(
                json!({"max_tokens": 200, "response_format": {"type": "json_schema",
                "json_schema": {"name": "probe", "strict": true, "schema": schema}}}),
            ),
        )
        .await;
    let header = g.headers.get("x-grammar-constraints").cloned();
    let reply = Reply::of(&g);
    let content = reply.content;
    let valid = serde_json::from_str::<Value>(content.trim())
        .ok()
        .is_some_and(|v| jsonschema::is_valid(&schema, &v));
    // A small model under a grammar may spend max_tokens on whitespace
    // inside the object; the schema's made-up key still shows the grammar.
    let cut_inside = crate::protocol::reply::is_token_limit(reply.finish_reason.as_deref())
        && content.trim_start().starts_with('{')
        && content.contains("\"probe_code\"");
    let mut evidence = format!("{}; content {}", outcome(&g), clip_to(&content, 120));
    if let Some(h) = &header {
        evidence.push_str(&format!("; X-Grammar-Constraints: {h}"));
    }
    let state = if header.as_deref() == Some("downgraded") {
        State::Absent
    } else if g.status == 200 && (valid || cut_inside) {
        State::Present
    } else {
        let (state, seen) = accepted_or_refused(
            &g,
            &["response_format", "json_schema"],
            "the reply does not meet the schema",
        );
        evidence.push_str(&format!("; {seen}"));
        state
    };
    (state, evidence)
}

/// An endpoint's probe: it works, it is not there (404, 405, 501), or it
/// fails otherwise.
fn endpoint_state(ex: &Exchange, ok: bool) -> State {
    if ok {
        State::Present
    } else if matches!(ex.status, 404 | 405 | 501) {
        State::Absent
    } else {
        State::Broken
    }
}

/// Key checks need a key: without one given there is nothing to check
/// (absent, by the user's word); with one, a request without it must be
/// refused.
async fn probe_api_key(target: &Target) -> (State, String) {
    if target.api_key().is_none() {
        return (
            State::Absent,
            "no API key given (--api-key; in-process runs set one)".into(),
        );
    }
    let mut out = Outgoing::get(MODELS_PATH);
    out.auth = Auth::Missing;
    let ex = target.send(out).await;
    let evidence = format!("GET {MODELS_PATH} without the key -> {}", ex.status);
    let state = match ex.status {
        401 | 403 => State::Present,
        200 => State::Ignored,
        _ => State::Broken,
    };
    (state, evidence)
}

/// CORS is no part of the OpenAI or Anthropic APIs: a server that
/// refuses a browser's preflight (405, 404) simply has no CORS, and its
/// CORS cases skip; one that answers it has CORS, and its cases check the
/// answer.
async fn probe_cors(target: &Target) -> (State, String) {
    let mut out = Outgoing::get(CHAT);
    out.method = "OPTIONS".into();
    out.auth = Auth::Missing;
    out.headers = vec![
        ("origin".into(), "http://localhost:3000".into()),
        ("access-control-request-method".into(), "POST".into()),
    ];
    let ex = target.send(out).await;
    if let Some(e) = &ex.transport_error {
        return (State::Broken, format!("OPTIONS preflight: {e}"));
    }
    let evidence = format!("OPTIONS /v1/chat/completions preflight -> {}", ex.status);
    let state = match ex.status {
        200..=299 => State::Present,
        400..=499 => State::Absent,
        _ => State::Broken,
    };
    (state, evidence)
}

/// A probe whose feature did not show: refused by name (absent), accepted
/// and ignored (200), or failed otherwise (broken).
fn accepted_or_refused(ex: &Exchange, params: &[&str], ignored: &str) -> (State, String) {
    if ex.status == 200 {
        return (State::Ignored, ignored.into());
    }
    let body = ex.body.to_string().to_ascii_lowercase();
    let named = params
        .iter()
        .find(|p| body.contains(&p.to_ascii_lowercase()));
    match named {
        Some(p) if (400..500).contains(&ex.status) || ex.status == 501 => (
            State::Absent,
            format!(
                "refused, naming {p:?}: {}",
                clip_to(&ex.body.to_string(), 200)
            ),
        ),
        _ => (
            State::Broken,
            format!("failed: {}", clip_to(&ex.body.to_string(), 200)),
        ),
    }
}

/// The request's path and status, or the transport error.
fn outcome(ex: &Exchange) -> String {
    match &ex.transport_error {
        Some(e) => format!("POST {}: {e}", ex.path),
        None => format!("POST {} -> {}", ex.path, ex.status),
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_probe_note_the_reason_already_tells_is_left_out() {
        let note = |cap: &str, evidence: &str| ProbeNote {
            text: format!("{cap} broken: {evidence}"),
            evidence: evidence.to_string(),
        };
        let timeout = "the reply did not end within the request time limit";
        let notes = [
            note("chat", &format!("POST /v1/chat/completions: {timeout}")),
            note("streaming", "no SSE chunks"),
        ];
        let not_run =
            format!("not run: POST /v1/chat/completions went unanswered, the first: {timeout}");
        assert_eq!(
            with_notes(Some(not_run.clone()), &notes).unwrap(),
            format!("{not_run}; streaming broken: no SSE chunks")
        );
        assert_eq!(
            with_notes(Some("content empty".into()), &notes[..1]).unwrap(),
            format!("content empty; chat broken: POST /v1/chat/completions: {timeout}")
        );
        assert_eq!(
            with_notes(None, &notes[1..]).unwrap(),
            "streaming broken: no SSE chunks"
        );
        assert_eq!(with_notes(None, &[]), None);
    }
    use super::*;

    /// The endpoints and server settings are probed whatever chat does;
    /// every capability after them needs a working chat.
    #[test]
    fn the_probes_that_need_chat_start_after_cors() {
        assert_eq!(ALL[NEED_CHAT_FROM - 1], "cors");
        assert_eq!(ALL[NEED_CHAT_FROM], "streaming");
    }
}
