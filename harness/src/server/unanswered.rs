//! Endpoints a run has seen go unanswered: a reply that did not end
//! within the request time limit, passed the harness's byte cap (or
//! declared a length past it), or a server that refused the connection.
//! Each such request cost the run its whole time limit (or would again),
//! so a conformance run stops sending to such an endpoint: a case that
//! needs it is "not run", naming the first failure, instead of waiting
//! it out once more (a server whose every body never ends ends its smoke
//! tier in one time limit, not one per case).
//!
//! An endpoint closes at its first failure when it has answered nothing
//! in this run, and otherwise at its second failure in a row: a server
//! that answers may still hang on one request (vllm-mlx 0.6.0 on a
//! `max_completion_tokens` case) and answer the next. Keyed by method,
//! path and whether the request streams: a server whose whole bodies
//! hang may still stream.

use std::collections::HashMap;
use std::sync::Mutex;

type Key = (String, String, bool);

#[derive(Default)]
struct Endpoint {
    answered: bool,
    /// Failures since the last answer, and the first one's error.
    failures: u32,
    first: String,
}

impl Endpoint {
    fn closed(&self) -> bool {
        self.failures >= if self.answered { 2 } else { 1 }
    }
}

#[derive(Default)]
pub struct Unanswered {
    endpoints: Mutex<HashMap<Key, Endpoint>>,
}

impl Unanswered {
    /// Why a request of `method path` (streamed or not) is not sent: its
    /// endpoint is closed for the run, named by its first failure.
    pub fn earlier(&self, method: &str, path: &str, streamed: bool) -> Option<String> {
        let endpoints = self.endpoints.lock().expect("unanswered endpoints");
        let key = (method.to_string(), path.to_string(), streamed);
        let e = endpoints.get(&key).filter(|e| e.closed())?;
        Some(format!(
            "not run: {method} {path}{} went unanswered earlier in this run ({} time{} in a \
             row{}), the first: {}",
            if streamed { " (streamed)" } else { "" },
            e.failures,
            if e.failures == 1 { "" } else { "s" },
            if e.answered { "" } else { ", never answered" },
            e.first
        ))
    }

    /// Records how a request to the endpoint ended: `unanswered` names
    /// the failure; None: it was answered.
    pub fn record(&self, method: &str, path: &str, streamed: bool, unanswered: Option<&str>) {
        let mut endpoints = self.endpoints.lock().expect("unanswered endpoints");
        let e = endpoints
            .entry((method.to_string(), path.to_string(), streamed))
            .or_default();
        match unanswered {
            Some(why) => {
                if e.failures == 0 {
                    e.first = why.to_string();
                }
                e.failures += 1;
            }
            None => {
                e.answered = true;
                e.failures = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHAT: &str = "/v1/chat/completions";

    #[test]
    fn an_endpoint_that_never_answered_closes_at_its_first_failure() {
        let u = Unanswered::default();
        u.record("POST", CHAT, false, Some("no end in 20 s"));
        let why = u.earlier("POST", CHAT, false).unwrap();
        assert!(
            why.starts_with("not run: POST /v1/chat/completions went"),
            "{why}"
        );
        assert!(
            why.ends_with("never answered), the first: no end in 20 s"),
            "{why}"
        );
        // Streamed, another method or another path: still sent.
        assert_eq!(u.earlier("POST", CHAT, true), None);
        assert_eq!(u.earlier("GET", CHAT, false), None);
        assert_eq!(u.earlier("POST", "/v1/completions", false), None);
    }

    #[test]
    fn an_endpoint_that_answered_closes_at_two_failures_in_a_row() {
        let u = Unanswered::default();
        u.record("POST", CHAT, false, None);
        u.record("POST", CHAT, false, Some("no end in 20 s"));
        assert_eq!(u.earlier("POST", CHAT, false), None, "one hang");
        u.record("POST", CHAT, false, None);
        u.record("POST", CHAT, false, Some("again"));
        assert_eq!(u.earlier("POST", CHAT, false), None, "not in a row");
        u.record("POST", CHAT, false, Some("and again"));
        let why = u.earlier("POST", CHAT, false).unwrap();
        assert!(
            why.contains("(2 times in a row), the first: again"),
            "{why}"
        );
    }
}
