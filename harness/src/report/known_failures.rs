//! Known failures: a TOML file that attributes failing cases to issues,
//! so a report and a diff tell pre-existing, explained failures from new
//! ones.
//!
//! ```toml
//! [[known]]
//! id = "reasoning.think_split"
//! issue = "https://example.org/issues/12"
//! reason = "the bundled model has no reasoning mode"
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use serde::Deserialize;

use crate::report::Report;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Known {
    pub id: String,
    pub issue: String,
    #[serde(default)]
    pub reason: String,
}

#[derive(Debug, Clone, Default)]
pub struct KnownFailures {
    by_id: BTreeMap<String, Known>,
}

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    known: Vec<Known>,
}

impl KnownFailures {
    /// The file's entries, or none when no file is given.
    pub fn read_or_default(path: Option<&Path>) -> Result<Self> {
        path.map_or_else(|| Ok(Self::default()), Self::read)
    }

    pub fn read(path: &Path) -> Result<Self> {
        let file: File = crate::toml_input::read(path, "known failures")?;
        Ok(KnownFailures {
            by_id: file.known.into_iter().map(|k| (k.id.clone(), k)).collect(),
        })
    }

    pub fn get(&self, id: &str) -> Option<&Known> {
        self.by_id.get(id)
    }

    /// How an entry reads in reports: the issue, then the reason.
    pub fn label(&self, id: &str) -> Option<String> {
        self.get(id).map(|k| {
            if k.reason.is_empty() {
                k.issue.clone()
            } else {
                format!("{} ({})", k.issue, k.reason)
            }
        })
    }

    /// Attributes the report's failures to known issues.
    pub fn annotate(&self, report: &mut Report) {
        for c in &mut report.cases {
            let known = self.get(&c.id).filter(|_| c.status.failed());
            c.known_issue = known.and_then(|k| self.label(&k.id));
            c.known_cause = known.map(|k| k.issue.clone());
        }
        report.summary.known = report
            .cases
            .iter()
            .filter(|c| c.status.failed() && c.known_issue.is_some())
            .count();
    }
}
