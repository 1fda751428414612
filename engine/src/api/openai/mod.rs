//! OpenAI's chat completions and completions: the wire request and its
//! reading (`request`), replies and stream chunks (`chat`). Responses, the
//! other OpenAI protocol, is `api::responses`.

mod chat;
pub mod request;

pub use request::ChatRequest;
