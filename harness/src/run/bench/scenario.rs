//! A bench scenario: the variants it measures side by side, each one
//! configuration of the engine (in-process) or of the requests.

use anyhow::{bail, Result};
use clap::ValueEnum;
use serde_json::{json, Value};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum BenchScenario {
    /// One configuration over the concurrency levels.
    Sweep,
    /// Shared-prefix prompts with the engine's prefix cache on and off
    /// (in-process).
    PrefixCache,
    /// Plain requests and the same with a strict JSON schema.
    Grammar,
    /// The engine in its default and in batch-invariant mode (in-process).
    Deterministic,
}

impl BenchScenario {
    /// Its name as the flag takes it.
    pub fn name(self) -> String {
        self.to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_string())
    }
}

/// One configuration of a scenario.
#[derive(Debug)]
pub struct VariantSpec {
    pub name: String,
    /// In-process: the afm-serve flags to start the engine with (every
    /// other setting is a flagless afm-serve's); unused against a server.
    pub engine_flags: Vec<String>,
    /// Fields merged into every request.
    pub extra: Value,
}

/// The variants of `scenario`. `in_process`: whether engine settings can
/// be switched; `concurrent`: the engine's batch size; `deterministic`:
/// batch-invariant mode for every variant that does not switch it.
pub fn variants(
    scenario: BenchScenario,
    in_process: bool,
    concurrent: usize,
    deterministic: bool,
) -> Result<Vec<VariantSpec>> {
    let engine_with = |extra: &[&str], deterministic: bool| {
        let mut flags = vec!["--concurrent".to_string(), concurrent.to_string()];
        if deterministic {
            flags.push("--deterministic".into());
        }
        flags.extend(extra.iter().map(|f| f.to_string()));
        flags
    };
    let engine = |extra: &[&str]| engine_with(extra, deterministic);
    let needs_engine = |what: &str| -> Result<()> {
        if in_process {
            Ok(())
        } else {
            bail!(
                "--scenario {what} switches an engine setting, so it runs in-process only; \
                 against a server, run the sweep once per server configuration and use \
                 `afm-bench compare`"
            )
        }
    };
    let plain = |name: &str, engine_flags: Vec<String>| VariantSpec {
        name: name.into(),
        engine_flags,
        extra: json!({}),
    };
    Ok(match scenario {
        BenchScenario::Sweep => vec![plain("default", engine(&[]))],
        BenchScenario::PrefixCache => {
            needs_engine("prefix-cache")?;
            vec![
                plain("prefix cache on", engine(&[])),
                plain("prefix cache off", engine(&["--no-prefix-caching"])),
            ]
        }
        BenchScenario::Grammar => vec![
            plain("grammar off", engine(&[])),
            VariantSpec {
                name: "grammar on (json_schema)".into(),
                engine_flags: engine(&[]),
                extra: json!({ "response_format": story_schema() }),
            },
        ],
        BenchScenario::Deterministic => {
            needs_engine("deterministic")?;
            vec![
                plain("deterministic off", engine_with(&[], false)),
                plain("deterministic on", engine_with(&[], true)),
            ]
        }
    })
}

/// The grammar scenario's strict schema: a small object with an array,
/// long enough that constrained decoding costs show.
fn story_schema() -> Value {
    json!({
        "type": "json_schema",
        "json_schema": {
            "name": "story",
            "strict": true,
            "schema": {
                "type": "object",
                "properties": {
                    "title": {"type": "string"},
                    "characters": {"type": "array", "items": {"type": "string"}},
                    "summary": {"type": "string"}
                },
                "required": ["title", "characters", "summary"],
                "additionalProperties": false
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_scenarios_are_refused_against_a_server() {
        for s in [BenchScenario::PrefixCache, BenchScenario::Deterministic] {
            let err = variants(s, false, 8, false).unwrap_err().to_string();
            assert!(err.contains("in-process only"), "{err}");
        }
        assert_eq!(
            variants(BenchScenario::Grammar, false, 8, false)
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn the_prefix_cache_scenario_switches_only_the_cache() {
        let v = variants(BenchScenario::PrefixCache, true, 16, true).unwrap();
        assert_eq!(v[0].engine_flags, ["--concurrent", "16", "--deterministic"]);
        assert_eq!(
            v[1].engine_flags,
            [
                "--concurrent",
                "16",
                "--deterministic",
                "--no-prefix-caching"
            ]
        );
    }
}
