//! The harness's TOML inputs (suites, known failures, profiles, matrix
//! files) read one way, so every error names the kind of file and its path.

use std::path::Path;

use anyhow::{Context, Result};
use serde::de::DeserializeOwned;

/// Reads and parses `path`; `what` names the file in errors ("profile").
pub fn read<T: DeserializeOwned>(path: &Path, what: &str) -> Result<T> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading {what} {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("{what} {}", path.display()))
}
