//! `afm-bench mock`: an OpenAI-, Anthropic- and Responses-shaped server
//! with no model behind it, whose timing is known exactly. It streams each
//! reply on a schedule drawn from given distributions (time to the first
//! token, gaps between tokens, reply length), records when it really sent
//! every event (`GET /mock/record`, summed up by `GET /mock/timing`), and can misbehave on purpose
//! (`--fault`). Clients' figures are proven against its record, and
//! afm-bench's checks against its faults. With `--upstream` it is instead
//! a proxy in front of a real server that applies the faults there.

pub mod delay;
pub mod events;
pub mod faults;
pub mod hostile;
pub mod plan;
pub mod proxy;
pub mod record;
pub mod reply;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use rand::rngs::StdRng;
use rand::SeedableRng as _;
use serde_json::{json, Value};

use self::delay::Spread;
use self::events::MockReply;
use self::faults::Fault;
use self::plan::Plan;
use self::record::{MockRecord, RequestRecord};
use crate::protocol::endpoint::{Endpoint, HEALTH_PATH, METRICS_PATH, MODELS_PATH, TOKENIZE_PATH};

#[derive(clap::Args, Clone, Debug)]
pub struct MockArgs {
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// 0: any free port (the address is printed).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// The model name it serves.
    #[arg(long, default_value = "mock")]
    pub model: String,
    /// Time to the first token, ms: N, uniform:LOW:HIGH, normal:MEAN:SD
    /// or exp:MEAN.
    #[arg(long, default_value = "50")]
    pub ttft: Spread,
    /// Gap between tokens, ms (same forms).
    #[arg(long, default_value = "10")]
    pub itl: Spread,
    /// Tokens per reply (same forms), at most the request's max tokens.
    #[arg(long, default_value = "32")]
    pub output_tokens: Spread,
    /// Misbehave: cross-talk, empty-strict, stall:MS, reset, miscount,
    /// ignore-cancel, busy; or break: endless, slow-bytes, huge-body,
    /// huge-length, no-done, malformed-sse, html-200, invalid-utf8,
    /// redirect-loop, lying-length, json-bomb, endless-models (repeatable).
    #[arg(long)]
    pub fault: Vec<Fault>,
    /// Share of requests (0..1) the faults apply to, spread evenly.
    #[arg(long, default_value_t = 1.0)]
    pub fault_share: f64,
    /// Instead of --fault-share: each request is faulted with this
    /// chance (0..1), drawn from --seed and the request's number, so a
    /// case run again meets the fault at that rate (a flaky server).
    #[arg(long)]
    pub fault_chance: Option<f64>,
    /// Forward every request to this server (its base URL) and apply the
    /// faults to its replies (cross-talk only; replies are buffered).
    #[arg(long)]
    pub upstream: Option<String>,
    /// Seed of the timing draws.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

impl MockArgs {
    /// Settings for tests: the given timing, no faults, any port.
    pub fn timed(ttft_ms: f64, itl_ms: f64, tokens: usize) -> MockArgs {
        MockArgs {
            host: "127.0.0.1".into(),
            port: 0,
            model: "mock".into(),
            ttft: Spread::Const(ttft_ms),
            itl: Spread::Const(itl_ms),
            output_tokens: Spread::Const(tokens as f64),
            fault: Vec::new(),
            fault_share: 1.0,
            fault_chance: None,
            upstream: None,
            seed: 0,
        }
    }
}

/// A running mock's state.
pub struct Mock {
    args: MockArgs,
    start: Instant,
    next_id: AtomicU64,
    /// Requests in flight and the tokens each is to send.
    in_flight: Mutex<BTreeMap<u64, Arc<Vec<String>>>>,
    record: Mutex<MockRecord>,
    running: AtomicU64,
    tokens_total: AtomicU64,
    proxy: Option<proxy::Proxy>,
}

/// Binds and serves until the process ends.
pub async fn serve(args: MockArgs) -> Result<()> {
    let listener = tokio::net::TcpListener::bind((args.host.as_str(), args.port))
        .await
        .with_context(|| format!("binding {}:{}", args.host, args.port))?;
    let addr = listener.local_addr()?;
    eprintln!(
        "afm-bench mock: serving {} on http://{addr} (ttft {} ms, itl {} ms, {} tokens{})",
        args.model,
        args.ttft,
        args.itl,
        args.output_tokens,
        describe_faults(&args)
    );
    axum::serve(listener, router(args)?).await?;
    Ok(())
}

/// Serves on a free port in this runtime; returns its base URL.
pub async fn spawn(args: MockArgs) -> Result<String> {
    let listener = tokio::net::TcpListener::bind((args.host.as_str(), 0)).await?;
    let addr: SocketAddr = listener.local_addr()?;
    let app = router(args)?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(format!("http://{addr}"))
}

fn describe_faults(args: &MockArgs) -> String {
    let mut s = String::new();
    if !args.fault.is_empty() {
        let names: Vec<String> = args.fault.iter().map(Fault::to_string).collect();
        s = format!(
            "; faults {} on {:.0}%",
            names.join(", "),
            args.fault_share * 100.0
        );
    }
    if let Some(u) = &args.upstream {
        s.push_str(&format!("; proxy to {u}"));
    }
    s
}

/// The mock's routes.
pub fn router(args: MockArgs) -> Result<Router> {
    if args.fault_chance.is_some_and(|p| !(0.0..=1.0).contains(&p)) {
        anyhow::bail!("--fault-chance is a chance between 0 and 1");
    }
    if !(0.0..=1.0).contains(&args.fault_share) {
        anyhow::bail!("--fault-share is a share between 0 and 1");
    }
    let proxy = args
        .upstream
        .as_deref()
        .map(proxy::Proxy::new)
        .transpose()?;
    let mock = Arc::new(Mock {
        args,
        start: Instant::now(),
        next_id: AtomicU64::new(0),
        in_flight: Mutex::new(BTreeMap::new()),
        record: Mutex::new(MockRecord::default()),
        running: AtomicU64::new(0),
        tokens_total: AtomicU64::new(0),
        proxy,
    });
    let generation = Endpoint::ALL
        .into_iter()
        .fold(Router::new(), |r, e| r.route(e.path(), post(generate)))
        .route("/mock/record", get(record))
        .route("/mock/timing", get(timing))
        .route("/mock/reset", post(reset));
    // A proxy passes everything else (models, health, metrics, token
    // counts) through as it is.
    let rest = match mock.proxy {
        Some(_) => Router::new().fallback(pass_through),
        None => Router::new()
            .route(MODELS_PATH, get(models))
            .route(TOKENIZE_PATH, post(tokenize))
            .route(METRICS_PATH, get(metrics))
            .route(HEALTH_PATH, get(|| async { "ok" })),
    };
    Ok(generation.merge(rest).with_state(mock))
}

async fn pass_through(
    State(m): State<Arc<Mock>>,
    method: axum::http::Method,
    uri: Uri,
    body: Bytes,
) -> Response {
    let p = m.proxy.as_ref().expect("a proxy's route");
    let path = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    p.pass(method, path, body).await
}

async fn models(State(m): State<Arc<Mock>>) -> Response {
    if m.args.fault.contains(&Fault::EndlessModels) {
        let itl = m.args.itl.draw(&mut StdRng::seed_from_u64(0));
        return hostile::reply(Fault::EndlessModels, itl, MODELS_PATH, false).expect("a reply");
    }
    Json(json!({"object": "list", "data": [
        {"id": m.args.model, "object": "model", "created": 0, "owned_by": "afm-mock"}]}))
    .into_response()
}

async fn tokenize(Json(body): Json<Value>) -> Json<Value> {
    let text = body["content"]
        .as_str()
        .or(body["prompt"].as_str())
        .unwrap_or_default();
    let n = reply::tokens(text).len();
    Json(json!({"tokens": (0..n).collect::<Vec<_>>(), "count": n}))
}

async fn metrics(State(m): State<Arc<Mock>>) -> String {
    let requests = m.record.lock().expect("a lock").requests.len();
    format!(
        "# TYPE afm_mock_requests_running gauge\nafm_mock_requests_running {}\n\
         # TYPE afm_mock_requests_total counter\nafm_mock_requests_total {requests}\n\
         # TYPE afm_mock_generation_tokens_total counter\nafm_mock_generation_tokens_total {}\n",
        m.running.load(Ordering::SeqCst),
        m.tokens_total.load(Ordering::SeqCst)
    )
}

async fn record(State(m): State<Arc<Mock>>) -> Json<MockRecord> {
    Json(m.record.lock().expect("a lock").clone())
}

/// The mock's own TTFT, ITL and E2E percentiles over its record.
async fn timing(State(m): State<Arc<Mock>>) -> Json<record::MockTiming> {
    Json(m.record.lock().expect("a lock").timing())
}

async fn reset(State(m): State<Arc<Mock>>) -> StatusCode {
    m.record.lock().expect("a lock").requests.clear();
    StatusCode::NO_CONTENT
}

/// The protocol's error body.
fn error(endpoint: Endpoint, status: StatusCode, message: &str) -> Response {
    let body = match endpoint {
        Endpoint::Messages => json!({"type": "error",
            "error": {"type": "invalid_request_error", "message": message}}),
        _ => json!({"error": {"message": message, "type": "invalid_request_error",
            "param": null, "code": null}}),
    };
    (status, Json(body)).into_response()
}

impl Mock {
    /// Whether request `id` is in the faults' share (request k is when
    /// floor((k + 1) x share) passes a whole number).
    fn faulted(&self, id: u64, fault: Fault) -> bool {
        self.args.fault.contains(&fault)
            && match self.args.fault_chance {
                Some(p) => {
                    let mut draw = StdRng::seed_from_u64(
                        self.args.seed ^ id.wrapping_mul(0xA24B_AED4_963E_E407),
                    );
                    rand::Rng::random::<f64>(&mut draw) < p
                }
                None => crate::bench::load::in_share(id as usize, self.args.fault_share),
            }
    }

