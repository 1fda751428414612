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
//!
//! One case may fail on one server for different causes with different
//! models (a peer's file serves both compatibility pages): an entry with
//! `model = "conformance"` applies only to runs whose model, as served or
//! as requested, contains that text, and is preferred over the entry
//! without one.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use serde::Deserialize;

use crate::report::{Report, RunInfo};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Known {
    pub id: String,
    pub issue: String,
    #[serde(default)]
    pub reason: String,
    /// Only for runs whose model (served or requested) contains this.
    #[serde(default)]
    pub model: Option<String>,
}

impl Known {
    /// The issue, with the reason when there is one.
    pub fn label(&self) -> String {
        if self.reason.is_empty() {
            self.issue.clone()
        } else {
            format!("{} ({})", self.issue, self.reason)
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct KnownFailures {
    /// Each case's entries, those scoped to a model first.
    by_id: BTreeMap<String, Vec<Known>>,
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
        let mut by_id: BTreeMap<String, Vec<Known>> = BTreeMap::new();
        for k in file.known {
            by_id.entry(k.id.clone()).or_default().push(k);
        }
        for entries in by_id.values_mut() {
            entries.sort_by_key(|k| k.model.is_none());
        }
        Ok(KnownFailures { by_id })
    }

    /// The entry for case `id` in a run of a model that goes by `models`
    /// (none: only the entries without a model apply).
    pub fn get(&self, id: &str, models: &[&str]) -> Option<&Known> {
        self.by_id.get(id)?.iter().find(|k| match &k.model {
            None => true,
            Some(m) => models.iter().any(|name| name.contains(m.as_str())),
        })
    }

    /// How case `id`'s entry for the run that made `report` reads.
    pub fn label(&self, id: &str, report: &Report) -> Option<String> {
        self.get(id, &model_names(&report.run)).map(Known::label)
    }

    /// Attributes the report's failures to known issues.
    pub fn annotate(&self, report: &mut Report) {
        let names: Vec<String> = model_names(&report.run)
            .into_iter()
            .map(str::to_string)
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        for c in &mut report.cases {
            let known = self.get(&c.id, &names).filter(|_| c.status.failed());
            c.known_issue = known.map(Known::label);
            c.known_cause = known.map(|k| k.issue.clone());
        }
        report.summary.known = report
            .cases
            .iter()
            .filter(|c| c.status.failed() && c.known_issue.is_some())
            .count();
    }
}

/// The names a run's model goes by: as served, and as requested.
fn model_names(run: &RunInfo) -> Vec<&str> {
    std::iter::once(run.model.as_str())
        .chain(run.requested_model.as_deref())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_scoped_to_a_model_wins_for_that_model_only() {
        let path = std::env::temp_dir().join(format!("afm-known-{}.toml", std::process::id()));
        std::fs::write(
            &path,
            r#"
[[known]]
id = "messages.basic"
issue = "temperature 0 means 1.0"

[[known]]
id = "messages.basic"
issue = "thinking blocks have no signature"
model = "conformance"
"#,
        )
        .unwrap();
        let known = KnownFailures::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let issue = |models: &[&str]| {
            known
                .get("messages.basic", models)
                .map(|k| k.issue.as_str())
        };
        assert_eq!(
            issue(&[".cache/models/conformance/hf"]),
            Some("thinking blocks have no signature")
        );
        assert_eq!(
            issue(&["smollm2-f32-tools"]),
            Some("temperature 0 means 1.0")
        );
        assert_eq!(issue(&[]), Some("temperature 0 means 1.0"));
        assert_eq!(
            known
                .get("messages.other", &["conformance"])
                .map(|k| &k.issue),
            None
        );
    }
}
