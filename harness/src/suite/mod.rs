//! Suites as data: one TOML file per section under `suites/`, read into
//! [`Section`]s of [`Case`]s. Adding a case is editing TOML; the format is
//! documented in `suites/README.md`.

pub mod capabilities;
pub mod checks;
pub mod filler;
pub mod profile;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::protocol::dialect::Dialect;
use crate::protocol::endpoint::Endpoint;
use crate::server::Auth;
use crate::suite::checks::CheckSpec;

/// How much of the suites a run covers; each tier includes the ones below.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Smoke,
    Standard,
    Full,
}

impl Tier {
    /// Seconds one request of the tier may take (headers to last byte)
    /// unless `--request-timeout` says otherwise: a reply that trickles
    /// or never ends costs a run this, not the 600 s a benchmark's long
    /// requests need. The longest step measured over the published
    /// matrix's nine servers was 17.8 s (mlx-lm's concurrent strict
    /// schemas, standard tier), and the smoke tier's cases are its
    /// shortest.
    pub fn request_timeout_s(self) -> u64 {
        match self {
            Tier::Smoke => 20,
            Tier::Standard => 120,
            Tier::Full => 300,
        }
    }

    /// The tier a run covers when none is named.
    pub const DEFAULT: Tier = Tier::Standard;

    /// Whether a run of this tier covers a case of tier `case`: each tier
    /// includes the ones below.
    pub fn covers(self, case: Tier) -> bool {
        case <= self
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Tier::Smoke => "smoke",
            Tier::Standard => "standard",
            Tier::Full => "full",
        }
    }
}

impl std::str::FromStr for Tier {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "smoke" => Ok(Tier::Smoke),
            "standard" => Ok(Tier::Standard),
            "full" => Ok(Tier::Full),
            other => Err(format!("unknown tier '{other}' (smoke, standard or full)")),
        }
    }
}

/// Whether a case's request is sent streamed, whole, or both ways (the
/// checks must hold for each).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    #[default]
    NonStream,
    Stream,
    Both,
}

/// How a case's request is sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Scenario {
    /// Once.
    Single,
    /// `n` copies released together by a barrier; checks apply to each.
    Parallel { n: usize },
    /// `n` requests that differ (`{{slot}}`) released together, then each
    /// again alone, one after the other; checks apply to the parallel
    /// ones (steps `0..n`; the alone ones are steps `n..2n`).
    ParallelAlone { n: usize },
    /// The request, then each of `then` in order (multi-turn): each later
    /// request may use `{{reply:K}}` for step K's content. Checks apply to
    /// the last step unless they name one.
    Sequence { then: Vec<Value> },
    /// The same request twice, one after the other (cold, then warm);
    /// checks apply to the warm one.
    Replay,
    /// The request streamed and whole; checks apply to both.
    StreamPair,
    /// The request alone, then in slots `positions` of `n` parallel
    /// requests whose other slots carry `filler` (a different request;
    /// not needed when the probes fill every slot); checks apply to the
    /// alone one and the probes.
    BatchPositions {
        n: usize,
        positions: Vec<usize>,
        #[serde(default)]
        filler: Option<Value>,
    },
    /// OpenAI's Batch API: `lines` (each `{custom_id, body}`, bodies for
    /// `endpoint`) uploaded as a file, a batch run on it, its files read
    /// and the input deleted (`run::conformance::batch`); checks apply to
    /// the batch as it ended.
    Batch {
        lines: Vec<Value>,
        #[serde(default = "chat_path")]
        endpoint: String,
    },
    /// `n` streamed copies (`{{slot}}`) released together, each client
    /// leaving after the first event; then the server's gauge of running
    /// requests watched until it is 0 (15 s at most; a step of path
    /// `/metrics`, kept only when the server has a known gauge); then `n`
    /// copies again, whole, with `max_tokens` 8, read to the end. Checks
    /// apply to the gauge step and the later requests.
    Disconnect { n: usize },
    /// The server's graceful stop (`owned_process`: only a server this
    /// run started): the request streamed, SIGTERM to the server once its
    /// first event came, a new request 300 ms later, then the process
    /// watched for 30 s. Steps: the stream (0), the later request (1), the
    /// exit (2, path `exit`, status 200 when it exited). Runs after every
    /// other case.
    Shutdown,
    /// A raw body (not JSON-encoded by the harness) to a path, for
    /// validation cases: `body` is sent as is.
    Raw {
        #[serde(default = "chat_path")]
        path: String,
        body: String,
    },
}

