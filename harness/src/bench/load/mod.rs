//! Plays a level: conversations sent in a closed loop (N users) or an
//! open loop (arrivals on a schedule, at most `max_concurrency` in
//! flight), every request streamed, timed event by event, and its reply
//! checked. A conversation's turns go one after another, each reply
//! appended to the history (after an optional think time).

pub mod arrivals;
pub mod background;
pub mod cancel;
pub mod client_cpu;
pub mod replay;
pub mod server_metrics;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::Semaphore;

use self::arrivals::{Bound, Shape};
use crate::bench::dataset::{Conversation, Dataset};
use crate::bench::request::{self, RequestSettings};
use crate::bench::sample::Sample;
use crate::bench::verify::{self, Markers};
use crate::protocol::reply::Reply;
use crate::server::Target;

/// What a run sends and how it checks the replies.
pub struct Player {
    pub target: Target,
    pub dataset: Arc<Dataset>,
    pub settings: RequestSettings,
    /// `max_tokens` when the dataset sets none.
    pub max_tokens: u32,
    /// Checks and isolation markers on.
    pub verify: bool,
    /// Check kinds whose failures are counted but do not corrupt a reply.
    pub tolerate: Vec<String>,
    /// Share of requests asking for a strict JSON schema.
    pub schema_share: f64,
    /// Share of requests the client drops, and after how long.
    pub cancel_share: f64,
    pub cancel_after: Duration,
    /// Seconds between a reply and the conversation's next turn.
    pub think_s: f64,
    pub seed: u64,
    /// Streams decoding through each level (`--background-streams`), and
    /// the tokens each asks for before it starts again.
    pub background_streams: usize,
    pub background_tokens: u32,
}

/// What one pass over a level gave.
#[derive(Debug, Clone, Default)]
pub struct LevelRun {
    pub samples: Vec<Sample>,
    /// The request bodies, in the samples' order (for replays).
    pub bodies: Vec<Value>,
    /// From the level's start to its last reply.
    pub wall_s: f64,
    /// From the level's start to the last request's sending: the steady
    /// part, before the drain tail where fewer requests are in flight.
    pub steady_s: f64,
    /// The background streams' samples (`background`), apart from the
    /// level's own.
    pub background: Vec<Sample>,
}

impl LevelRun {
    /// Whether two requests of the run were ever in flight together.
    pub fn overlapped(&self) -> bool {
        let mut spans: Vec<(f64, f64)> = self
            .samples
            .iter()
            .map(|s| (s.sent_ms, s.sent_ms + s.e2e_ms))
            .collect();
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut end = f64::NEG_INFINITY;
        for (start, stop) in spans {
            if start < end {
                return true;
            }
            end = end.max(stop);
        }
        false
    }
}

struct Shared {
    start: Instant,
    bound: Bound,
    salt: String,
    /// Requests sent so far (the bound's count).
    sent: AtomicUsize,
    next_conversation: AtomicUsize,
    /// Prefix keys of completed requests.
    cached: Mutex<HashSet<String>>,
    /// The last sending, in ms after the start.
    last_sent_ms: Mutex<f64>,
    slots: Option<Semaphore>,
    /// Markers of the requests sent so far: the only ones a reply could
    /// hold by cross-talk.
    markers: Mutex<Markers>,
    out: Mutex<Vec<(Sample, Value)>>,
}

