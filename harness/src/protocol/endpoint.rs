//! The four protocols as endpoints: one name per API, its path.

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

impl Endpoint {
    pub fn of_path(path: &str) -> Option<Endpoint> {
        match path {
            "/v1/chat/completions" => Some(Endpoint::Chat),
            "/v1/completions" => Some(Endpoint::Completions),
            "/v1/messages" => Some(Endpoint::Messages),
            "/v1/responses" => Some(Endpoint::Responses),
            _ => None,
        }
    }

    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Chat => "/v1/chat/completions",
            Endpoint::Completions => "/v1/completions",
            Endpoint::Messages => "/v1/messages",
            Endpoint::Responses => "/v1/responses",
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
