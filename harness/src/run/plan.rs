//! The matrix file (`afm-test matrix FILE`): the targets a matrix run
//! covers, each run as its own conformance run into a column.
//!
//! ```toml
//! tier = "standard"                 # default for every target
//! sections = ["tools", "grammar"]   # optional
//! seed = 1                          # optional
//! repeat = 3                        # optional: attempts of each case
//! model_name = "smollm2"            # optional: the model's one name on the page
//!
//! [[target]]
//! name = "afm-serve"                # the column and the report's folder
//! server = "afm-serve --model {model} --port {port} --enable-prefix-caching"
//! model = "smollm2"
//!
//! [[target]]
//! name = "peer"
//! url = "http://127.0.0.1:8080"     # a server already running
//! profile = "profiles/peer.toml"    # optional, as --profile
//! known_failures = "known.toml"     # optional
//!
//! [[target]]
//! name = "in-process"               # neither url nor server: the engine
//! model = "smollm2"
//! version = "0.9.0"                 # optional: shown as in-process@0.9.0
//! sections = ["tools"]              # optional: instead of the file's
//!
//! [[unavailable]]                   # a server listed, not run, and why
//! name = "sglang"
//! why = "its CPU build needs a CUDA-only wheel"
//! ```
//!
//! Paths in the file are relative to the file.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use serde::Deserialize;

use crate::report::matrix::{label, Unavailable};
use crate::suite::Tier;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixFile {
    #[serde(default)]
    pub tier: Option<Tier>,
    #[serde(default)]
    pub sections: Vec<String>,
    #[serde(default)]
    pub seed: Option<u64>,
    /// Attempts of each case (`run --repeat`), for every target.
    #[serde(default)]
    pub repeat: Option<u32>,
    #[serde(default)]
    pub suites: Option<PathBuf>,
    /// The one name the page gives the model when every target serves the
    /// same one in its own form (a GGUF, an HF folder, an alias): else
    /// each column shows the name its server gave it.
    #[serde(default)]
    pub model_name: Option<String>,
    #[serde(rename = "target")]
    pub targets: Vec<MatrixTarget>,
    /// Servers that belong in the matrix but cannot run here.
    #[serde(default, rename = "unavailable")]
    pub unavailable: Vec<Unavailable>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixTarget {
    pub name: String,
    /// The server's version, shown beside its name.
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub tier: Option<Tier>,
    /// This column's sections, instead of the file's (a server that cannot
    /// run some without stalling every later case: say why in the file).
    #[serde(default)]
    pub sections: Option<Vec<String>>,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub server: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub api_key: Option<String>,
    #[serde(default)]
    pub profile: Option<PathBuf>,
    #[serde(default)]
    pub known_failures: Option<PathBuf>,
    #[serde(default)]
    pub chat_template: Option<PathBuf>,
    #[serde(default)]
    pub deterministic: Option<bool>,
    /// This column's attempts of each case, instead of the file's.
    #[serde(default)]
    pub repeat: Option<u32>,
}

impl MatrixFile {
    pub fn read(path: &Path) -> Result<MatrixFile> {
        let mut file: MatrixFile = crate::toml_input::read(path, "matrix")?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let relative = |p: &mut Option<PathBuf>| {
            if let Some(p) = p {
                if p.is_relative() {
                    *p = dir.join(&*p);
                }
            }
        };
        relative(&mut file.suites);
        let mut names = std::collections::BTreeSet::new();
        for t in &mut file.targets {
            relative(&mut t.profile);
            relative(&mut t.known_failures);
            relative(&mut t.chat_template);
            if t.url.is_some() && t.server.is_some() {
                bail!(
                    "matrix {}: target '{}' has both url and server",
                    path.display(),
                    t.name
                );
            }
            let plain = !t.name.is_empty()
                && t.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
            if !plain || !names.insert(t.name.clone()) {
                bail!(
                    "matrix {}: target name '{}' must be unique and made of letters, digits, - _ .",
                    path.display(),
                    t.name
                );
            }
        }
        if file.targets.is_empty() {
            bail!("matrix {}: no [[target]]", path.display());
        }
        Ok(file)
    }
}

impl MatrixTarget {
    pub fn label(&self) -> String {
        label(&self.name, self.version.as_deref())
    }
}
