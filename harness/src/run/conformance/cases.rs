//! Runs selected cases against a target: fills placeholders, plays each
//! case's scenario, evaluates its checks, and records what happened.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use tokio::sync::{Barrier, Semaphore};

use crate::clients::grade::{regrade, Replayed};
use crate::clients::Clients;
use crate::protocol::dialect::Dialect;
use crate::protocol::endpoint::MODELS_PATH;
use crate::protocol::exchange::Exchange;
use crate::protocol::reply::Reply;
use crate::report::{CaseResult, Status, StepRecord};
use crate::run::conformance::{batch, shutdown};
use crate::server::{Leave, Outgoing, Target};
use crate::suite::capabilities::{with_notes, Capabilities};
use crate::suite::filler;
use crate::suite::{Case, Mode, Scenario, Section, Selection};

/// Settings of one run.
#[derive(Clone)]
pub struct RunOptions {
    pub selection: Selection,
    /// Cases run at the same time (1: one after another).
    pub concurrency: usize,
    /// The `seed` of requests that set none (sampling reproducible).
    pub seed: u64,
    /// A case off the published schema's letter only fails (else it is
    /// graded `spec`).
    pub strict: bool,
    /// Unique to the run whatever the seed: the `{{nonce}}`s derive from
    /// it, so no cache of an earlier run against the same server helps.
    pub nonce: u64,
    /// The official clients that replay each exchange of a case that did
    /// not pass, and grade it by what they did (`--clients`).
    pub clients: Option<Arc<Clients>>,
    /// Attempts of every case (`--repeat`, at least 1).
    pub repeat: usize,
    /// Further attempts of each case that failed (`--rerun-failures`).
    pub rerun_failures: usize,
}

/// A value no other run shares: the clock's nanoseconds and the process id.
pub fn run_nonce() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    mix(nanos, u64::from(std::process::id()))
}

/// Runs every selected case; `progress` is told after each one.
pub async fn run(
    target: &Target,
    sections: &[Section],
    capabilities: &Capabilities,
    options: &RunOptions,
    progress: impl Fn(&CaseResult) + Send + Sync + 'static,
) -> Vec<CaseResult> {
    let progress = Arc::new(progress);
    let limit = Arc::new(Semaphore::new(options.concurrency.max(1)));
    let mut handles = Vec::new();
    let mut finished: Vec<CaseResult> = Vec::new();
    let mut ordinal = 0u64;
    // The server's stop ends it for every case: it goes last.
    let last = |c: &Case| matches!(c.scenario, Scenario::Shutdown);
    let ordered = sections
        .iter()
        .flat_map(|s| s.cases.iter().filter(|c| !last(c)).map(move |c| (s, c)))
        .chain(
            sections
                .iter()
                .flat_map(|s| s.cases.iter().filter(|c| last(c)).map(move |c| (s, c))),
        );
    for (section, case) in ordered {
        {
            if !options.selection.includes(section, case) {
                continue;
            }
            if last(case) {
                // Every other case done first.
                for h in handles.drain(..) {
                    let done: Result<CaseResult, _> = h.await;
                    finished.push(done.unwrap_or_else(|e| panic!("a case task failed: {e}")));
                }
            }
            ordinal += 1;
            let (target, case, section_id) =
                (target.clone(), case.clone(), section.section.clone());
            let missing = capabilities.missing(&case.requires);
            let notes = capabilities.notes(&case.requires);
            let (limit, progress) = (limit.clone(), progress.clone());
            let nonce = format!("{:x}", mix(options.nonce, ordinal));
            let (seed, strict) = (options.seed, options.strict);
            let (repeat, rerun) = (options.repeat.max(1), options.rerun_failures);
            let clients = options.clients.clone();
            // Taken here, in file order, so cases start in the order listed.
            let slot = limit.acquire_owned().await.expect("semaphore");
            handles.push(tokio::spawn(async move {
                let _slot = slot;
                let result = match missing {
                    Some(reason) => CaseResult::skipped(&section_id, &case, reason),
                    None => {
                        let mut runs = Vec::new();
                        // Each attempt its own nonce: no attempt finds the
                        // last one's prompts in a cache.
                        let attempt = |k: usize| {
                            let (target, clients) = (&target, clients.clone());
                            let (case, section_id) = (&case, &section_id);
                            let nonce = if k == 0 {
                                nonce.clone()
                            } else {
                                format!("{nonce}{k:x}")
                            };
                            async move {
                                let mut r =
                                    run_case(target, section_id, case, &nonce, seed, clients).await;
                                if strict && r.result.status.graded_apart() {
                                    r.result.status = Status::Fail;
                                }
                                r
                            }
                        };
                        for k in 0..repeat {
                            runs.push(attempt(k).await);
                        }
                        // The cheap habit CI wants: only what failed again
                        // (a case that never reached the server proves
                        // nothing when run again).
                        if runs.iter().all(|r| r.result.status.failed()) && runs[0].reached {
                            for k in 0..rerun {
                                runs.push(attempt(repeat + k).await);
                            }
                        }
                        let mut r =
                            CaseResult::of_attempts(runs.into_iter().map(|r| r.result).collect())
                                .expect("one attempt at least");
                        // What the probes saw explains why it failed.
                        if r.status.failed() {
                            r.reason = with_notes(r.reason.take(), &notes);
                        }
                        r
                    }
                };
                progress(&result);
                result
            }));
        }
    }
    let mut results = finished;
    for h in handles {
        match h.await {
            Ok(r) => results.push(r),
            Err(e) => panic!("a case task failed: {e}"),
        }
    }
    results
}

