//! What every protocol shares: the served model and the names it answers
//! to, response ids, and the shape of a reply (a whole JSON body, or a
//! stream of server-sent events).

use std::pin::Pin;

use futures_util::Stream;
use serde_json::{json, Value};

use crate::api::error::ApiError;
use crate::api::event_queue::{next_piece, Translate};
use crate::api::ids::unix_now;
use crate::runtime::{Engine, GrammarMode};

/// The served model and the names clients may use for it.
pub struct ApiContext {
    pub engine: Engine,
    /// Accepted values of a request's `model` (the first is reported).
    pub model_ids: Vec<String>,
    pub fingerprint: String,
}

impl ApiContext {
    pub fn new(engine: Engine, requested_as: &str) -> Self {
        let mut model_ids = vec![requested_as.to_string()];
        if engine.model_name() != requested_as {
            model_ids.push(engine.model_name().to_string());
        }
        let fingerprint = format!("fp_afm_{}", env!("CARGO_PKG_VERSION").replace('.', "_"));
        ApiContext {
            engine,
            model_ids,
            fingerprint,
        }
    }

    /// The name replies report.
    pub fn model(&self) -> &str {
        &self.model_ids[0]
    }

    /// `GET /v1/models`.
    pub fn models(&self) -> Value {
        json!({"object": "list", "data": [self.model_object(&self.model_ids[0])]})
    }

    /// `GET /v1/models/{id}` (the SDKs' `models.retrieve`): the model
    /// object of any name this server answers to, else the same 404 a
    /// request naming it gets.
    pub fn retrieve_model(&self, id: &str) -> Result<Value, ApiError> {
        self.check_model(Some(id))?;
        Ok(self.model_object(id))
    }

    fn model_object(&self, id: &str) -> Value {
        json!({
            "id": id,
            "object": "model",
            "created": unix_now(),
            "owned_by": "afm",
        })
    }

    /// A request naming another model is refused (404, as OpenAI does);
    /// none or an empty name means the served one.
    pub fn check_model(&self, requested: Option<&str>) -> Result<(), ApiError> {
        match requested {
            Some(m) if !m.is_empty() && !self.model_ids.iter().any(|id| id == m) => Err(ApiError {
                code: Some("model_not_found".into()),
                param: Some("model".into()),
                ..ApiError::new(
                    404,
                    "invalid_request_error",
                    format!(
                        "the model '{m}' does not exist (this server has '{}')",
                        self.model_ids[0]
                    ),
                )
            }),
            _ => Ok(()),
        }
    }
}

/// One server-sent event: an optional `event:` name and its `data:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

impl SseEvent {
    /// An unnamed event (OpenAI chat and completions).
    pub fn data(value: &Value) -> Self {
        SseEvent {
            event: None,
            data: value.to_string(),
        }
    }

    /// A named event whose data is `value` (Anthropic, Responses: the
    /// name repeats the data's `type`).
    pub fn named(name: &str, value: &Value) -> Self {
        SseEvent {
            event: Some(name.to_string()),
            data: value.to_string(),
        }
    }
}

/// A streamed reply's events, in order; the transport frames them.
pub type EventStream = Pin<Box<dyn Stream<Item = SseEvent> + Send>>;

/// The events a protocol's translation of a request's engine events
/// makes, one at a time, as a stream.
pub(crate) fn event_stream<T>(source: T) -> EventStream
where
    T: Translate<Piece = SseEvent> + Send + 'static,
{
    Box::pin(futures_util::stream::unfold(source, |mut s| async move {
        next_piece(&mut s).await.map(|e| (e, s))
    }))
}

/// A successful reply: a whole body, or events. `grammar` says whether a
/// requested constraint was enforced (known before the first event).
pub enum ApiResponse {
    Complete {
        body: Value,
        grammar: GrammarMode,
    },
    Stream {
        events: EventStream,
        grammar: GrammarMode,
    },
}
