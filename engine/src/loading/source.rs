//! Turns what a user passes as `--model` into files on disk.
//!
//! Three spellings are accepted, tried in this order:
//! 1. an alias of a bundled model (`smollm2`, `gemma3-270m`, `conformance`),
//!    installed by `scripts/setup.sh` into the model folder
//!    (`$AFM_MODEL_DIR`, defaulting to the one the build was configured
//!    with);
//! 2. a local path: a `.gguf` file, or a folder holding `config.json`
//!    (MLX/HF safetensors) or exactly one `.gguf`;
//! 3. a Hugging Face repo id (`owner/name`) already present in the local HF
//!    cache. Nothing is ever downloaded.

use std::path::{Path, PathBuf};

use crate::error::{EngineError, Result};

/// Bundled models: alias, folder under the model dir, file name.
const ALIASES: &[(&str, &str, &str)] = &[
    ("smollm2", "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    // Gemma 3 270M base (Gemma terms), Q4_K_M.
    ("gemma3-270m", "gemma3-270m", "gemma-3-270m-q4_k_m.gguf"),
    // afm-conformance: SmolLM2 taught Qwen3's thinking and Hermes tool
    // calls (fixtures/models/conformance/), assembled by set-up from the bundled
    // base and the committed deltas.
    ("conformance", "conformance", "afm-conformance.Q8_0.gguf"),
];

/// Where a model's files are, and in which format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    /// A single GGUF file holding weights, tokenizer and chat template.
    Gguf(PathBuf),
    /// An MLX/HF folder: `config.json`, `*.safetensors`, `tokenizer.json`, ...
    SafetensorsDir(PathBuf),
}

impl ModelSource {
    /// Resolves a `--model` argument (see the module docs for the rules).
    pub fn resolve(spec: &str) -> Result<Self> {
        if let Some(path) = alias_path(spec) {
            return if path.is_file() {
                Ok(ModelSource::Gguf(path))
            } else {
                Err(EngineError::AliasNotInstalled {
                    alias: spec.to_string(),
                    path,
                })
            };
        }
        let path = Path::new(spec);
        if path.exists() {
            return Self::from_path(path);
        }
        if looks_like_repo_id(spec) {
            return hf_cache_snapshot(spec)
                .ok_or_else(|| EngineError::NotInHfCache(spec.to_string()))
                .and_then(|dir| Self::from_path(&dir));
        }
        if !spec.contains(['/', '\\', '.']) {
            return Err(EngineError::UnknownAlias {
                alias: spec.to_string(),
                known: ALIASES.iter().map(|a| a.0).collect::<Vec<_>>().join(", "),
            });
        }
        Err(EngineError::ModelNotFound(path.to_path_buf()))
    }

    /// Classifies an existing path.
    pub fn from_path(path: &Path) -> Result<Self> {
        if path.is_file() {
            return if path.extension().is_some_and(|e| e == "gguf") {
                Ok(ModelSource::Gguf(path.to_path_buf()))
            } else {
                Err(EngineError::invalid_model(
                    path,
                    "expected a .gguf file or a model folder",
                ))
            };
        }
        if path.join("config.json").is_file() {
            return Ok(ModelSource::SafetensorsDir(path.to_path_buf()));
        }
        let ggufs: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| EngineError::io(format!("reading {}", path.display()), e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "gguf"))
            .collect();
        match ggufs.as_slice() {
            [one] => Ok(ModelSource::Gguf(one.clone())),
            [] => Err(EngineError::invalid_model(
                path,
                "folder has neither config.json nor a .gguf file",
            )),
            _ => Err(EngineError::invalid_model(
                path,
                "folder has several .gguf files: pass one of them",
            )),
        }
    }

    /// The path the model was found at (file or folder).
    pub fn path(&self) -> &Path {
        match self {
            ModelSource::Gguf(p) | ModelSource::SafetensorsDir(p) => p,
        }
    }
}

/// The folder bundled models are installed in.
pub fn model_dir() -> PathBuf {
    std::env::var_os("AFM_MODEL_DIR")
        .map(PathBuf::from)
        .or_else(|| option_env!("AFM_MODEL_DIR").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(".cache/models"))
}

fn alias_path(spec: &str) -> Option<PathBuf> {
    ALIASES
        .iter()
        .find(|(alias, _, _)| *alias == spec)
        .map(|(_, dir, file)| model_dir().join(dir).join(file))
}

fn looks_like_repo_id(spec: &str) -> bool {
    let mut parts = spec.split('/');
    matches!((parts.next(), parts.next(), parts.next()), (Some(o), Some(n), None)
        if !o.is_empty() && !n.is_empty() && !o.starts_with('.'))
}

/// The snapshot folder of `owner/name` in the HF hub cache, if present.
/// Prefers the revision `refs/main` names, else any snapshot.
fn hf_cache_snapshot(repo_id: &str) -> Option<PathBuf> {
    let hub = std::env::var_os("HF_HUB_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HF_HOME").map(|h| PathBuf::from(h).join("hub")))
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/huggingface/hub"))
        })?;
    let repo = hub.join(format!("models--{}", repo_id.replace('/', "--")));
    let snapshots = repo.join("snapshots");
    if let Ok(rev) = std::fs::read_to_string(repo.join("refs/main")) {
        let dir = snapshots.join(rev.trim());
        if dir.is_dir() {
            return Some(dir);
        }
    }
    std::fs::read_dir(&snapshots)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_bare_word_is_an_unknown_alias() {
        let err = ModelSource::resolve("no-such-model").unwrap_err();
        assert!(matches!(err, EngineError::UnknownAlias { .. }), "{err}");
        assert!(err.to_string().contains("smollm2"));
    }

    #[test]
    fn missing_path_is_named() {
        let err = ModelSource::resolve("./nowhere/model.gguf").unwrap_err();
        assert!(matches!(err, EngineError::ModelNotFound(_)), "{err}");
        assert!(err.to_string().contains("nowhere/model.gguf"));
    }

    #[test]
    fn repo_id_resolves_from_hf_cache_snapshot() {
        let hub = std::env::temp_dir().join(format!("afm-hub-{}", std::process::id()));
        let snap = hub.join("models--acme--tiny/snapshots/abc123");
        std::fs::create_dir_all(&snap).unwrap();
        std::fs::create_dir_all(hub.join("models--acme--tiny/refs")).unwrap();
        std::fs::write(hub.join("models--acme--tiny/refs/main"), "abc123\n").unwrap();
        std::fs::write(snap.join("config.json"), "{}").unwrap();
        let found = hf_cache_snapshot_in(&hub, "acme/tiny");
        assert_eq!(found.as_deref(), Some(snap.as_path()));
        assert_eq!(
            ModelSource::from_path(&snap).unwrap(),
            ModelSource::SafetensorsDir(snap.clone())
        );
        std::fs::remove_dir_all(&hub).unwrap();
    }

    fn hf_cache_snapshot_in(hub: &Path, repo: &str) -> Option<PathBuf> {
        std::env::set_var("HF_HUB_CACHE", hub);
        hf_cache_snapshot(repo)
    }
}