fn chat_path() -> String {
    Endpoint::Chat.path().into()
}

/// One case: a request, how it is sent, and what must hold.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// Stable across versions: reports are compared by it.
    pub id: String,
    pub name: String,
    pub tier: Tier,
    /// Capabilities the target must have; otherwise the case is skipped.
    #[serde(default)]
    pub requires: Vec<String>,
    /// Shared bug reports this case reproduces (e.g. "002").
    #[serde(default)]
    pub seeds: Vec<String>,
    #[serde(default)]
    pub mode: Mode,
    #[serde(default = "single")]
    pub scenario: Scenario,
    /// The request body in the section's protocol (placeholders allowed).
    /// Ignored by `raw`.
    #[serde(default)]
    pub request: Value,
    /// The request as JSON text instead (long captured requests, which
    /// TOML's inline tables cannot hold readably); read into `request`.
    #[serde(default, skip_serializing)]
    pub request_json: Option<String>,
    /// A `sequence` scenario's further requests as a JSON array, likewise.
    #[serde(default, skip_serializing)]
    pub then_json: Option<String>,
    /// Endpoint for the request; by default the section dialect's.
    #[serde(default)]
    pub path: Option<String>,
    /// `GET` without a request, `POST` with one, unless given (`OPTIONS`
    /// for CORS preflights).
    #[serde(default)]
    pub method: Option<String>,
    /// Extra request headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// How the request carries the target's key (security cases).
    #[serde(default)]
    pub auth: Auth,
    #[serde(default, rename = "check")]
    pub checks: Vec<CheckSpec>,
    /// The request is one the published spec forbids (an unknown role, a
    /// negative temperature): a server that answers it 2xx is graded
    /// `lenient`, apart from failures (`docs/grading.md`).
    #[serde(default)]
    pub lenient: bool,
}

fn single() -> Scenario {
    Scenario::Single
}

/// A section: one suite file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    pub section: String,
    pub title: String,
    #[serde(default)]
    pub description: String,
    /// The protocol of the section's requests (`open_ai`, `anthropic`,
    /// `responses`): their default path, preparation and reading.
    #[serde(default)]
    pub dialect: Dialect,
    #[serde(rename = "case")]
    pub cases: Vec<Case>,
}

/// Every section under `dir`, sorted by file name; ids must be unique.
/// `afm-test list`: each section's cases of `tier` with their tier,
/// name, required capabilities and seed reports, and the count.
pub fn listing(sections: &[Section], tier: Tier) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let mut n = 0;
    for s in sections {
        let cases: Vec<_> = s.cases.iter().filter(|c| tier.covers(c.tier)).collect();
        if !cases.is_empty() {
            let _ = writeln!(out, "{} — {}", s.section, s.title);
        }
        for c in cases {
            n += 1;
            let mut extra = Vec::new();
            if !c.requires.is_empty() {
                extra.push(format!("requires {}", c.requires.join(",")));
            }
            if !c.seeds.is_empty() {
                extra.push(format!("seeds {}", c.seeds.join(",")));
            }
            let extra = match extra.is_empty() {
                true => String::new(),
                false => format!("  [{}]", extra.join("; ")),
            };
            let tier = format!("{:?}", c.tier).to_lowercase();
            let _ = writeln!(out, "  {:<40} {tier:<9} {}{extra}", c.id, c.name);
        }
    }
    let _ = writeln!(out, "{n} cases");
    out
}

/// The suites: `dir`, else `./suites` when there is one (a checkout),
/// else the ones built into this binary.
pub fn load(dir: Option<&Path>) -> Result<Vec<Section>> {
    match dir {
        Some(dir) => load_dir(dir),
        None if Path::new("suites").is_dir() => load_dir(Path::new("suites")),
        None => load_embedded(),
    }
}

