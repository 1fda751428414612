//! A reply's plan: the tokens the mock will send and when each is due,
//! then each `--fault` applied to it (other content, no content, a stall,
//! a reset, a miscount, a stream without `[DONE]` or with broken lines),
//! before the reply is rendered in its protocol's shape.

use std::sync::Arc;

use rand::rngs::StdRng;
use serde_json::Value;

use super::events::Frame;
use super::faults::Fault;
use super::reply;
use super::Mock;

/// What one request will be sent.
pub struct Plan {
    /// The tokens the reply carries.
    pub pieces: Vec<String>,
    /// The tokens its usage counts, when not `pieces` (a miscount).
    pub counted: Option<Vec<String>>,
    /// When each token is due, in ms after arrival.
    pub at: Vec<f64>,
    /// It stopped at its token budget.
    pub cut: bool,
    pub prompt_tokens: usize,
    /// The stream is cut (connection reset) before this token.
    pub reset_at: Option<usize>,
    /// Whose reply it carries instead of its own (cross-talk).
    pub crossed_from: Option<u64>,
    pub no_done: bool,
    pub malformed_sse: bool,
    /// The faults applied, by name, for the mock's record.
    pub faults: Vec<String>,
}

impl Plan {
    /// The reply the request's prompt asks for: a schema's instance, or
    /// words that follow the prompt, up to its token budget.
    pub fn new(m: &Mock, request: &Value, rng: &mut StdRng) -> Plan {
        let prompt = reply::prompt_text(request);
        let limit =
            crate::protocol::dialect::token_budget(request).map_or(usize::MAX, |n| n as usize);
        let wanted = m.args.output_tokens.draw(rng).round().max(1.0) as usize;
        let (pieces, cut) = match reply::schema_of(request) {
            Some(s) => (
                reply::tokens(&reply::spaced_json(&reply::instance(s))),
                false,
            ),
            None => (reply::words(&prompt, wanted.min(limit)), wanted >= limit),
        };
        Plan {
            pieces,
            counted: None,
            at: Vec::new(),
            cut,
            prompt_tokens: reply::tokens(&prompt).len(),
            reset_at: None,
            crossed_from: None,
            no_done: false,
            malformed_sse: false,
            faults: Vec::new(),
        }
    }

    /// Each fault request `id` is in the share of, applied: first those
    /// that change what is sent (its tokens), then the schedule is drawn
    /// for what is left, then those that change how it is sent. `other`:
    /// the most recent other request in flight and its tokens.
    pub fn apply_faults(
        &mut self,
        m: &Mock,
        id: u64,
        strict: bool,
        other: Option<(u64, Arc<Vec<String>>)>,
        rng: &mut StdRng,
    ) {
        let faults: Vec<Fault> = m
            .args
            .fault
            .iter()
            .copied()
            .filter(|f| m.faulted(id, *f))
            .collect();
        if faults.contains(&Fault::CrossTalk) {
            if let Some((k, theirs)) = &other {
                self.pieces = theirs.to_vec();
                self.crossed_from = Some(*k);
                self.faults.push(Fault::CrossTalk.to_string());
            }
        }
        if faults.contains(&Fault::EmptyStrict) && strict && other.is_some() {
            self.pieces.clear();
            self.faults.push(Fault::EmptyStrict.to_string());
        }
        self.schedule(m, rng);
        let half = self.pieces.len() / 2;
        for fault in faults {
            match fault {
                Fault::Stall { ms } if !self.pieces.is_empty() => {
                    self.at.iter_mut().skip(half).for_each(|x| *x += ms);
                }
                Fault::Reset => self.reset_at = Some(half),
                // The usage counts tokens the stream never carried.
                Fault::Miscount => {
                    let extra = std::iter::repeat_n(String::new(), 3);
                    self.counted = Some(self.pieces.iter().cloned().chain(extra).collect());
                }
                Fault::NoDone => {
                    self.no_done = true;
                    continue;
                }
                Fault::MalformedSse => {
                    self.malformed_sse = true;
                    continue;
                }
                _ => continue,
            }
            self.faults.push(fault.to_string());
        }
    }

    /// When each token is due: the first after the drawn TTFT, each next
    /// one a drawn ITL later.
    fn schedule(&mut self, m: &Mock, rng: &mut StdRng) {
        let mut t = m.args.ttft.draw(rng);
        self.at = Vec::with_capacity(self.pieces.len().max(1));
        for k in 0..self.pieces.len().max(1) {
            if k > 0 {
                t += m.args.itl.draw(rng);
            }
            self.at.push(t);
        }
    }

    /// The stream's events with the stream faults applied to them.
    pub fn stream_frames(&self, mut frames: Vec<Frame>) -> Vec<Frame> {
        if self.no_done {
            frames.retain(|f| f.text != "data: [DONE]\n\n");
        }
        if self.malformed_sse {
            // Neither an SSE field nor JSON, then a data line cut short.
            let at = frames.len() / 2;
            frames.insert(
                at,
                Frame {
                    text: "this is not SSE\ndata: {\"choices\": [\n\n".into(),
                    token: None,
                    due_with: frames[at.saturating_sub(1)].due_with,
                },
            );
        }
        if self.counted.is_some() {
            // The extra tokens are in the usage only, not in the stream.
            frames.retain(|f| f.token.is_none_or(|k| k < self.pieces.len()));
        }
        frames
    }
}