/// `id` as one path segment, percent-encoded as openai-python's
/// `models.retrieve` sends it (`quote(id, safe="!$&'()*+,;=:@")`): a
/// model id that is a folder or an `org/name` repo keeps its slashes
/// encoded, so a server sees one id, not a longer path.
fn path_segment(id: &str) -> String {
    use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
    const KEPT: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~')
        .remove(b'!')
        .remove(b'$')
        .remove(b'&')
        .remove(b'\'')
        .remove(b'(')
        .remove(b')')
        .remove(b'*')
        .remove(b'+')
        .remove(b',')
        .remove(b';')
        .remove(b'=')
        .remove(b':')
        .remove(b'@');
    utf8_percent_encode(id, KEPT).to_string()
}

/// The results of a run stopped early: those that finished, then every
/// other selected case as an error "not run" with `why` (never a skip: a
/// case that did not run proves nothing), in the suites' order.
pub fn with_not_run(
    sections: &[Section],
    selection: &Selection,
    finished: Vec<CaseResult>,
    why: &str,
) -> Vec<CaseResult> {
    let mut by_id: std::collections::HashMap<String, CaseResult> =
        finished.into_iter().map(|r| (r.id.clone(), r)).collect();
    let mut out = Vec::new();
    for section in sections {
        for case in section
            .cases
            .iter()
            .filter(|c| selection.includes(section, c))
        {
            out.push(
                by_id
                    .remove(&case.id)
                    .unwrap_or_else(|| CaseResult::unfinished(&section.section, case, why)),
            );
        }
    }
    out
}

