//! Known failures: a TOML file that attributes failing cases to causes,
//! so a report and a diff tell pre-existing, explained failures from new
//! ones.
//!
//! ```toml
//! [[cause]]
//! id = "usage-chunk-object"
//! issue = "mlx-lm 0.32.2: the streamed usage chunk is a chat.completion"
//! reason = "the last chunk has object chat.completion"
//!
//! [[known]]
//! id = "preflight.stream"
//! cause = "usage-chunk-object"
//!
//! [[known]]
//! id = "concurrency.sixteen_streams"
//! cause = "usage-chunk-object"
//! reason = "in each of the 16 streams"   # how it shows here (optional)
//! ```
//!
//! A cause is named once, by its id, however many cases it fails: pages
//! count causes by id, so one server bug is one cause whatever each
//! case's note says. An entry may still carry its own `issue` (and
//! `reason`) without a `cause`: it is then a cause of its own, named by
//! its issue text.
//!
//! A failure that is not the server's (the model's, on this server's
//! rendering or precision) is attributed all the same, with `whose =
//! "model"` on its cause or entry: its footnote says so, from the file,
//! and the server is not blamed.
//!
//! One case may fail on one server for different causes with different
//! models (a peer's file serves both compatibility pages): an entry with
//! `model = "conformance"` applies only to runs whose model, as served or
//! as requested, contains that text, and is preferred over the entry
//! without one.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Result};
use serde::Deserialize;

use crate::report::{Report, RunInfo};

/// One case's attribution, its cause resolved.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Known {
    pub id: String,
    /// The cause's id (a `[[cause]]` of the same file).
    #[serde(default)]
    pub cause: Option<String>,
    /// The cause's title: its `[[cause]]`'s, or the entry's own.
    #[serde(default)]
    pub issue: String,
    /// How the cause shows in this case (else the cause's reason).
    #[serde(default)]
    pub reason: String,
    /// Only for runs whose model (served or requested) contains this.
    #[serde(default)]
    pub model: Option<String>,
    /// Whose failure it is (else its cause's; the server's by default).
    #[serde(default)]
    pub whose: Option<Whose>,
}

/// Whose failure an attributed one is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Whose {
    /// The server's code (the cause names where).
    Server,
    /// The model's: what it says on this server, which is not at fault.
    Model,
}

/// A cause several cases may share.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Cause {
    id: String,
    issue: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    whose: Option<Whose>,
}

impl Known {
    /// The issue, with the reason when there is one; a failure that is
    /// not the server's says so first.
    pub fn label(&self) -> String {
        let whose = match self.whose {
            Some(Whose::Model) => "not the server's, the model's: ",
            Some(Whose::Server) | None => "",
        };
        if self.reason.is_empty() {
            format!("{whose}{}", self.issue)
        } else {
            format!("{whose}{} ({})", self.issue, self.reason)
        }
    }

    /// What counts causes: the cause's id, else the entry's issue text.
    pub fn cause_id(&self) -> &str {
        self.cause.as_deref().unwrap_or(&self.issue)
    }
}

#[derive(Debug, Clone, Default)]
pub struct KnownFailures {
    /// Each case's entries, those scoped to a model first.
    by_id: BTreeMap<String, Vec<Known>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    cause: Vec<Cause>,
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
        let mut causes: BTreeMap<&str, &Cause> = BTreeMap::new();
        for c in &file.cause {
            if causes.insert(&c.id, c).is_some() {
                bail!("{}: cause {:?} is defined twice", path.display(), c.id);
            }
        }
        let mut by_id: BTreeMap<String, Vec<Known>> = BTreeMap::new();
        for mut k in file.known {
            match (&k.cause, k.issue.is_empty()) {
                (Some(id), true) => {
                    let Some(c) = causes.get(id.as_str()) else {
                        bail!(
                            "{}: {} names cause {id:?}, which no [[cause]] defines",
                            path.display(),
                            k.id
                        );
                    };
                    k.issue = c.issue.clone();
                    if k.reason.is_empty() {
                        k.reason = c.reason.clone();
                    }
                    k.whose = k.whose.or(c.whose);
                }
                (Some(_), false) => bail!(
                    "{}: {} gives both a cause and an issue (the cause has the issue)",
                    path.display(),
                    k.id
                ),
                (None, true) => {
                    bail!(
                        "{}: {} names neither a cause nor an issue",
                        path.display(),
                        k.id
                    )
                }
                (None, false) => {}
            }
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
            c.known_cause = known.map(|k| k.cause_id().to_string());
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

    fn read(text: &str) -> Result<KnownFailures> {
        let path = std::env::temp_dir().join(format!(
            "afm-known-causes-{}-{}.toml",
            std::process::id(),
            text.len()
        ));
        std::fs::write(&path, text).unwrap();
        let known = KnownFailures::read(&path);
        std::fs::remove_file(&path).unwrap();
        known
    }

    #[test]
    fn cases_sharing_a_cause_id_name_one_cause_each_with_its_own_note() {
        let known = read(
            r#"
[[cause]]
id = "usage-object"
issue = "the usage chunk is a chat.completion"
reason = "object is chat.completion"

[[known]]
id = "preflight.stream"
cause = "usage-object"

[[known]]
id = "concurrency.sixteen_streams"
cause = "usage-object"
reason = "in each of the 16 streams"

[[known]]
id = "tools.none"
issue = "tool_choice none ignored (seed 003)"
"#,
        )
        .unwrap();
        let a = known.get("preflight.stream", &[]).unwrap();
        let b = known.get("concurrency.sixteen_streams", &[]).unwrap();
        assert_eq!(
            (a.cause_id(), b.cause_id()),
            ("usage-object", "usage-object")
        );
        assert_eq!(
            a.label(),
            "the usage chunk is a chat.completion (object is chat.completion)"
        );
        assert_eq!(
            b.label(),
            "the usage chunk is a chat.completion (in each of the 16 streams)"
        );
        // Without a cause, its own issue text is its cause.
        let c = known.get("tools.none", &[]).unwrap();
        assert_eq!(c.cause_id(), "tool_choice none ignored (seed 003)");
    }

    #[test]
    fn a_failure_that_is_the_models_says_so_in_its_footnote() {
        let known = read(
            r#"
[[cause]]
id = "ends-after-reasoning"
issue = "the model ends its turn after its reasoning"
whose = "model"

[[known]]
id = "tools.parallel_calls_history"
cause = "ends-after-reasoning"

[[known]]
id = "tools.none"
issue = "tool_choice none ignored"
"#,
        )
        .unwrap();
        let model = known.get("tools.parallel_calls_history", &[]).unwrap();
        assert_eq!(
            model.label(),
            "not the server's, the model's: the model ends its turn after its reasoning"
        );
        assert_eq!(
            known.get("tools.none", &[]).unwrap().label(),
            "tool_choice none ignored"
        );
    }

    #[test]
    fn a_cause_that_is_not_defined_is_an_error_that_names_it() {
        let err = read("[[known]]\nid = \"a.b\"\ncause = \"nowhere\"\n")
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("a.b names cause \"nowhere\""), "{err}");
        let err = read("[[known]]\nid = \"a.b\"\n").err().unwrap().to_string();
        assert!(err.contains("neither a cause nor an issue"), "{err}");
    }

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