pub fn load_dir(dir: &Path) -> Result<Vec<Section>> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading suites from {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    if files.is_empty() {
        bail!("no suite files (*.toml) in {}", dir.display());
    }
    let texts = files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f)
                .with_context(|| format!("reading suite {}", f.display()))?;
            Ok((f.display().to_string(), text))
        })
        .collect::<Result<Vec<_>>>()?;
    parse_all(&texts)
}

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded_suites.rs"));
}

/// The suites built into this binary (the crate's `suites/` when it was
/// built), for an installed afm-test with no checkout beside it.
pub fn load_embedded() -> Result<Vec<Section>> {
    let texts: Vec<(String, String)> = embedded::EMBEDDED
        .iter()
        .map(|(name, text)| (format!("{name} (built in)"), text.to_string()))
        .collect();
    parse_all(&texts)
}

/// Sections from (name, TOML text) pairs, in order; case ids unique.
fn parse_all(files: &[(String, String)]) -> Result<Vec<Section>> {
    let mut sections = Vec::new();
    let mut ids = BTreeSet::new();
    for (f, text) in files {
        let section: Section = toml::from_str(text).with_context(|| format!("suite {f}"))?;
        let mut section = section;
        for c in &mut section.cases {
            c.path
                .get_or_insert_with(|| section.dialect.default_path().to_string());
            if let Some(text) = c.request_json.take() {
                if !c.request.is_null() {
                    bail!(
                        "suite {f}: case '{}' has both request and request_json",
                        c.id
                    );
                }
                c.request = serde_json::from_str(&text)
                    .with_context(|| format!("suite {f}: case '{}': request_json", c.id))?;
            }
            if let Some(text) = c.then_json.take() {
                let Scenario::Sequence { then } = &mut c.scenario else {
                    bail!(
                        "suite {f}: case '{}': then_json needs a sequence scenario",
                        c.id
                    );
                };
                then.extend(
                    serde_json::from_str::<Vec<Value>>(&text)
                        .with_context(|| format!("suite {f}: case '{}': then_json", c.id))?,
                );
            }
        }
        for c in &section.cases {
            if !ids.insert(c.id.clone()) {
                bail!("suite {f}: case id '{}' is used twice", c.id);
            }
            if let Some(r) = c
                .requires
                .iter()
                .find(|r| !crate::suite::capabilities::is_known(r))
            {
                bail!(
                    "suite {f}: case '{}' requires unknown capability '{r}' ({})",
                    c.id,
                    crate::suite::capabilities::ALL.join(", ")
                );
            }
            for check in &c.checks {
                check
                    .validate()
                    .with_context(|| format!("suite {f}: case '{}'", c.id))?;
            }
        }
        sections.push(section);
    }
    Ok(sections)
}

/// What a run selects: a tier, optionally some sections and case ids.
#[derive(Debug, Clone)]
pub struct Selection {
    pub tier: Tier,
    pub sections: Vec<String>,
    pub cases: Vec<String>,
}

impl Selection {
    pub fn includes(&self, section: &Section, case: &Case) -> bool {
        self.tier.covers(case.tier)
            && (self.sections.is_empty() || self.sections.contains(&section.section))
            && (self.cases.is_empty() || self.cases.contains(&case.id))
    }

    /// How many cases of `sections` it selects.
    pub fn count(&self, sections: &[Section]) -> usize {
        sections
            .iter()
            .flat_map(|s| s.cases.iter().map(move |c| (s, c)))
            .filter(|(s, c)| self.includes(s, c))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(sections: &[Section]) -> Vec<String> {
        sections
            .iter()
            .flat_map(|s| s.cases.iter().map(|c| c.id.clone()))
            .collect()
    }

    #[test]
    fn the_built_in_suites_are_the_crates_suites() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites");
        let on_disk = ids(&load_dir(&dir).unwrap());
        assert!(on_disk.len() > 100, "{}", on_disk.len());
        assert_eq!(ids(&load_embedded().unwrap()), on_disk);
    }
}
