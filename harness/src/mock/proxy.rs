//! `afm-bench mock --upstream URL`: a proxy in front of a real server that
//! gives a request arriving while another is in flight the other's reply
//! (`--fault cross-talk`). Replies are read whole before they are passed
//! on, so a proxy's timing is not a server's; it exists to prove the
//! checks on a real model's text.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Result;
use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::Response;
use tokio::sync::watch;

use super::record::RequestRecord;
use super::{ms_between, Mock};

/// An upstream reply, read whole.
#[derive(Clone)]
struct Whole {
    status: u16,
    content_type: String,
    body: Bytes,
}

type Slot = watch::Receiver<Option<Whole>>;

pub struct Proxy {
    client: reqwest::Client,
    base: String,
    /// Each request's reply once it came, by id (the newest few hundred).
    replies: Mutex<BTreeMap<u64, Slot>>,
    in_flight: Mutex<Vec<u64>>,
}

impl Proxy {
    pub fn new(base: &str) -> Result<Proxy> {
        Ok(Proxy {
            client: reqwest::Client::builder().build()?,
            base: base.trim_end_matches('/').to_string(),
            replies: Mutex::new(BTreeMap::new()),
            in_flight: Mutex::new(Vec::new()),
        })
    }

    /// Forwards `body` to the upstream's `path`; with `cross`, answers with
    /// the reply of the newest request that was in flight when this one
    /// arrived, if any.
    pub async fn forward(
        &self,
        mock: &Arc<Mock>,
        id: u64,
        received: Instant,
        path: &str,
        body: Bytes,
        cross: bool,
    ) -> Response {
        let (tx, rx) = watch::channel(None);
        let partner = {
            let mut replies = self.replies.lock().expect("a lock");
            replies.insert(id, rx);
            while replies.len() > 512 {
                replies.pop_first();
            }
            let mut f = self.in_flight.lock().expect("a lock");
            let partner = f.last().copied().filter(|_| cross);
            f.push(id);
            partner.and_then(|p| replies.get(&p).cloned().map(|slot| (p, slot)))
        };
        mock.running.fetch_add(1, Ordering::SeqCst);
        let own = self.fetch(path, body).await;
        let _ = tx.send(Some(own.clone()));
        self.in_flight.lock().expect("a lock").retain(|k| *k != id);
        let (reply, crossed_from) = match partner {
            Some((p, mut slot)) => match slot.wait_for(Option::is_some).await {
                Ok(r) => (r.clone().expect("a reply"), Some(p)),
                Err(_) => (own, None),
            },
            None => (own, None),
        };
        mock.running.fetch_sub(1, Ordering::SeqCst);
        let now = Instant::now();
        mock.record
            .lock()
            .expect("a lock")
            .requests
            .push(RequestRecord {
                id,
                path: path.to_string(),
                streamed: false,
                received_ms: mock.since_start_ms(received),
                end_ms: Some(ms_between(received, now)),
                faults: crossed_from
                    .map(|_| "cross-talk".to_string())
                    .into_iter()
                    .collect(),
                crossed_from,
                ..Default::default()
            });
        Response::builder()
            .status(StatusCode::from_u16(reply.status).unwrap_or(StatusCode::BAD_GATEWAY))
            .header(header::CONTENT_TYPE, reply.content_type)
            .body(Body::from(reply.body))
            .expect("a response")
    }

    /// Forwards a request that is not a generation, untouched.
    pub async fn pass(&self, method: axum::http::Method, path: &str, body: Bytes) -> Response {
        let w = self.send(method, path, body).await;
        Response::builder()
            .status(StatusCode::from_u16(w.status).unwrap_or(StatusCode::BAD_GATEWAY))
            .header(header::CONTENT_TYPE, w.content_type)
            .body(Body::from(w.body))
            .expect("a response")
    }

    async fn fetch(&self, path: &str, body: Bytes) -> Whole {
        self.send(axum::http::Method::POST, path, body).await
    }

    async fn send(&self, method: axum::http::Method, path: &str, body: Bytes) -> Whole {
        let method =
            reqwest::Method::from_bytes(method.as_str().as_bytes()).unwrap_or(reqwest::Method::GET);
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if !body.is_empty() {
            req = req
                .header(header::CONTENT_TYPE, "application/json")
                .body(body);
        }
        let sent = req.send().await;
        let failed = |e: String| Whole {
            status: 502,
            content_type: "application/json".into(),
            body: Bytes::from(
                serde_json::json!({"error": {"message": format!("upstream: {e}"),
                    "type": "upstream_error"}})
                .to_string(),
            ),
        };
        match sent {
            Ok(r) => {
                let status = r.status().as_u16();
                let content_type = r
                    .headers()
                    .get(header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("application/json")
                    .to_string();
                match r.bytes().await {
                    Ok(body) => Whole {
                        status,
                        content_type,
                        body,
                    },
                    Err(e) => failed(e.to_string()),
                }
            }
            Err(e) => failed(e.to_string()),
        }
    }
}
