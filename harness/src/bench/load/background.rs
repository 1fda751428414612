//! Streams that keep decoding through a level (`--background-streams`):
//! the running sessions whose pace a long prompt must not stall. Each
//! asks for a long story (`--background-tokens`, `ignore_eos`) and starts
//! again when it ends, until the level's own requests are done; their
//! inter-token gaps are then told apart by whether a long prompt of the
//! level was being read (`results::sessions`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;

use crate::bench::request::{self, RequestSettings};
use crate::bench::sample::Sample;
use crate::protocol::reply::Reply;
use crate::server::Target;

/// Plays `streams` streams of `max_tokens` each until `stop` is set;
/// returns every one's sample, times in ms after `start`.
pub async fn play(
    target: Target,
    settings: RequestSettings,
    streams: usize,
    max_tokens: u32,
    salt: String,
    start: Instant,
    stop: Arc<AtomicBool>,
) -> Vec<Sample> {
    let settings = RequestSettings {
        ignore_eos: true,
        ..settings
    };
    let mut tasks = Vec::new();
    for k in 0..streams {
        let (target, settings, salt, stop) =
            (target.clone(), settings.clone(), salt.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            for round in 0.. {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let messages = [json!({
                    "role": "user",
                    "content": format!("Story {salt}.{k}.{round}: tell me a long story about a lighthouse."),
                })];
                let Ok(body) = request::body(&settings, &messages, None, max_tokens, None) else {
                    break;
                };
                let sent_ms = start.elapsed().as_secs_f64() * 1000.0;
                let ex = target.post(settings.endpoint.path(), &body).await;
                let mut s = Sample::of_reply(&ex, &Reply::of(&ex));
                s.conversation = k;
                s.turn = round;
                s.sent_ms = sent_ms;
                s.scheduled_ms = sent_ms;
                let failed = !s.served();
                out.push(s);
                if failed {
                    break;
                }
            }
            out
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap_or_default());
    }
    all
}