impl Player {
    /// Plays a level of `shape`, bounded by `bound`, its prompts salted
    /// with `salt`.
    pub async fn play(self: &Arc<Self>, shape: Shape, bound: Bound, salt: &str) -> LevelRun {
        let slots = match shape {
            Shape::Open {
                max_concurrency: Some(c),
                ..
            } => Some(Semaphore::new(c.max(1))),
            _ => None,
        };
        let shared = Arc::new(Shared {
            start: Instant::now(),
            bound,
            salt: salt.to_string(),
            sent: AtomicUsize::new(0),
            next_conversation: AtomicUsize::new(0),
            cached: Mutex::new(HashSet::new()),
            last_sent_ms: Mutex::new(0.0),
            slots,
            markers: Mutex::new(Markers::new([])),
            out: Mutex::new(Vec::new()),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let background = (self.background_streams > 0).then(|| {
            tokio::spawn(background::play(
                self.target.clone(),
                self.settings.clone(),
                self.background_streams,
                self.background_tokens,
                salt.to_string(),
                shared.start,
                stop.clone(),
            ))
        });
        let mut tasks = Vec::new();
        match shape {
            Shape::Closed { concurrency } => {
                for _ in 0..concurrency.max(1) {
                    let (me, shared) = (self.clone(), shared.clone());
                    tasks.push(tokio::spawn(async move {
                        // The first turn's place is claimed here, so two
                        // users never both take the bound's last request.
                        while shared.claim() {
                            let i = shared.next_conversation.fetch_add(1, Ordering::SeqCst);
                            me.converse(&shared, i, None).await;
                        }
                    }));
                }
            }
            Shape::Open {
                rate,
                burstiness,
                ramp,
                ..
            } => {
                let turns = self.dataset.turns.max(1);
                let conversations = Bound {
                    requests: bound.requests.map(|n| n.div_ceil(turns)),
                    duration_s: bound.duration_s,
                };
                let times = self.dataset.arrivals().unwrap_or_else(|| {
                    arrivals::schedule(rate, burstiness, ramp, conversations, self.seed)
                });
                for (i, at) in times.into_iter().enumerate() {
                    if !conversations.allows(i, at) {
                        break;
                    }
                    let due = shared.start + Duration::from_secs_f64(at);
                    tokio::time::sleep_until(due.into()).await;
                    let (me, shared) = (self.clone(), shared.clone());
                    tasks.push(tokio::spawn(async move {
                        me.converse(&shared, i, Some(at * 1000.0)).await;
                    }));
                }
            }
        }
        for t in tasks {
            let _ = t.await;
        }
        let wall_s = elapsed(&shared);
        stop.store(true, Ordering::SeqCst);
        let background = match background {
            Some(task) => task.await.unwrap_or_default(),
            None => Vec::new(),
        };
        let steady_s = *shared.last_sent_ms.lock().expect("a lock") / 1000.0;
        let mut out = std::mem::take(&mut *shared.out.lock().expect("a lock"));
        out.sort_by_key(|(s, _)| (s.conversation, s.turn));
        let (samples, bodies) = out.into_iter().unzip();
        LevelRun {
            samples,
            bodies,
            wall_s,
            steady_s: if steady_s > 0.0 { steady_s } else { wall_s },
            background,
        }
    }

    /// Plays conversation `i`; the first turn is due at `due_ms` (open
    /// loop) or now.
    async fn converse(&self, shared: &Shared, i: usize, due_ms: Option<f64>) {
        let started_ms = elapsed(shared) * 1000.0;
        let c: Conversation = self.dataset.conversation(i, &shared.salt);
        let mut history = c.history.clone();
        let mut previous_prompt: Option<u64> = None;
        let mut due = due_ms.unwrap_or_else(|| elapsed(shared) * 1000.0);
        let max_tokens = c.max_tokens.unwrap_or(self.max_tokens);
        for (t, turn) in c.turns.iter().enumerate() {
            if t > 0 {
                if self.think_s > 0.0 {
                    tokio::time::sleep(Duration::from_secs_f64(self.think_s)).await;
                }
                due = elapsed(shared) * 1000.0;
            }
            let mut user = turn.clone();
            let marker = self
                .verify
                .then(|| verify::marker(&shared.salt, i, t))
                .filter(|_| user["role"] == "user" && user["content"].is_string());
            if let (Some(m), Some(text)) = (&marker, user["content"].as_str()) {
                user["content"] = format!("{text}{}", verify::ask_for(m)).into();
            }
            let schema = marker
                .as_deref()
                .filter(|_| self.settings.endpoint.takes_schema() && self.in_schema_share(i, t))
                .map(verify::schema_for);
            history.push(user);
            let budget = if schema.is_some() {
                max_tokens.max(64)
            } else {
                max_tokens
            };
            let body = match request::body(
                &self.settings,
                &history,
                c.tools.as_ref(),
                budget,
                schema.as_ref(),
            ) {
                Ok(b) => b,
                Err(e) => {
                    let s = Sample {
                        conversation: i,
                        turn: t,
                        error: Some(format!("request: {e}")),
                        ..Default::default()
                    };
                    shared.out.lock().expect("a lock").push((s, Value::Null));
                    return;
                }
            };
            // The bound counts requests; a conversation stops at it too.
            // A closed loop's first turn was claimed by its user; an open
            // loop's was scheduled, and is sent whatever the count.
            match (t, due_ms) {
                (0, None) => {}
                (0, Some(_)) => {
                    shared.sent.fetch_add(1, Ordering::SeqCst);
                }
                _ if !shared.claim() => return,
                _ => {}
            }
            let _permit = match &shared.slots {
                Some(s) => s.acquire().await.ok(),
                None => None,
            };
            if let Some(m) = &marker {
                shared.markers.lock().expect("a lock").insert(m.clone());
            }
            let sent_ms = elapsed(shared) * 1000.0;
            {
                let mut last = shared.last_sent_ms.lock().expect("a lock");
                *last = last.max(sent_ms);
            }
            let prefix_expected = {
                let cached = shared.cached.lock().expect("a lock");
                c.prefixes
                    .iter()
                    .filter(|(k, _)| cached.contains(k))
                    .map(|(_, n)| *n)
                    .max()
            };
            let k = i * self.dataset.turns.max(1) + t;
            let drop_after = cancel::chosen(k, self.cancel_share).then_some(self.cancel_after);
            let path = self.settings.endpoint.path();
            let Ok(ex) = cancel::send_or_drop(&self.target, path, &body, drop_after).await else {
                let s = Sample {
                    conversation: i,
                    turn: t,
                    scheduled_ms: due,
                    sent_ms,
                    cancelled: true,
                    e2e_ms: self.cancel_after.as_secs_f64() * 1000.0,
                    ..Default::default()
                };
                shared.out.lock().expect("a lock").push((s, body));
                return;
            };
            let reply = Reply::of(&ex);
            let mut s = Sample::of_reply(&ex, &reply);
            s.conversation = i;
            s.turn = t;
            s.scheduled_ms = due;
            s.sent_ms = sent_ms;
            // The open loop's first turn: when its task really started.
            s.started_ms = (t == 0 && due_ms.is_some()).then_some(started_ms);
            s.marker = marker;
            s.schema = schema.is_some();
            s.expected_cached = match (prefix_expected, previous_prompt) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0).max(b.unwrap_or(0))),
            };
            if self.verify {
                verify::check(
                    &mut s,
                    &ex,
                    &shared.markers.lock().expect("a lock"),
                    &self.tolerate,
                );
            }
            let ok = s.served();
            if ok {
                let mut cached = shared.cached.lock().expect("a lock");
                cached.extend(c.prefixes.iter().map(|(k, _)| k.clone()));
            }
            previous_prompt = ok.then_some(s.prompt_tokens);
            shared.out.lock().expect("a lock").push((s, body));
            if !ok {
                return;
            }
            history.push(match c.replies.get(t) {
                Some(scripted) => scripted.clone(),
                None => json!({"role": "assistant", "content": reply.content}),
            });
        }
    }

    /// Whether turn `t` of conversation `i` asks for a schema: of every
    /// run of requests in order, the given share, spread evenly (request k
    /// asks when floor((k + 1) x share) passes a whole number).
    fn in_schema_share(&self, i: usize, t: usize) -> bool {
        in_share(i * self.dataset.turns.max(1) + t, self.schema_share)
    }
}

