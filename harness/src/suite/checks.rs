//! The check vocabulary of the suites. Each check is a `[[case.check]]`
//! table with a `kind` and its parameters (listed in `suites/README.md`);
//! it looks at the scenario's replies and fails with what it expected and
//! what it saw.

use std::collections::{BTreeSet, HashMap};

use anyhow::{bail, Result};
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::outcome::{clip, ensure, Outcome};
use crate::protocol::dialect::Dialect;
use crate::protocol::exchange::Exchange;
use crate::protocol::reply::Reply;

/// A part of a reply that equality checks compare.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    #[default]
    Content,
    Reasoning,
    ToolCalls,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Check {
    /// The HTTP status.
    Status {
        equals: u16,
    },
    /// The HTTP status is one of these.
    StatusIn {
        any: Vec<u16>,
    },
    /// A response header is present (any value).
    HeaderPresent {
        name: String,
    },
    /// The body's value at a JSON pointer is a positive integer.
    JsonPointerPositive {
        pointer: String,
    },
    /// No stream event's text ends in half a character (U+FFFD) with more
    /// text after it: a multi-byte character split between events. (A
    /// U+FFFD inside an event is the model's own invalid bytes, and one at
    /// the very end a character cut by `max_tokens`: neither is the
    /// server splitting.)
    NoSplitCharacters,
    /// The protocol's error body: `error.message` and `error.type` strings
    /// (Anthropic's also `"type": "error"`), and `error.param` when given.
    ErrorBody {
        #[serde(default)]
        param: Option<String>,
    },
    /// No error object and no transport failure.
    NoError,
    FinishReason {
        one_of: Vec<String>,
    },
    ContentNonEmpty,
    /// A regex over the content (`(?i)` for case-insensitive).
    ContentMatches {
        pattern: String,
    },
    ContentNotContains {
        any: Vec<String>,
    },
    ReasoningNonEmpty,
    ReasoningEmpty,
    ReasoningNotContains {
        any: Vec<String>,
    },
    /// The content is one JSON value (surrounding whitespace allowed).
    JsonValid,
    /// The content validates against `schema`, by default the request's
    /// `response_format.json_schema.schema`.
    JsonSchema {
        #[serde(default)]
        schema: Option<Value>,
    },
    /// Tool calls: exactly `count` (default: at least one), the first named
    /// `name` when given.
    ToolCall {
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        count: Option<usize>,
    },
    NoToolCalls,
    /// Every call's arguments are one JSON object valid against the called
    /// tool's `parameters` in the request (types included: "10" is not an
    /// integer).
    ToolArgs,
    /// Ids present and distinct; each call's id and name sent once.
    ToolCallIds,
    /// Usage present and consistent (total = prompt + completion), with
    /// optional bounds.
    Usage {
        #[serde(default)]
        completion_max: Option<u64>,
        #[serde(default)]
        reasoning_min: Option<u64>,
        #[serde(default)]
        reasoning_max: Option<u64>,
    },
    /// `usage.prompt_tokens_details.cached_tokens` within bounds.
    CachedTokens {
        #[serde(default)]
        min: Option<u64>,
        #[serde(default)]
        max: Option<u64>,
        /// At least this share of the prompt.
        #[serde(default)]
        min_fraction: Option<f64>,
        /// At most this share of the prompt.
        #[serde(default)]
        max_fraction: Option<f64>,
        /// Subjects allowed to miss the bounds (requests released together:
        /// the first computes the shared prefix the others reuse).
        #[serde(default)]
        allow_misses: usize,
    },
    /// Subject k's content holds `marker` with `{{slot}}` = k, and no other
    /// subject's marker (parallel requests keep their own replies).
    OwnMarker {
        marker: String,
    },
    /// Logprobs for the content: present, every value <= 0 and finite,
    /// `top` alternatives each, token bytes given.
    Logprobs {
        top: usize,
    },
    /// The stream follows its protocol's event rules (OpenAI chunks and
    /// `[DONE]`, Anthropic's event order, Responses' numbered events).
    Sse,
    Header {
        name: String,
        equals: String,
    },
    /// All subjects of the scenario agree on `field`.
    AllEqual {
        #[serde(default)]
        field: Field,
    },
    /// Each subject equals step `of` of the scenario on `field`.
    SameAs {
        of: usize,
        #[serde(default)]
        field: Field,
    },
    /// Each subject's prompt is longer than step `of`'s prompt and reply
    /// together (usage): the whole conversation reached the model, whatever
    /// the model then makes of it. `with_reply = false`: longer than step
    /// `of`'s prompt alone (a tool call is sent back rewritten, as a call,
    /// not as the text the model generated).
    PromptHoldsHistory {
        of: usize,
        #[serde(default = "yes")]
        with_reply: bool,
    },
    /// Each subject's content is step `of`'s cut just before the first
    /// occurrence of that step's longest word (sent as the stop sequence
    /// with `{{reply_word:K}}`): the stop ended the reply there and was not
    /// included.
    StopsBeforeReplyWord {
        of: usize,
    },
    /// No word 4-gram occurs more than `max` times (repetition loops).
    NoRepetition {
        max: usize,
    },
    /// `GET /v1/models` lists at least one model with an id.
    ModelsList,
    /// The request is refused (a 4xx with the protocol's error body) or
    /// answered with a call (`tool_calls`, or legacy `function_call`):
    /// never a 200 that ignored the parameter that asked for one.
    RefusedOrCall,
    /// The whole reply, or every stream event, validates against the
    /// vendor's published schema of the operation (`spec_schemas`); an
    /// error reply against its error schema.
    Schema,
}