/// SplitMix64 step: distinct nonces per case from the run's nonce.
fn mix(seed: u64, n: u64) -> u64 {
    let mut z = seed.wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One attempt of a case, and whether its requests reached the server
/// (none does on an endpoint closed for the run).
struct CaseRun {
    result: CaseResult,
    reached: bool,
}

async fn run_case(
    target: &Target,
    section: &str,
    case: &Case,
    nonce: &str,
    seed: u64,
    clients: Option<Arc<Clients>>,
) -> CaseRun {
    let start = Instant::now();
    let mut plays = Vec::new();
    for &stream in modes(case) {
        let (exchanges, subjects) = play(target, case, stream, nonce, seed).await;
        // An endpoint closed for the run: nothing to grade.
        if let Some(why) = exchanges.iter().find(|e| e.not_sent) {
            let why = why.transport_error.clone();
            let steps = plays
                .iter()
                .flat_map(|p: &Play| &p.exchanges)
                .chain(&exchanges)
                .map(StepRecord::of)
                .collect();
            let result = CaseResult {
                steps,
                millis: start.elapsed().as_secs_f64() * 1000.0,
                ..CaseResult::of_case(section, case, Status::Error, why)
            };
            return CaseRun {
                result,
                reached: false,
            };
        }
        plays.push(Play {
            stream,
            exchanges,
            subjects,
        });
    }
    let result = CaseResult {
        millis: start.elapsed().as_secs_f64() * 1000.0,
        ..grade(section, case, plays, clients).await
    };
    CaseRun {
        result,
        reached: true,
    }
}

/// One play of a case's scenario: whether it streamed, its exchanges,
/// and the indices of those its checks read.
pub struct Play {
    pub stream: bool,
    pub exchanges: Vec<Exchange>,
    pub subjects: Vec<usize>,
}

/// Whether each play of `case` streams: a case sent both ways plays
/// twice, whole first.
pub fn modes(case: &Case) -> &'static [bool] {
    match (&case.scenario, case.mode) {
        (Scenario::StreamPair | Scenario::Raw { .. } | Scenario::Batch { .. }, _) => &[false],
        (Scenario::Disconnect { .. } | Scenario::Shutdown, _) => &[true],
        (_, Mode::NonStream) => &[false],
        (_, Mode::Stream) => &[true],
        (_, Mode::Both) => &[false, true],
    }
}

/// A case's result from its plays: its checks over each play, a
/// template engine's error text or a stream past its budget anywhere,
/// and where something failed, the official clients' word on each step.
/// The same for a live run and for `afm-test regrade`, which rebuilds the
/// plays from a report's stored bytes.
pub async fn grade(
    section: &str,
    case: &Case,
    plays: Vec<Play>,
    clients: Option<Arc<Clients>>,
) -> CaseResult {
    let both = plays.len() > 1;
    let mut steps = Vec::new();
    let mut failures = Vec::new();
    let mut played = Vec::new();
    for (k, p) in plays.into_iter().enumerate() {
        for spec in &case.checks {
            for mut f in spec.evaluate(&p.exchanges, &p.subjects) {
                if both {
                    f.actual = format!("[{}] {}", mode_name(p.stream), f.actual);
                }
                failures.push(f);
            }
        }
        failures.extend(p.exchanges.iter().filter_map(template_error_leak));
        failures.extend(p.exchanges.iter().filter_map(|ex| {
            ex.overran.as_ref().map(|why| {
                crate::suite::checks::Failure::new(
                    "max_tokens",
                    "a stream that ends within its max_tokens".into(),
                    why.clone(),
                )
            })
        }));
        steps.extend(p.exchanges.iter().enumerate().map(|(i, ex)| StepRecord {
            play: k,
            subject: p.subjects.contains(&i),
            ..StepRecord::of(ex)
        }));
        played.extend(p.exchanges);
    }
    if !failures.is_empty() {
        if let Some(clients) = clients {
            replay(&clients, &mut steps, played).await;
        }
        let replayed: Vec<Replayed> = steps
            .iter()
            .map(|s| Replayed::of(&s.path, &s.request, s.streamed, s.status, s.client.as_ref()))
            .collect();
        regrade(case, &mut failures, &replayed);
    }
    let errored = steps.iter().find_map(|s| s.transport_error.clone());
    let status = Status::graded(errored.is_some(), failures.iter().map(|f| f.grade));
    CaseResult {
        failures,
        steps,
        ..CaseResult::of_case(section, case, status, errored)
    }
}

