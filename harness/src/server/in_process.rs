//! The in-process target: afm-serve's own router over an engine in this
//! process, called through tower's `oneshot` (no socket), so routing, keys,
//! CORS and SSE framing are tested in-process too. Only with the `engine`
//! feature: without it afm-test builds from pure-Rust dependencies and
//! speaks HTTP alone.

use std::sync::Arc;
use std::time::Instant;

use afm_engine::api::{router, ApiContext, ServeFlags, ServerConfig};
use afm_engine::{Engine, EngineError};
use futures_util::StreamExt;
use tower::ServiceExt;

use super::{error_chain, headers_of, millis_since, BodyReader, Exchange, Outgoing, Target};

#[derive(Clone)]
pub struct InProcess {
    pub api: Arc<ApiContext>,
    /// afm-serve's router over `api`.
    router: axum::Router,
    pub(super) api_key: Option<String>,
    /// Replies keep their bytes (`Target::keeping_bytes`).
    pub(super) keep_bytes: bool,
}

impl Target {
    /// The engine started in this process as `afm-serve FLAGS --model
    /// MODEL` would start it (afm-serve's own flag reader and defaults),
    /// behind its router. A model that refuses `--deterministic` runs
    /// without it: the flags returned are the ones in effect, with the
    /// refusal's reason.
    pub fn start_in_process(
        model: &str,
        flags: &[String],
        api_key: Option<String>,
    ) -> anyhow::Result<(Target, Vec<String>, Option<String>)> {
        let mut flags = flags.to_vec();
        let config = ServeFlags::parse_args(&flags)?.engine_config()?;
        let (engine, refused) = match Engine::start(model, config.clone()) {
            Err(EngineError::Unsupported(reason)) if config.deterministic => {
                flags.retain(|f| f != "--deterministic");
                let config = ServeFlags::parse_args(&flags)?.engine_config()?;
                (Engine::start(model, config)?, Some(reason))
            }
            other => (other?, None),
        };
        let api = Arc::new(ApiContext::new(engine, model));
        Ok((Target::in_process(api, api_key), flags, refused))
    }

    /// afm-serve's router over `api`, requiring `api_key` when given.
    pub fn in_process(api: Arc<ApiContext>, api_key: Option<String>) -> Self {
        let config = ServerConfig {
            api_key: api_key.clone(),
            ..Default::default()
        };
        Target::InProcess(InProcess {
            router: router(api.clone(), &config),
            api,
            api_key,
            keep_bytes: false,
        })
    }
}

impl InProcess {
    /// The name the served model answers to.
    pub fn model(&self) -> &str {
        &self.api.model_ids[0]
    }

    /// Sends `out` (its `body` already prepared) through the router.
    pub(super) async fn send(
        &self,
        out: &Outgoing,
        key: Option<&str>,
        body: Vec<u8>,
        start: Instant,
        ex: &mut Exchange,
    ) {
        let mut req = axum::http::Request::builder()
            .method(out.method.as_str())
            .uri(out.path.as_str());
        if out.body.is_some() && !out.headers.iter().any(|(n, _)| n == "content-type") {
            req = req.header("content-type", "application/json");
        }
        if let Some(k) = key {
            req = req.header("authorization", format!("Bearer {k}"));
        }
        for (name, value) in &out.headers {
            req = req.header(name.as_str(), value.as_str());
        }
        let req = match req.body(axum::body::Body::from(body)) {
            Ok(r) => r,
            Err(e) => {
                ex.transport_error = Some(e.to_string());
                return;
            }
        };
        let response = match self.router.clone().oneshot(req).await {
            Ok(r) => r,
            Err(never) => match never {},
        };
        ex.status = response.status().as_u16();
        ex.headers = headers_of(response.headers());
        let mut reader = BodyReader::new(ex, out.leave);
        let mut data = response.into_body().into_data_stream();
        while let Some(piece) = data.next().await {
            match piece {
                Ok(bytes) => {
                    reader.feed(&bytes, millis_since(start), ex);
                    if reader.stops(ex) {
                        break;
                    }
                }
                Err(e) => {
                    ex.transport_error = Some(error_chain(&e));
                    break;
                }
            }
        }
        reader.finish(millis_since(start), ex);
    }
}