fn yes() -> bool {
    true
}

/// A failed check: what it wanted and what it saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    pub check: String,
    pub expected: String,
    pub actual: String,
}

/// A check as written in a case: the check and, optionally, the scenario
/// step it looks at instead of the scenario's default subjects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckSpec {
    #[serde(flatten)]
    pub check: Check,
    #[serde(default)]
    pub step: Option<usize>,
}

impl CheckSpec {
    pub fn validate(&self) -> Result<()> {
        match &self.check {
            Check::ContentMatches { pattern } => {
                if let Err(e) = Regex::new(pattern) {
                    bail!("content_matches: bad pattern: {e}");
                }
            }
            Check::JsonSchema { schema: Some(s) } => {
                if let Err(e) = jsonschema::validator_for(s) {
                    bail!("json_schema: bad schema: {e}");
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Runs the check over `steps`, on `subjects` (indices into `steps`)
    /// unless it names a step.
    pub fn evaluate(&self, steps: &[Exchange], subjects: &[usize]) -> Vec<Failure> {
        let on: Vec<usize> = match self.step {
            Some(s) => vec![s],
            None => subjects.to_vec(),
        };
        let kind = kind_name(&self.check);
        let fail = |expected: String, actual: String| Failure {
            check: kind.clone(),
            expected,
            actual,
        };
        if on.iter().any(|&i| i >= steps.len()) {
            return vec![fail(
                format!("step {:?}", self.step),
                format!("{} steps", steps.len()),
            )];
        }
        match &self.check {
            Check::AllEqual { field } => {
                let values: Vec<String> = on
                    .iter()
                    .map(|&i| field_of(&Reply::of(&steps[i]), *field))
                    .collect();
                let distinct: BTreeSet<&String> = values.iter().collect();
                if distinct.len() > 1 {
                    let listing = values
                        .iter()
                        .enumerate()
                        .map(|(k, v)| format!("[{}] {}", on[k], clip(v)))
                        .collect::<Vec<_>>()
                        .join("\n");
                    return vec![fail(
                        format!("{} identical {field:?}", values.len()),
                        format!("{} different:\n{listing}", distinct.len()),
                    )];
                }
                Vec::new()
            }
            Check::CachedTokens { allow_misses, .. } if *allow_misses > 0 => {
                let misses: Vec<String> = on
                    .iter()
                    .filter_map(|&i| {
                        check_one(&self.check, &steps[i])
                            .err()
                            .map(|(e, a)| format!("step {i}: {a} (wanted {e})"))
                    })
                    .collect();
                if misses.len() > *allow_misses {
                    return vec![fail(
                        format!("at most {allow_misses} of {} outside the bounds", on.len()),
                        misses.join("; "),
                    )];
                }
                Vec::new()
            }
            Check::OwnMarker { marker } => {
                let markers: Vec<String> = (0..on.len())
                    .map(|k| marker.replace("{{slot}}", &k.to_string()))
                    .collect();
                on.iter()
                    .enumerate()
                    .filter_map(|(k, &i)| {
                        let content = Reply::of(&steps[i]).content;
                        let others: Vec<&String> = markers
                            .iter()
                            .enumerate()
                            .filter(|(j, m)| {
                                *j != k
                                    && !markers[k].contains(m.as_str())
                                    && content.contains(m.as_str())
                            })
                            .map(|(_, m)| m)
                            .collect();
                        (!content.contains(&markers[k]) || !others.is_empty()).then(|| {
                            fail(
                                format!("slot {k}: {:?} and no other slot's marker", markers[k]),
                                format!("step {i}: {}", clip(&content)),
                            )
                        })
                    })
                    .collect()
            }
            Check::SameAs { of: step, field } => {
                let Some(reference) = steps.get(*step) else {
                    return vec![fail(format!("step {step}"), "no such step".into())];
                };
                let want = field_of(&Reply::of(reference), *field);
                on.iter()
                    .filter(|&&i| i != *step)
                    .filter_map(|&i| {
                        let got = field_of(&Reply::of(&steps[i]), *field);
                        (got != want).then(|| {
                            fail(
                                format!("{field:?} of step {step}: {}", clip(&want)),
                                format!("step {i}: {}", clip(&got)),
                            )
                        })
                    })
                    .collect()
            }
            Check::StopsBeforeReplyWord { of: step } => {
                let Some(full) = steps.get(*step).map(Reply::of) else {
                    return vec![fail(format!("step {step}"), "no such step".into())];
                };
                let word = full.longest_word();
                let Some(at) = full.content.find(word).filter(|_| !word.is_empty()) else {
                    return vec![fail(
                        format!("a word in step {step}'s content"),
                        clip(&full.content),
                    )];
                };
                let before = full.content[..at].trim_end();
                on.iter()
                    .filter(|&&i| i != *step)
                    .filter_map(|&i| {
                        let got = Reply::of(&steps[i]).content;
                        let cut = got.trim_end();
                        (cut != before).then(|| {
                            fail(
                                format!("step {step}'s content up to {word:?}: {}", clip(before)),
                                format!("step {i}: {}", clip(&got)),
                            )
                        })
                    })
                    .collect()
            }
            Check::PromptHoldsHistory {
                of: step,
                with_reply,
            } => {
                let Some(earlier) = steps.get(*step).map(Reply::of) else {
                    return vec![fail(format!("step {step}"), "no such step".into())];
                };
                let (Some(p0), Some(c0)) = (
                    earlier.usage_field("prompt_tokens"),
                    earlier.usage_field("completion_tokens"),
                ) else {
                    return vec![fail(
                        format!("usage of step {step}"),
                        "no prompt_tokens/completion_tokens".into(),
                    )];
                };
                let c0 = if *with_reply { c0 } else { 0 };
                on.iter()
                    .filter(|&&i| i != *step)
                    .filter_map(|&i| {
                        let p = Reply::of(&steps[i]).usage_field("prompt_tokens");
                        (p.is_none_or(|p| p <= p0 + c0)).then(|| {
                            fail(
                                format!(
                                    "more than {} prompt tokens ({p0} + {c0} of step {step})",
                                    p0 + c0
                                ),
                                format!("step {i}: {p:?}"),
                            )
                        })
                    })
                    .collect()
            }
            check => on
                .iter()
                .filter_map(|&i| {
                    check_one(check, &steps[i]).err().map(|(expected, actual)| {
                        let actual = if on.len() > 1 {
                            format!("step {i}: {actual}")
                        } else {
                            actual
                        };
                        fail(expected, actual)
                    })
                })
                .collect(),
        }
    }
}

fn kind_name(c: &Check) -> String {
    serde_json::to_value(c)
        .ok()
        .and_then(|v| v["kind"].as_str().map(str::to_string))
        .unwrap_or_default()
}

fn field_of(r: &Reply, f: Field) -> String {
    match f {
        Field::Content => r.content.clone(),
        Field::Reasoning => r.reasoning.clone(),
        Field::ToolCalls => r
            .tool_calls
            .iter()
            .map(|c| format!("{}({})", c.name, normalized_json(&c.arguments)))
            .collect::<Vec<_>>()
            .join(";"),
    }
}

/// JSON text with members in a canonical form, so `{"a": 1}` and
/// `{"a":1}` compare equal; non-JSON is kept as is.
fn normalized_json(text: &str) -> String {
    serde_json::from_str::<Value>(text)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| text.to_string())
}

/// One check on one exchange (checks over several exchanges, such as
/// `all_equal`, need [`CheckSpec::evaluate`]); afm-bench checks each reply
/// under load with it.
pub fn check_one(check: &Check, ex: &Exchange) -> Outcome {
    if let Some(e) = &ex.transport_error {
        return Err(("a response".into(), format!("transport error: {e}")));
    }
    let r = Reply::of(ex);
    match check {
        Check::Status { equals } => {
            ensure(ex.status == *equals, format!("status {equals}"), || {
                format!("status {}: {}", ex.status, clip(&ex.body.to_string()))
            })
        }
        Check::StatusIn { any } => ensure(
            any.contains(&ex.status),
            format!("status in {any:?}"),
            || format!("status {}: {}", ex.status, clip(&ex.body.to_string())),
        ),
        Check::HeaderPresent { name } => ensure(
            ex.headers.contains_key(&name.to_ascii_lowercase()),
            format!("header {name}"),
            || format!("{:?}", ex.headers.keys().collect::<Vec<_>>()),
        ),
        Check::JsonPointerPositive { pointer } => {
            let v = ex.body.pointer(pointer);
            ensure(
                v.and_then(Value::as_u64).is_some_and(|n| n > 0),
                format!("a positive integer at {pointer}"),
                || clip(&ex.body.to_string()),
            )
        }
        Check::NoSplitCharacters => {
            let pieces = Dialect::of(ex).text_deltas(ex);
            let split = pieces
                .iter()
                .enumerate()
                .take(pieces.len().saturating_sub(1))
                .find(|(_, p)| p.ends_with('\u{FFFD}'));
            match split {
                Some((k, p)) => Err((
                    "no text delta ending in half a character".into(),
                    format!(
                        "delta {k} of {}: {} then {}",
                        pieces.len(),
                        clip(p),
                        clip(&pieces[k + 1])
                    ),
                )),
                None => Ok(()),
            }
        }
        Check::ErrorBody { param } => {
            let e = &ex.body["error"];
            let shaped =
                e["message"].as_str().is_some_and(|m| !m.is_empty()) && e["type"].is_string();
            let protocol = match Dialect::of(ex) {
                Dialect::Anthropic => "an Anthropic error body",
                _ => "an OpenAI error body",
            };
            let anthropic_ok = Dialect::of(ex) != Dialect::Anthropic || ex.body["type"] == "error";
            ensure(shaped && anthropic_ok, protocol, || {
                clip(&ex.body.to_string())
            })?;
            match param {
                Some(p) => ensure(
                    e["param"].as_str() == Some(p),
                    format!("error.param {p:?}"),
                    || format!("error.param {}", e["param"]),
                ),
                None => Ok(()),
            }
        }
        Check::NoError => ensure(r.error.is_none() && ex.status < 400, "no error", || {
            format!(
                "status {}: {}",
                ex.status,
                r.error.as_ref().unwrap_or(&ex.body)
            )
        }),
        Check::FinishReason { one_of } => ensure(
            r.finish_reason.as_ref().is_some_and(|f| one_of.contains(f)),
            format!("finish_reason in {one_of:?}"),
            || format!("{:?}", r.finish_reason),
        ),
        Check::ContentNonEmpty => ensure(!r.content.trim().is_empty(), "non-empty content", || {
            format!(
                "empty content (finish_reason {:?}, {} tool calls)",
                r.finish_reason,
                r.tool_calls.len()
            )
        }),
        Check::ContentMatches { pattern } => {
            let re = Regex::new(pattern).map_err(|e| (pattern.clone(), e.to_string()))?;
            ensure(
                re.is_match(&r.content),
                format!("content matching /{pattern}/"),
                || clip(&r.content),
            )
        }
        Check::ContentNotContains { any } => not_contains("content", &r.content, any),
        Check::ReasoningNonEmpty => ensure(
            !r.reasoning.trim().is_empty(),
            "non-empty reasoning",
            || "no reasoning".into(),
        ),
        Check::ReasoningEmpty => ensure(r.reasoning.is_empty(), "no reasoning", || {
            clip(&r.reasoning)
        }),
        Check::ReasoningNotContains { any } => not_contains("reasoning", &r.reasoning, any),
        Check::JsonValid => serde_json::from_str::<Value>(r.content.trim())
            .map(|_| ())
            .map_err(|e| ("valid JSON".into(), format!("{e}: {}", clip(&r.content)))),
        Check::JsonSchema { schema } => {
            let schema = schema
                .clone()
                .or_else(|| Dialect::of(ex).output_schema(&ex.request))
                .ok_or(("a schema".into(), "none in the case or request".into()))?;
            let value: Value = serde_json::from_str(r.content.trim())
                .map_err(|e| ("valid JSON".into(), format!("{e}: {}", clip(&r.content))))?;
            schema_errors(&schema, &value)
        }
        Check::ToolCall { name, count } => {
            let n = r.tool_calls.len();
            match count {
                Some(c) => ensure(n == *c, format!("{c} tool calls"), || {
                    format!("{n}; content {}", clip(&r.content))
                })?,
                None => ensure(n > 0, "a tool call", || {
                    format!("none; content {}", clip(&r.content))
                })?,
            }
            match (name, r.tool_calls.first()) {
                (Some(want), Some(c)) => ensure(&c.name == want, format!("tool {want}"), || {
                    format!("tool {}", c.name)
                }),
                _ => Ok(()),
            }
        }
        Check::NoToolCalls => ensure(r.tool_calls.is_empty(), "no tool calls", || {
            format!("{:?}", r.tool_calls)
        }),
        Check::ToolArgs => {
            let tools = Dialect::of(ex).tool_schemas(&ex.request);
            for c in &r.tool_calls {
                let args: Value = serde_json::from_str(&c.arguments).map_err(|e| {
                    (
                        "arguments: one JSON object".to_string(),
                        format!("{}: {e}: {}", c.name, clip(&c.arguments)),
                    )
                })?;
                ensure(args.is_object(), "arguments: a JSON object", || {
                    format!("{}: {}", c.name, clip(&c.arguments))
                })?;
                let schema = tools.get(&c.name).ok_or((
                    "a call of an offered tool".to_string(),
                    format!("unknown tool {:?}", c.name),
                ))?;
                schema_errors(schema, &args).map_err(|(e, a)| (e, format!("{}: {a}", c.name)))?;
            }
            Ok(())
        }
        Check::ToolCallIds => {
            let ids: Vec<&str> = r
                .tool_calls
                .iter()
                .filter_map(|c| c.id.as_deref())
                .collect();
            ensure(
                ids.len() == r.tool_calls.len(),
                "an id on every call",
                || format!("{} ids for {} calls", ids.len(), r.tool_calls.len()),
            )?;
            let distinct: BTreeSet<&&str> = ids.iter().collect();
            ensure(distinct.len() == ids.len(), "distinct ids", || {
                format!("{ids:?}")
            })?;
            let repeated: usize = r.tool_calls.iter().map(|c| c.repeated_headers).sum();
            ensure(repeated == 0, "each call's id and name sent once", || {
                format!("{repeated} repeated headers")
            })
        }
        Check::Usage {
            completion_max,
            reasoning_min,
            reasoning_max,
        } => {
            let prompt = r.usage_field("prompt_tokens");
            let completion = r.usage_field("completion_tokens");
            let total = r.usage_field("total_tokens");
            let (Some(p), Some(c), Some(t)) = (prompt, completion, total) else {
                return Err((
                    "usage with prompt, completion and total tokens".into(),
                    format!("{:?}", r.usage),
                ));
            };
            ensure(
                p > 0 && t == p + c,
                "total = prompt + completion, prompt > 0",
                || format!("prompt {p}, completion {c}, total {t}"),
            )?;
            if let Some(max) = completion_max {
                ensure(c <= *max, format!("completion_tokens <= {max}"), || {
                    c.to_string()
                })?;
            }
            let reasoning = r
                .usage_field("completion_tokens_details.reasoning_tokens")
                .unwrap_or(0);
            if let Some(min) = reasoning_min {
                ensure(
                    reasoning >= *min,
                    format!("reasoning_tokens >= {min}"),
                    || reasoning.to_string(),
                )?;
            }
            if let Some(max) = reasoning_max {
                ensure(
                    reasoning <= *max,
                    format!("reasoning_tokens <= {max}"),
                    || reasoning.to_string(),
                )?;
            }
            Ok(())
        }
        Check::CachedTokens {
            min,
            max,
            min_fraction,
            max_fraction,
            ..
        } => {
            let cached = r
                .usage_field("prompt_tokens_details.cached_tokens")
                .ok_or((
                    "usage.prompt_tokens_details.cached_tokens".into(),
                    format!("{:?}", r.usage),
                ))?;
            let prompt = r.usage_field("prompt_tokens").unwrap_or(0);
            let expected = format!(
                "cached_tokens in [{}, {}]{}",
                min.map_or("0".into(), |m| m.to_string()),
                max.map_or("prompt".into(), |m| m.to_string()),
                min_fraction.map_or(String::new(), |f| format!(", >= {f} of the prompt"))
                    + &max_fraction.map_or(String::new(), |f| format!(", <= {f} of the prompt"))
            );
            let low = min
                .unwrap_or(0)
                .max(min_fraction.map_or(0, |f| (f * prompt as f64).ceil() as u64));
            let high = max
                .unwrap_or(prompt)
                .min(max_fraction.map_or(prompt, |f| (f * prompt as f64).floor() as u64));
            ensure(
                cached >= low && cached <= high && cached <= prompt,
                expected,
                || format!("{cached} of {prompt}"),
            )
        }
        Check::Logprobs { top } => {
            ensure(!r.logprobs.is_empty(), "logprobs for the content", || {
                if r.logprobs_present {
                    "an empty logprobs list".into()
                } else {
                    "no logprobs".into()
                }
            })?;
            for (k, t) in r.logprobs.iter().enumerate() {
                let lp = t["logprob"].as_f64();
                ensure(
                    lp.is_some_and(|v| v <= 0.0 && v.is_finite()),
                    "logprob <= 0",
                    || format!("token {k}: {}", t["logprob"]),
                )?;
                ensure(t["bytes"].is_array(), "token bytes", || {
                    format!("token {k}: {t}")
                })?;
                let alts = t["top_logprobs"].as_array().map_or(0, Vec::len);
                ensure(alts == *top, format!("{top} top_logprobs"), || {
                    format!("token {k}: {alts}")
                })?;
            }
            Ok(())
        }
        Check::Sse => Dialect::of(ex).stream_protocol(ex),
        Check::Header { name, equals } => {
            let got = ex.headers.get(&name.to_ascii_lowercase());
            ensure(got == Some(equals), format!("{name}: {equals}"), || {
                format!("{got:?}")
            })
        }
        Check::NoRepetition { max } => {
            let words: Vec<&str> = r.content.split_whitespace().collect();
            let mut counts: HashMap<&[&str], usize> = HashMap::new();
            for w in words.windows(4) {
                *counts.entry(w).or_default() += 1;
            }
            let worst = counts.iter().max_by_key(|(_, n)| **n);
            match worst {
                Some((gram, n)) if *n > *max => Err((
                    format!("no 4-word sequence more than {max} times"),
                    format!("{:?} {n} times", gram.join(" ")),
                )),
                _ => Ok(()),
            }
        }
        Check::ModelsList => {
            let ok = ex.body["data"]
                .as_array()
                .is_some_and(|d| !d.is_empty() && d.iter().all(|m| m["id"].is_string()));
            ensure(ok, "a list of models with ids", || {
                clip(&ex.body.to_string())
            })
        }
        Check::Schema => {
            let found = crate::protocol::spec_schemas::deviations(ex);
            ensure(
                found.is_empty(),
                "a reply that validates against the published schema",
                || found.join("\n"),
            )
        }
        Check::RefusedOrCall => {
            let legacy_call = ex.body.pointer("/choices/0/message/function_call");
            let called = !r.tool_calls.is_empty() || legacy_call.is_some_and(|c| !c.is_null());
            if (400..500).contains(&ex.status) {
                check_one(&Check::ErrorBody { param: None }, ex)
            } else {
                ensure(called, "a 4xx refusal or a call", || {
                    format!("status {}: {}", ex.status, clip(&r.content))
                })
            }
        }
        Check::AllEqual { .. }
        | Check::SameAs { .. }
        | Check::OwnMarker { .. }
        | Check::PromptHoldsHistory { .. }
        | Check::StopsBeforeReplyWord { .. } => Ok(()),
    }
}

fn not_contains(what: &str, text: &str, any: &[String]) -> Outcome {
    match any.iter().find(|m| text.contains(m.as_str())) {
        Some(m) => Err((format!("{what} without {m:?}"), clip(text))),
        None => Ok(()),
    }
}

fn schema_errors(schema: &Value, value: &Value) -> Outcome {
    let validator = jsonschema::validator_for(schema)
        .map_err(|e| ("a valid schema".to_string(), e.to_string()))?;
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    ensure(errors.is_empty(), "valid against the schema", || {
        format!("{}: {}", errors.join("; "), clip(&value.to_string()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chat_stream(pieces: &[&str]) -> Exchange {
        Exchange {
            path: "/v1/chat/completions".into(),
            status: 200,
            streamed: true,
            chunks: pieces
                .iter()
                .map(|p| json!({"choices": [{"delta": {"content": p}}]}))
                .collect(),
            ..Default::default()
        }
    }

    fn chat_reply(content: &str) -> Exchange {
        Exchange {
            path: "/v1/chat/completions".into(),
            status: 200,
            body: json!({"choices": [{"message": {"content": content}, "finish_reason": "stop"}]}),
            ..Default::default()
        }
    }

    #[test]
    fn a_stop_sequence_must_cut_before_its_word() {
        let spec = CheckSpec {
            check: Check::StopsBeforeReplyWord { of: 0 },
            step: None,
        };
        let full = chat_reply("A tall lighthouse guards the bay.");
        let run = |got: &str| spec.evaluate(&[full.clone(), chat_reply(got)], &[1]).len();
        assert_eq!(run("A tall "), 0);
        assert_eq!(run("A tall lighthouse"), 1, "the stop string included");
        assert_eq!(
            run("A tall lighthouse guards the bay."),
            1,
            "the stop ignored"
        );
    }

    #[test]
    fn a_character_split_between_deltas_is_caught() {
        let spec = CheckSpec {
            check: Check::NoSplitCharacters,
            step: None,
        };
        // "🎉" sent as half a character in one delta and the rest in the next.
        let split = chat_stream(&["Party \u{FFFD}", "\u{FFFD} time"]);
        assert_eq!(spec.evaluate(&[split], &[0]).len(), 1);
        let whole = chat_stream(&["Party ", "🎉", " time"]);
        assert!(spec.evaluate(&[whole], &[0]).is_empty());
        // The model's own invalid bytes inside a delta, or a character cut
        // by max_tokens at the very end, are not a split.
        let model = chat_stream(&["bad \u{FFFD} byte", "end \u{FFFD}"]);
        assert!(spec.evaluate(&[model], &[0]).is_empty());
    }
}