/// Each exchange replayed through its official client (off the runtime's
/// threads: the replay waits on a Python process), the outcomes kept in
/// the steps.
async fn replay(clients: &Arc<Clients>, steps: &mut [StepRecord], played: Vec<Exchange>) {
    let clients = clients.clone();
    let outcomes = tokio::task::spawn_blocking(move || {
        played
            .iter()
            .map(|ex| clients.replay(ex))
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_default();
    for (step, outcome) in steps.iter_mut().zip(outcomes) {
        step.client = outcome;
    }
}

/// Text of a template engine's own failure (Jinja, minijinja, minja) as
/// servers pass it on. No such text is ever an answer to a request the
/// suites send: valid input must render, and invalid input deserves a
/// message that names what is wrong with it.
const TEMPLATE_ERROR_SIGNS: &[&str] = &[
    "(in chat:",
    "invalid operation:",
    "jinja",
    "templateerror",
    "undefinederror",
    "can only concatenate",
    "unsupported operand type",
    "has no attribute",
    "is not iterable",
];

/// Every case fails when a reply carries a template engine's error text
/// (in an error body, an error event, or any reply of status >= 400).
fn template_error_leak(ex: &Exchange) -> Option<crate::suite::checks::Failure> {
    let reply = Reply::of(ex);
    let text = match (&reply.error, ex.status >= 400) {
        (Some(e), _) => e.to_string(),
        (None, true) => ex.body.to_string(),
        (None, false) => return None,
    };
    let lower = text.to_lowercase();
    TEMPLATE_ERROR_SIGNS
        .iter()
        .any(|sign| lower.contains(sign))
        .then(|| {
            crate::suite::checks::Failure::new(
                "no_template_error",
                "no chat-template engine error text in any reply".into(),
                format!("{} {}: {}", ex.status, ex.path, clip_text(&text)),
            )
        })
}

fn clip_text(s: &str) -> String {
    match s.char_indices().nth(300) {
        Some((at, _)) => format!("{}...", &s[..at]),
        None => s.to_string(),
    }
}

fn mode_name(stream: bool) -> &'static str {
    if stream {
        "stream"
    } else {
        "non-stream"
    }
}

/// Plays a scenario; returns its exchanges and the indices checks look at.
async fn play(
    target: &Target,
    case: &Case,
    stream: bool,
    nonce: &str,
    seed: u64,
) -> (Vec<Exchange>, Vec<usize>) {
    let path = case
        .path
        .as_deref()
        .unwrap_or(Dialect::OpenAi.default_path());
    let dialect = Dialect::of_path(path);
    let prepare = |body: &Value, stream: bool, replies: &[Reply]| {
        let mut body = fill(body, nonce, replies);
        if let Value::Object(map) = &mut body {
            dialect.prepare(map, stream, seed);
        }
        body
    };
    match &case.scenario {
        // No request body: a GET (model lists, health) unless the case
        // names another method.
        Scenario::Single if case.request.is_null() => {
            let method = case.method.as_deref().unwrap_or("GET");
            let mut out = Vec::new();
            // `{{model}}` in the path: the model the run names, else the
            // first one the server lists (that listing is step 0), as one
            // path segment the way the SDKs send it.
            let path = match (path.contains("{{model}}"), target.model()) {
                (true, Some(id)) => path.replace("{{model}}", &path_segment(id)),
                (true, None) => {
                    let list = target.send(outgoing(case, "GET", MODELS_PATH, None)).await;
                    let id = list.body["data"][0]["id"]
                        .as_str()
                        .unwrap_or("no-model-listed")
                        .to_string();
                    out.push(list);
                    path.replace("{{model}}", &path_segment(&id))
                }
                (false, _) => path.to_string(),
            };
            out.push(target.send(outgoing(case, method, &path, None)).await);
            let last = out.len() - 1;
            (out, vec![last])
        }
        Scenario::Single => {
            let body = serde_json::to_vec(&prepare(&case.request, stream, &[])).expect("JSON");
            let method = case.method.as_deref().unwrap_or("POST");
            (
                vec![target.send(outgoing(case, method, path, Some(body))).await],
                vec![0],
            )
        }
        Scenario::Parallel { n } => {
            let body = prepare(&case.request, stream, &[]);
            let bodies = (0..*n).map(|k| with_slot(&body, k)).collect();
            let out = together(target, path, bodies).await;
            let subjects = (0..out.len()).collect();
            (out, subjects)
        }
        Scenario::ParallelAlone { n } => {
            let body = prepare(&case.request, stream, &[]);
            let bodies: Vec<Value> = (0..*n).map(|k| with_slot(&body, k)).collect();
            let mut out = together(target, path, bodies.clone()).await;
            for b in &bodies {
                out.push(target.post(path, b).await);
            }
            (out, (0..*n).collect())
        }
        Scenario::Sequence { then } => {
            let mut out = vec![
                target
                    .post(path, &prepare(&case.request, stream, &[]))
                    .await,
            ];
            let mut replies = vec![Reply::of(&out[0])];
            for next in then {
                let ex = target.post(path, &prepare(next, stream, &replies)).await;
                replies.push(Reply::of(&ex));
                out.push(ex);
            }
            let last = out.len() - 1;
            (out, vec![last])
        }
        Scenario::Replay => {
            let body = prepare(&case.request, stream, &[]);
            let cold = target.post(path, &body).await;
            let warm = target.post(path, &body).await;
            (vec![cold, warm], vec![1])
        }
        Scenario::StreamPair => {
            let whole = target.post(path, &prepare(&case.request, false, &[])).await;
            let streamed = target.post(path, &prepare(&case.request, true, &[])).await;
            (vec![whole, streamed], vec![0, 1])
        }
        Scenario::BatchPositions {
            n,
            positions,
            filler,
        } => {
            let probe = prepare(&case.request, stream, &[]);
            let alone = target.post(path, &probe).await;
            let other = prepare(filler.as_ref().unwrap_or(&case.request), stream, &[]);
            let bodies = (0..*n)
                .map(|i| {
                    if positions.contains(&i) {
                        probe.clone()
                    } else {
                        other.clone()
                    }
                })
                .collect();
            let mut out = vec![alone];
            out.extend(together(target, path, bodies).await);
            let mut subjects = vec![0];
            subjects.extend(positions.iter().filter(|&&p| p < *n).map(|p| p + 1));
            (out, subjects)
        }
        Scenario::Batch { lines, endpoint } => {
            let dialect = Dialect::of_path(endpoint);
            let model = match target.model() {
                Some(m) => m.to_string(),
                None => {
                    let list = target.get(MODELS_PATH).await;
                    list.body["data"][0]["id"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string()
                }
            };
            let lines: Vec<Value> = lines
                .iter()
                .map(|l| {
                    let mut l = fill(l, nonce, &[]);
                    if let Value::Object(body) = &mut l["body"] {
                        dialect.prepare(body, false, seed);
                        body.entry("model").or_insert_with(|| model.clone().into());
                    }
                    l
                })
                .collect();
            let text = crate::protocol::batch::jsonl(&lines, endpoint);
            (
                batch::play(target, text, endpoint, nonce).await,
                vec![crate::protocol::batch::FINAL],
            )
        }
        Scenario::Disconnect { n } => {
            let body = prepare(&case.request, true, &[]);
            let left = leave_together(target, path, (0..*n).map(|k| with_slot(&body, k)).collect());
            let mut out = left.await;
            out.push(running_after_leaving(target).await);
            let mut again = prepare(&case.request, false, &[]);
            again["max_tokens"] = 8.into();
            let bodies = (0..*n).map(|k| with_slot(&again, k)).collect();
            out.extend(together(target, path, bodies).await);
            (out, (*n..=2 * n).collect())
        }
        Scenario::Shutdown => {
            let body = prepare(&case.request, true, &[]);
            let later = prepare(&case.request, false, &[]);
            (
                shutdown::play(target, path, body, later).await,
                vec![0, 1, 2],
            )
        }
        Scenario::Raw { path, body } => {
            let body = fill(&Value::String(body.clone()), nonce, &[]);
            let bytes = body.as_str().unwrap_or_default().as_bytes().to_vec();
            (vec![target.post_raw(path, bytes).await], vec![0])
        }
    }
}

/// A single case's request: its method, headers and key handling.
fn outgoing(case: &Case, method: &str, path: &str, body: Option<Vec<u8>>) -> Outgoing {
    Outgoing {
        method: method.to_string(),
        path: path.to_string(),
        body,
        headers: case
            .headers
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
            .collect(),
        auth: case.auth,
        leave: Leave::Never,
        first_event: None,
    }
}

/// `{{slot}}` replaced by the request's slot among parallel ones.
fn with_slot(v: &Value, k: usize) -> Value {
    match v {
        Value::String(s) => Value::String(s.replace("{{slot}}", &k.to_string())),
        Value::Array(items) => Value::Array(items.iter().map(|i| with_slot(i, k)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, v)| (key.clone(), with_slot(v, k)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Sends `bodies` at once: each task waits at a barrier, then posts.
/// The bodies sent together, each client leaving after the first event.
async fn leave_together(target: &Target, path: &str, bodies: Vec<Value>) -> Vec<Exchange> {
    let sends = bodies.into_iter().map(|b| {
        let mut out = Outgoing::post(path, serde_json::to_vec(&b).expect("JSON"));
        out.leave = Leave::AfterFirstEvent;
        target.send(out)
    });
    futures_util::future::join_all(sends).await
}

/// How long a server may take to notice clients that left.
const NOTICE_LIMIT: std::time::Duration = std::time::Duration::from_secs(15);

/// The server's running-requests gauge, scraped every 250 ms until it is
/// 0 or [`NOTICE_LIMIT`] passes: a step of path `/metrics` whose body
/// names the gauge and its samples (`gauge` null: none known here). A
/// server without one is given the whole [`NOTICE_LIMIT`] before the next
/// requests go: one that generates a request at a time and refuses
/// another (503) is not judged in the instant the clients left.
async fn running_after_leaving(target: &Target) -> Exchange {
    use crate::bench::load::server_metrics::{running, scrape};
    let start = Instant::now();
    let mut samples = Vec::new();
    let mut gauge = None;
    loop {
        let Some((name, value)) = scrape(target).await.as_ref().and_then(running) else {
            if gauge.is_none() {
                tokio::time::sleep(NOTICE_LIMIT.saturating_sub(start.elapsed())).await;
            }
            break;
        };
        gauge = Some(name);
        samples.push(serde_json::json!([
            start.elapsed().as_millis() as u64,
            value
        ]));
        if value == 0.0 || start.elapsed() > NOTICE_LIMIT {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let body = serde_json::json!({"gauge": gauge, "samples": samples});
    Exchange {
        path: crate::protocol::endpoint::METRICS_PATH.into(),
        status: 200,
        // The samples as the report's evidence.
        raw: body.to_string().into_bytes(),
        keep_bytes: true,
        body,
        ..Default::default()
    }
}

async fn together(target: &Target, path: &str, bodies: Vec<Value>) -> Vec<Exchange> {
    let barrier = Arc::new(Barrier::new(bodies.len()));
    let handles: Vec<_> = bodies
        .into_iter()
        .map(|b| {
            let (target, barrier, path) = (target.clone(), barrier.clone(), path.to_string());
            tokio::spawn(async move {
                barrier.wait().await;
                target.post(&path, &b).await
            })
        })
        .collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap_or_else(|e| Exchange {
            transport_error: Some(format!("task failed: {e}")),
            ..Default::default()
        }));
    }
    out
}

/// Replaces placeholders in every string of `v`: `{{nonce}}` (unique to
/// the case in this run), `{{filler:N}}` (N fixed sentences, a long
/// prompt), `{{reply:K}}` (step K's content in a sequence),
/// `{{reply_word:K}}` (its longest word), `{{call_id:K}}` (the id of step
/// K's first tool call, to answer it). A string that is exactly
/// `{{null}}` becomes `null` (TOML has none), and one that is exactly
/// `{{message:K}}` becomes step K's assistant message as the official
/// SDKs append a returned message to the history.
pub fn fill(v: &Value, nonce: &str, replies: &[Reply]) -> Value {
    match v {
        Value::String(s) if s == "{{null}}" => Value::Null,
        Value::String(s) if s.starts_with("{{message:") && s.ends_with("}}") => {
            let k: usize = s["{{message:".len()..s.len() - 2]
                .parse()
                .unwrap_or(usize::MAX);
            replies.get(k).map_or(Value::Null, Reply::as_sdk_message)
        }
        Value::String(s) if s.contains("{{") => Value::String(fill_text(s, nonce, replies)),
        Value::Array(items) => {
            Value::Array(items.iter().map(|i| fill(i, nonce, replies)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), fill(v, nonce, replies)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn fill_text(s: &str, nonce: &str, replies: &[Reply]) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(at) = rest.find("{{") {
        out.push_str(&rest[..at]);
        let Some(end) = rest[at..].find("}}") else {
            out.push_str(&rest[at..]);
            return out;
        };
        let name = rest[at + 2..at + end].trim();
        match name.split_once(':') {
            None if name == "nonce" => out.push_str(nonce),
            Some(("filler", n)) => out.push_str(&filler::sentences(n.parse().unwrap_or(0))),
            Some(("reply", k)) => {
                let k: usize = k.parse().unwrap_or(usize::MAX);
                out.push_str(replies.get(k).map_or("", |r| r.content.as_str()));
            }
            Some(("reply_word", k)) => {
                let k: usize = k.parse().unwrap_or(usize::MAX);
                out.push_str(replies.get(k).map_or("", Reply::longest_word));
            }
            Some(("reply_infix", k)) => {
                let k: usize = k.parse().unwrap_or(usize::MAX);
                out.push_str(replies.get(k).map_or("", Reply::word_infix));
            }
            Some(("reply_near_miss", k)) => {
                let k: usize = k.parse().unwrap_or(usize::MAX);
                out.push_str(
                    &replies
                        .get(k)
                        .map(Reply::word_near_miss)
                        .unwrap_or_default(),
                );
            }
            Some(("call_id", k)) => {
                let k: usize = k.parse().unwrap_or(usize::MAX);
                let id = replies
                    .get(k)
                    .and_then(|r| r.tool_calls.first())
                    .and_then(|c| c.id.as_deref());
                out.push_str(id.unwrap_or("missing-call-id"));
            }
            _ => out.push_str(&rest[at..at + end + 2]),
        }
        rest = &rest[at + end + 2..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_model_id_is_one_path_segment_as_the_sdk_sends_it() {
        assert_eq!(path_segment("smollm2"), "smollm2");
        assert_eq!(
            path_segment(".cache/models/conformance/hf"),
            ".cache%2Fmodels%2Fconformance%2Fhf"
        );
        assert_eq!(path_segment("org/name:q4 x"), "org%2Fname:q4%20x");
    }

    #[test]
    fn placeholders_are_filled_everywhere() {
        let v = json!({"messages": [{"role": "user", "content": "id {{nonce}}: {{reply:0}} / {{filler:2}} {{other}}"}]});
        let first = Reply {
            content: "first".into(),
            ..Default::default()
        };
        let out = fill(&v, "abc", &[first]);
        let text = out["messages"][0]["content"].as_str().unwrap();
        assert!(text.starts_with("id abc: first / Rule 0: "), "{text}");
        assert!(text.contains("Rule 1: "), "{text}");
        assert!(text.ends_with("{{other}}"), "{text}");
    }

    #[test]
    fn null_and_message_placeholders_become_values() {
        let call = crate::protocol::reply::ToolCall {
            id: Some("call_1".into()),
            name: "get_weather".into(),
            arguments: "{\"city\": \"Oslo\"}".into(),
            ..Default::default()
        };
        let step = Reply {
            tool_calls: vec![call],
            ..Default::default()
        };
        let v = json!({"messages": ["{{message:0}}"], "stop": "{{null}}"});
        let out = fill(&v, "n", &[step]);
        assert_eq!(out["stop"], Value::Null);
        assert_eq!(
            out["messages"][0],
            json!({"role": "assistant", "content": null, "refusal": null, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]})
        );
    }

    #[test]
    fn a_template_engines_error_text_fails_any_case() {
        let ex = |status: u16, body: Value| Exchange {
            status,
            body,
            ..Default::default()
        };
        let leaked = ex(
            400,
            json!({"error": {"message": "chat template: invalid operation: tried to use + operator on unsupported types string and sequence (in chat:4)"}}),
        );
        assert!(template_error_leak(&leaked).is_some());
        let named = ex(
            400,
            json!({"error": {"message": "messages[0].content[0].type: this model takes no image input"}}),
        );
        assert!(template_error_leak(&named).is_none());
        assert!(template_error_leak(&ex(200, json!({"choices": []}))).is_none());
    }

    #[test]
    fn nonces_differ_per_case_and_per_run() {
        assert_ne!(mix(7, 1), mix(7, 2));
        assert_eq!(mix(7, 1), mix(7, 1));
        assert_ne!(mix(7, 1), mix(8, 1));
        assert_ne!(run_nonce(), run_nonce());
    }
}