    fn since_start_ms(&self, at: Instant) -> f64 {
        at.duration_since(self.start).as_secs_f64() * 1000.0
    }

    /// The most recent other request in flight and its tokens.
    fn other_in_flight(&self, id: u64) -> Option<(u64, Arc<Vec<String>>)> {
        let f = self.in_flight.lock().expect("a lock");
        f.iter()
            .rev()
            .find(|(k, _)| **k != id)
            .map(|(k, v)| (*k, v.clone()))
    }
}

async fn generate(State(m): State<Arc<Mock>>, uri: Uri, body: Bytes) -> Response {
    let received = Instant::now();
    let endpoint = Endpoint::of_path(uri.path()).expect("a generation route");
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return error(endpoint, StatusCode::BAD_REQUEST, "the body is not JSON");
    };
    if !request.is_object() {
        return error(
            endpoint,
            StatusCode::BAD_REQUEST,
            "the body is not a JSON object",
        );
    }
    let id = m.next_id.fetch_add(1, Ordering::SeqCst);
    for fault in &m.args.fault {
        if m.faulted(id, *fault) {
            let itl = m.args.itl.draw(&mut StdRng::seed_from_u64(id));
            if *fault == Fault::EndlessModels {
                continue;
            }
            let streamed = request["stream"].as_bool() == Some(true);
            if let Some(broken) = hostile::reply(*fault, itl, uri.path(), streamed) {
                return broken;
            }
        }
    }
    if let Some(p) = &m.proxy {
        let cross = m.faulted(id, Fault::CrossTalk);
        return p.forward(&m, id, received, uri.path(), body, cross).await;
    }
    if m.faulted(id, Fault::Busy) && !m.in_flight.lock().expect("a lock").is_empty() {
        return error(
            endpoint,
            StatusCode::SERVICE_UNAVAILABLE,
            "busy: another request is being generated",
        );
    }
    let mut rng = StdRng::seed_from_u64(m.args.seed ^ id.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut plan = Plan::new(&m, &request, &mut rng);
    let other = m.other_in_flight(id);
    // Others in flight see this request's own reply.
    m.in_flight
        .lock()
        .expect("a lock")
        .insert(id, Arc::new(plan.pieces.clone()));
    let strict = reply::schema_of(&request).is_some();
    plan.apply_faults(&m, id, strict, other, &mut rng);
    let streamed = request["stream"].as_bool() == Some(true);
    let reply_id = format!("mock-{id}");
    let reply = MockReply {
        endpoint,
        id: &reply_id,
        model: &m.args.model,
        pieces: plan.counted.as_ref().unwrap_or(&plan.pieces),
        prompt_tokens: plan.prompt_tokens,
        cut: plan.cut,
        include_usage: request
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            == Some(true),
    };
    let planned = Duration::from_secs_f64(plan.at.last().copied().unwrap_or(0.0) / 1000.0);
    let mut guard = Guard {
        mock: m.clone(),
        record: RequestRecord {
            id,
            path: uri.path().to_string(),
            streamed,
            received_ms: m.since_start_ms(received),
            tokens: plan.pieces.len(),
            faults: std::mem::take(&mut plan.faults),
            crossed_from: plan.crossed_from,
            ..Default::default()
        },
        received,
        planned_end: received + planned,
        finished: false,
    };
    m.running.fetch_add(1, Ordering::SeqCst);
    if !streamed {
        let whole = reply.whole();
        tokio::time::sleep_until(guard.planned_end.into()).await;
        guard.finish(Instant::now());
        return Json(whole).into_response();
    }
    let frames = plan.stream_frames(reply.frames());
    stream(frames, &plan.at, plan.reset_at, guard)
}

/// The stream of `frames`, each sent when its token is due (`at`, in ms
/// after arrival), cut with a connection reset at token `reset_at`; the
/// guard records when each went out.
fn stream(
    frames: Vec<events::Frame>,
    at: &[f64],
    reset_at: Option<usize>,
    guard: Guard,
) -> Response {
    let received = guard.received;
    let schedule: Vec<(Instant, Option<usize>, Bytes)> = frames
        .into_iter()
        .map(|f| {
            let ms = at.get(f.due_with).or(at.last()).copied().unwrap_or(0.0);
            (
                received + Duration::from_secs_f64(ms / 1000.0),
                f.token,
                Bytes::from(f.text),
            )
        })
        .collect();
    let stream = futures_util::stream::unfold(
        (schedule.into_iter(), guard),
        move |(mut frames, mut guard)| async move {
            let (due, token, bytes) = match frames.next() {
                Some(f) => f,
                None => {
                    guard.finish(Instant::now());
                    return None;
                }
            };
            if token.is_some() && token == reset_at {
                guard.finish(Instant::now());
                let cut: std::io::Error = std::io::ErrorKind::ConnectionReset.into();
                return Some((Err(cut), (frames, guard)));
            }
            tokio::time::sleep_until(due.into()).await;
            let now = Instant::now();
            if token.is_some() {
                guard.record.token_ms.push(ms_between(guard.received, now));
            }
            guard.record.end_ms = Some(ms_between(guard.received, now));
            Some((Ok::<Bytes, std::io::Error>(bytes), (frames, guard)))
        },
    );
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .expect("a response")
}

fn ms_between(from: Instant, to: Instant) -> f64 {
    to.duration_since(from).as_secs_f64() * 1000.0
}

/// Writes a request's record when its reply ends or its client goes
/// away (the reply's stream is dropped unfinished: a cancel).
struct Guard {
    mock: Arc<Mock>,
    record: RequestRecord,
    received: Instant,
    planned_end: Instant,
    finished: bool,
}

impl Guard {
    fn finish(&mut self, at: Instant) {
        if !self.finished {
            self.record.end_ms = Some(ms_between(self.received, at));
            self.close(false);
        }
    }

    fn close(&mut self, cancelled: bool) {
        self.finished = true;
        let m = &self.mock;
        m.in_flight.lock().expect("a lock").remove(&self.record.id);
        m.tokens_total
            .fetch_add(self.record.token_ms.len() as u64, Ordering::SeqCst);
        let mut r = std::mem::take(&mut self.record);
        r.cancelled = cancelled;
        if cancelled && m.args.fault.contains(&Fault::IgnoreCancel) {
            // Generation goes on for nobody until its planned end.
            let (m, end) = (m.clone(), self.planned_end);
            tokio::spawn(async move {
                tokio::time::sleep_until(end.into()).await;
                m.running.fetch_sub(1, Ordering::SeqCst);
            });
        } else {
            m.running.fetch_sub(1, Ordering::SeqCst);
        }
        m.record.lock().expect("a lock").requests.push(r);
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.finished {
            self.close(true);
        }
    }
}
