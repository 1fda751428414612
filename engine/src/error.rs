//! The engine's error type. Every message names the problem and the thing it
//! concerns (a path, a key, an architecture), so a CLI can print it as one line.

use std::path::PathBuf;

/// Result alias used across the engine.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("model path does not exist: {}", .0.display())]
    ModelNotFound(PathBuf),

    #[error("unknown model alias '{alias}' (known aliases: {known})")]
    UnknownAlias { alias: String, known: String },

    #[error("bundled model '{alias}' is not installed at {}: run scripts/setup.sh", .path.display())]
    AliasNotInstalled { alias: String, path: PathBuf },

    #[error("model '{0}' is neither a local path nor in the local Hugging Face cache")]
    NotInHfCache(String),

    #[error("invalid model at {}: {reason}", .path.display())]
    InvalidModel { path: PathBuf, reason: String },

    #[error("unsupported model architecture '{name}' (supported: {supported})")]
    UnsupportedArchitecture { name: String, supported: String },

    /// A mode the loaded model cannot run in (named in the message).
    #[error("unsupported: {0}")]
    Unsupported(String),

    #[error("tokenizer: {0}")]
    Tokenizer(String),

    /// The template failed on its own (a bug of the template or of the
    /// shapes it was given): the server's fault.
    #[error("chat template: {0}")]
    Template(String),

    /// The template's own `raise_exception` refused the conversation (e.g.
    /// roles that do not alternate): the request's fault.
    #[error("the model's chat template refuses this conversation: {0}")]
    TemplateRefused(String),

    /// A request the engine will not run; `param` names the offending field
    /// (OpenAI error bodies carry it).
    #[error("invalid request: {message}")]
    InvalidRequest {
        message: String,
        param: Option<String>,
    },

    /// The engine thread is gone (it failed or was shut down).
    #[error("engine stopped: {0}")]
    EngineStopped(String),

    #[error("MLX: {0}")]
    Mlx(String),

    /// An invariant of the engine broke (a bug, named in the message).
    #[error("internal: {0}")]
    Internal(String),

    /// `convert` will not write what was asked (output folder, dtype, a
    /// tensor it cannot export).
    #[error("convert: {0}")]
    Convert(String),

    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl EngineError {
    pub(crate) fn invalid_model(path: impl Into<PathBuf>, reason: impl std::fmt::Display) -> Self {
        EngineError::InvalidModel {
            path: path.into(),
            reason: reason.to_string(),
        }
    }

    pub(crate) fn invalid_param(param: &str, message: impl std::fmt::Display) -> Self {
        EngineError::InvalidRequest {
            message: format!("{param}: {message}"),
            param: Some(param.to_string()),
        }
    }

    pub(crate) fn io(context: impl std::fmt::Display, source: std::io::Error) -> Self {
        EngineError::Io {
            context: context.to_string(),
            source,
        }
    }
}

impl From<mlx_rs::error::Exception> for EngineError {
    fn from(e: mlx_rs::error::Exception) -> Self {
        EngineError::Mlx(e.to_string())
    }
}
