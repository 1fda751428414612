//! One request and what came back, as every target hands it over: the
//! data checks, dialects and benchmarks read. It knows nothing of the
//! protocol; [`super::dialect::Dialect::of`] tells that from the path.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

/// One request and what came back.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Exchange {
    pub path: String,
    pub request: Value,
    pub status: u16,
    /// Lower-case names.
    pub headers: BTreeMap<String, String>,
    /// The whole JSON body (non-streamed responses and errors).
    pub body: Value,
    /// Chunk objects of a stream (each event's data), in order.
    pub chunks: Vec<Value>,
    /// Each chunk's SSE `event:` name ("" when it had none).
    pub events: Vec<String>,
    /// When each chunk arrived, in ms after the request was sent.
    #[serde(skip)]
    pub chunk_millis: Vec<f64>,
    /// The stream had a `data: [DONE]` line.
    pub done_marker: bool,
    /// Lines of the stream that were not `data: <json>` / `data: [DONE]`
    /// / `event:` and other SSE fields / blank / comments.
    pub malformed_lines: Vec<String>,
    /// The request never completed (connection refused, reset, timeout).
    pub transport_error: Option<String>,
    /// The transport error is one that would cost the next request to the
    /// endpoint as much (the time limit, the byte cap, no server): see
    /// `server::Unanswered`.
    #[serde(skip)]
    pub unanswered: bool,
    /// Not sent: its endpoint went unanswered earlier in the run (the
    /// transport error names that first failure).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub not_sent: bool,
    /// The stream went on past what the request's `max_tokens` allows,
    /// and reading stopped there: how far past.
    pub overran: Option<String>,
    /// The client walked away before the reply ended, on purpose
    /// (`server::Leave`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub left: bool,
    pub streamed: bool,
    pub millis: f64,
    /// The reply's bytes as they came, up to [`RAW_CAP`], and each
    /// piece's end in them with the ms it arrived: what a report keeps so
    /// that `afm-test regrade` reads the reply again exactly as it came.
    #[serde(skip)]
    pub raw: Vec<u8>,
    #[serde(skip)]
    pub raw_pieces: Vec<(usize, f64)>,
    /// More came than [`RAW_CAP`]: `raw` is its start.
    #[serde(skip)]
    pub raw_cut: bool,
    /// Whether `raw` is kept at all (a conformance run's replies; not a
    /// benchmark's).
    #[serde(skip)]
    pub keep_bytes: bool,
}

/// The reply bytes a report keeps of one request: a 2xx of a suite's
/// cases is kilobytes, a stream of a few hundred tokens tens of them.
pub const RAW_CAP: usize = 1 << 20;

impl Exchange {
    /// Keeps `bytes`, which arrived `at_millis` after the request, as far
    /// as [`RAW_CAP`] allows, when the exchange keeps its bytes.
    pub fn keep_raw(&mut self, bytes: &[u8], at_millis: f64) {
        if !self.keep_bytes {
            return;
        }
        let room = RAW_CAP.saturating_sub(self.raw.len());
        if bytes.len() > room {
            self.raw_cut = true;
        }
        let kept = &bytes[..bytes.len().min(room)];
        if !kept.is_empty() {
            self.raw.extend_from_slice(kept);
            self.raw_pieces.push((self.raw.len(), at_millis));
        }
    }
}
