//! What a mock did with each request, timed on its own clock: when the
//! request arrived, when each token's event was handed to the connection
//! and when the last byte was. A client's timing is checked against it
//! (`GET /mock/record`).

use serde::{Deserialize, Serialize};

use crate::bench::stats::Dist;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RequestRecord {
    pub id: u64,
    pub path: String,
    pub streamed: bool,
    /// ms after the mock started.
    pub received_ms: f64,
    /// Each token event's sending, ms after the request arrived.
    pub token_ms: Vec<f64>,
    /// The last byte's sending, ms after arrival (None: never sent).
    pub end_ms: Option<f64>,
    /// Tokens the reply was to carry.
    pub tokens: usize,
    /// The client went away before the end.
    pub cancelled: bool,
    /// The faults applied to it.
    pub faults: Vec<String>,
    /// Cross-talk: the request whose reply it was given.
    pub crossed_from: Option<u64>,
}

/// Everything a mock has served since its start or last reset.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MockRecord {
    pub requests: Vec<RequestRecord>,
}

/// The mock's own TTFT, ITL and E2E over its completed streams.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MockTiming {
    pub streams: usize,
    pub ttft: Option<Dist>,
    pub itl: Option<Dist>,
    pub e2e: Option<Dist>,
}

impl MockRecord {
    pub fn timing(&self) -> MockTiming {
        let done: Vec<&RequestRecord> = self
            .requests
            .iter()
            .filter(|r| r.streamed && !r.cancelled && !r.token_ms.is_empty())
            .collect();
        let ttft: Vec<f64> = done.iter().map(|r| r.token_ms[0]).collect();
        let itl: Vec<f64> = done
            .iter()
            .flat_map(|r| r.token_ms.windows(2).map(|w| w[1] - w[0]))
            .collect();
        let e2e: Vec<f64> = done.iter().filter_map(|r| r.end_ms).collect();
        MockTiming {
            streams: done.len(),
            ttft: Dist::of(&ttft),
            itl: Dist::of(&itl),
            e2e: Dist::of(&e2e),
        }
    }
}