/// Whether request `k` of a run is in `share`, spread evenly: request k
/// is when floor((k + 1) x share) passes a whole number.
pub fn in_share(k: usize, share: f64) -> bool {
    share > 0.0 && ((k as f64 + 1.0) * share).floor() > (k as f64 * share).floor()
}

fn elapsed(shared: &Shared) -> f64 {
    shared.start.elapsed().as_secs_f64()
}

impl Shared {
    /// Takes one request of the bound, if it allows one more now: the
    /// check and the count in one step, so concurrent users never send
    /// more than `--requests`.
    fn claim(&self) -> bool {
        let now = elapsed(self);
        self.sent
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                self.bound.allows(n, now).then_some(n + 1)
            })
            .is_ok()
    }
}

#[cfg(test)]
mod claim_tests {
    use super::*;

    #[test]
    fn concurrent_claims_never_pass_the_bound() {
        let shared = Arc::new(Shared {
            start: Instant::now(),
            bound: Bound {
                requests: Some(5),
                duration_s: None,
            },
            salt: String::new(),
            sent: AtomicUsize::new(0),
            next_conversation: AtomicUsize::new(0),
            cached: Mutex::new(HashSet::new()),
            last_sent_ms: Mutex::new(0.0),
            slots: None,
            markers: Mutex::new(Markers::new([])),
            out: Mutex::new(Vec::new()),
        });
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let shared = shared.clone();
                std::thread::spawn(move || (0..100).filter(|_| shared.claim()).count())
            })
            .collect();
        let claimed: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(claimed, 5);
        assert_eq!(shared.sent.load(Ordering::SeqCst), 5);
    }
}
