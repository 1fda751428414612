//! Cancelled requests (AIPerf's `--request-cancellation-rate` and
//! `--request-cancellation-delay`): a share of a level's requests dropped
//! by the client after a delay, and what the server did about it. A server
//! that stops a dropped request frees its slot; one that keeps generating
//! for nobody shows more requests running than the client has in flight,
//! and a slower request right after the level.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::bench::dataset::hash;
use crate::bench::load::server_metrics::GaugePoint;
use crate::bench::request::{self, RequestSettings};
use crate::bench::sample::Sample;
use crate::server::Target;

/// Whether request `k` of a run is dropped: a draw per request, apart
/// from the schema share's even spread so the two do not pick the same
/// requests.
pub fn chosen(k: usize, share: f64) -> bool {
    share > 0.0 && (hash(&format!("cancel/{k}")) % 10_000) as f64 / 10_000.0 < share
}

/// Sends `body`, dropping it (and its connection) after `after`: Ok is
/// the exchange of a request that ended first.
pub async fn send_or_drop(
    target: &Target,
    path: &str,
    body: &serde_json::Value,
    after: Option<Duration>,
) -> Result<crate::protocol::exchange::Exchange, ()> {
    match after {
        None => Ok(target.post(path, body).await),
        Some(d) => tokio::time::timeout(d, target.post(path, body))
            .await
            .map_err(|_| ()),
    }
}

/// Time to the first token of one short request, alone (None: failed).
pub async fn probe_ttft(
    target: &Target,
    settings: &RequestSettings,
    max_tokens: u32,
) -> Option<f64> {
    let messages = [json!({"role": "user", "content": "Say hello."})];
    let body = request::body(settings, &messages, None, max_tokens, None).ok()?;
    let s = Sample::of(&target.post(settings.endpoint.path(), &body).await);
    s.ttft_ms.filter(|_| s.served())
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CancelFigures {
    pub cancelled: usize,
    pub delay_s: f64,
    /// Most requests in flight the client allowed.
    pub client_in_flight: Option<usize>,
    /// Most requests the server said were running during the level.
    pub server_running_max: Option<f64>,
    /// Running, as the level ended.
    pub server_running_after: Option<f64>,
    /// A short request's TTFT alone before and right after the level.
    pub probe_ttft_before_ms: Option<f64>,
    pub probe_ttft_after_ms: Option<f64>,
}

impl CancelFigures {
    pub fn new(
        cancelled: usize,
        delay_s: f64,
        client_in_flight: Option<usize>,
        timeline: &[GaugePoint],
    ) -> CancelFigures {
        CancelFigures {
            cancelled,
            delay_s,
            client_in_flight,
            server_running_max: timeline.iter().filter_map(|p| p.running).reduce(f64::max),
            server_running_after: timeline.last().and_then(|p| p.running),
            ..Default::default()
        }
    }

    /// The server ran more requests than the client had in flight: it
    /// went on generating for dropped ones.
    pub fn kept_generating(&self) -> Option<bool> {
        Some(self.server_running_max? > self.client_in_flight? as f64)
    }

    pub fn describe(&self) -> String {
        let fig = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
        let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1} ms"));
        format!(
            "{} after {} s; server running max {} (client in flight {}){}; probe TTFT {} before, {} after",
            self.cancelled,
            self.delay_s,
            fig(self.server_running_max),
            self.client_in_flight.map_or("-".into(), |c| c.to_string()),
            match self.kept_generating() {
                Some(true) => ": it kept generating for dropped requests",
                Some(false) => ": dropped requests freed their slots",
                None => "",
            },
            ms(self.probe_ttft_before_ms),
            ms(self.probe_ttft_after_ms)
        )
    }
}
