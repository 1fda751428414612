//! The one place the harness names a server's paths: the four protocols
//! as endpoints (each with its path and dialect), and the few other paths
//! it calls. Nothing else spells a path; a test may.

use super::dialect::Dialect;
use super::exchange::Exchange;

/// One of the four protocols a request speaks, by its path: what
/// afm-bench sends (`--endpoint`) and what the mock answers.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    /// OpenAI `/v1/chat/completions`.
    Chat,
    /// OpenAI `/v1/completions` (the history as a plain transcript).
    Completions,
    /// Anthropic `/v1/messages`.
    Messages,
    /// OpenAI `/v1/responses`.
    Responses,
}

/// The model list every protocol's servers answer (`GET`): readiness and
/// the default model.
pub const MODELS_PATH: &str = "/v1/models";
/// Anthropic's token count, under its Messages path.
pub const COUNT_TOKENS_PATH: &str = "/v1/messages/count_tokens";
/// A plain liveness path some servers answer before `/v1/models`.
pub const HEALTH_PATH: &str = "/health";
/// Prometheus metrics (afm-serve, vLLM, llama-server with `--metrics`).
pub const METRICS_PATH: &str = "/metrics";
/// llama-server's tokenizer, which afm-bench counts prompt tokens with.
pub const TOKENIZE_PATH: &str = "/tokenize";

impl Endpoint {
    /// Every endpoint, in the order above.
    pub const ALL: [Endpoint; 4] = [
        Endpoint::Chat,
        Endpoint::Completions,
        Endpoint::Messages,
        Endpoint::Responses,
    ];

    /// The endpoint at exactly `path`.
    pub fn of_path(path: &str) -> Option<Endpoint> {
        Self::ALL.into_iter().find(|e| e.path() == path)
    }

    /// The endpoint `path` is, or lies under (`/v1/messages/count_tokens`
    /// is Anthropic's); a query string is ignored.
    pub fn under(path: &str) -> Option<Endpoint> {
        let path = path.split('?').next().unwrap_or(path);
        Self::ALL.into_iter().find(|e| {
            path.strip_prefix(e.path())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
    }

    pub const fn path(self) -> &'static str {
        match self {
            Endpoint::Chat => "/v1/chat/completions",
            Endpoint::Completions => "/v1/completions",
            Endpoint::Messages => "/v1/messages",
            Endpoint::Responses => "/v1/responses",
        }
    }

    /// The wire protocol its replies are read in.
    pub fn dialect(self) -> Dialect {
        match self {
            Endpoint::Chat | Endpoint::Completions => Dialect::OpenAi,
            Endpoint::Messages => Dialect::Anthropic,
            Endpoint::Responses => Dialect::Responses,
        }
    }

    /// Its name as `--endpoint` takes it.
    pub fn name(self) -> String {
        use clap::ValueEnum as _;
        self.to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_string())
    }

    /// Whether the endpoint can ask for a JSON schema.
    pub fn takes_schema(self) -> bool {
        self != Endpoint::Completions
    }
}

/// A dialect found from, and sent to, its endpoint's path (kept here so
/// that paths have one home; the dialect itself knows no path).
impl Dialect {
    /// The protocol of an exchange, from its path.
    pub fn of(ex: &Exchange) -> Self {
        Self::of_path(&ex.path)
    }

    /// The protocol of a path: its endpoint's, OpenAI's for any other.
    pub fn of_path(path: &str) -> Self {
        Endpoint::under(path).map_or(Dialect::OpenAi, Endpoint::dialect)
    }

    /// Where a section of this dialect sends its requests.
    pub fn endpoint(self) -> Endpoint {
        match self {
            Dialect::OpenAi => Endpoint::Chat,
            Dialect::Anthropic => Endpoint::Messages,
            Dialect::Responses => Endpoint::Responses,
        }
    }

    /// [`Dialect::endpoint`]'s path.
    pub fn default_path(self) -> &'static str {
        self.endpoint().path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_names_its_endpoint_and_dialect() {
        for e in Endpoint::ALL {
            assert_eq!(Endpoint::of_path(e.path()), Some(e));
            assert_eq!(Endpoint::under(e.path()), Some(e));
            assert_eq!(Dialect::of_path(e.path()), e.dialect());
        }
        assert_eq!(Endpoint::under(COUNT_TOKENS_PATH), Some(Endpoint::Messages));
        assert_eq!(Endpoint::of_path(COUNT_TOKENS_PATH), None);
        assert_eq!(Endpoint::under("/v1/messagesx"), None);
        assert_eq!(
            Endpoint::under("/v1/responses?x=1"),
            Some(Endpoint::Responses)
        );
        assert_eq!(Dialect::of_path(MODELS_PATH), Dialect::OpenAi);
        for d in [Dialect::OpenAi, Dialect::Anthropic, Dialect::Responses] {
            assert_eq!(d.endpoint().dialect(), d);
        }
    }
}
