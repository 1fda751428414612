//! The check vocabulary of the suites. Each check is a `[[case.check]]`
//! table with a `kind` and its parameters (listed in `suites/README.md`);
//! it looks at the scenario's replies and fails with what it expected and
//! what it saw.
//!
//! This module holds the vocabulary and hands each check to its family's
//! module: `http` (status, headers, body fields), `errors`, `wire` (stream
//! rules, published schemas), `content`, `reasoning`, `json`, `tools`,
//! `usage`, `logprobs`, and `across_steps` (checks that compare several
//! replies of a scenario).

mod across_steps;
mod batch;
mod content;
mod errors;
#[cfg(test)]
mod fixtures;
mod http;
mod json;
mod logprobs;
mod reasoning;
mod tools;
mod usage;
mod wire;

use anyhow::{bail, Result};
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::outcome::Outcome;
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
    /// Reasoning, then content: all the text the model wrote, for
    /// sampling cases that must not depend on where a thinking model's
    /// `max_tokens` ran out.
    Text,
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
    /// The model answered: non-empty content, or, from a model that thinks,
    /// reasoning that `max_tokens` cut before any content. For cases that
    /// are not about reasoning: a reasoning model spending a small budget on
    /// thinking is OpenAI's own behaviour, not the server's fault; whether
    /// a server leaves room for the answer is the thinking_budget section's
    /// question (its cases keep `content_non_empty`).
    Answered,
    /// An agent's turn was taken: content with text, or a call of one of
    /// the offered tools (an agent's model may answer either way), or
    /// reasoning cut by `max_tokens`, as `answered`.
    TurnTaken,
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
    /// Responses, as Codex matches them: each output item keeps one `id`
    /// from `response.output_item.added` through `.done` to the final
    /// response, and a function call keeps its `call_id`, `name` and
    /// `namespace` (a call of a tool inside a `namespace` tool names that
    /// namespace, the tool by its own name).
    ItemIds,
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
    /// Each subject differs from step `of` on `field`: a parameter that
    /// must change the output (another seed, a repetition penalty) did.
    DiffersFrom {
        of: usize,
        #[serde(default)]
        field: Field,
    },
    /// Each subject's content is step `of`'s (the same greedy request
    /// without a stop) cut before the earliest place where one of the
    /// subject's own stop strings occurs, all of it when none does: a
    /// stop fires inside a word, on a newline, and not on a near miss,
    /// and an empty list stops nothing (trailing whitespace aside).
    StoppedAtStop {
        of: usize,
    },
    /// (`batch` scenario) The batch ended `completed` with every line
    /// counted and listed, its output holding each custom_id once, each a
    /// 200 with text.
    BatchCompleted,
    /// (`batch` scenario) Input OpenAI refuses (duplicate custom_ids, no
    /// lines): a 4xx at upload or create, or a batch ended `failed` with
    /// `errors.data` that ran no line.
    BatchRefused,
    /// (`batch` scenario) The input file's metadata, its deletion, and a
    /// 404 after it.
    BatchFiles,
    /// (`disconnect` scenario) The server's gauge of running requests
    /// came back to 0 after the clients left; a server with no known gauge
    /// is judged by the later requests alone.
    SlotsFreed,
    /// (`shutdown` scenario, the request after SIGTERM) Refused: a 503,
    /// or the connection refused or closed; never served.
    RefusedWhileStopping,
    /// (`shutdown` scenario, the exit step) The process ended within
    /// 30 s of SIGTERM.
    Exited,
    /// Every content token's logprob is a finite number <= 0 (what a NaN
    /// in the forward pass breaks), whatever alternatives come with it.
    FiniteLogprobs,
    /// The reply carries no logprobs (`null` or absent, in every chunk):
    /// `logprobs: false` is not "logprobs anyway".
    NoLogprobs,
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
    /// `GET /v1/models/{id}` answers that model: `object` "model" and the
    /// `id` asked for (what the SDKs' `models.retrieve` returns).
    ModelObject,
    /// The generated text (reasoning, then content) is one piece written
    /// at least `min` times: a token forced by `logit_bias` +100 took
    /// every step.
    OnePieceRepeated {
        min: usize,
    },
    /// No logprobs token of the subject is step `of`'s first one (a token
    /// banned by `logit_bias` -100, known by its text from a step that
    /// forced it; a vocabulary spells each token once).
    NoTokenOf {
        of: usize,
    },
    /// At most `max` tool calls (`parallel_tool_calls: false` allows one).
    AtMostCalls {
        max: usize,
    },
    /// Every call's `function.arguments` is a string on the wire, whole
    /// or in each streamed delta: OpenAI's type, which SDK users hand to
    /// `json.loads` (an object there raises a TypeError in their loop).
    ArgumentsAreStrings,
    /// Scenario `parallel_alone`: each reply of the parallel requests
    /// (which differ) is closer to its own request's reply alone than to
    /// any other request's: a server that hands one request's text to
    /// another fails, numerics that drift late do not.
    OwnReply,
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

/// A failed check: what it wanted and what it saw, and how it weighs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    pub check: String,
    pub expected: String,
    pub actual: String,
    #[serde(default, skip_serializing_if = "Grade::breaks")]
    pub grade: Grade,
    /// What an official client did with the reply (`--clients`): the
    /// evidence behind the grade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

impl Failure {
    /// A failure that breaks clients.
    pub fn new(check: impl Into<String>, expected: String, actual: String) -> Self {
        Failure {
            check: check.into(),
            expected,
            actual,
            grade: Grade::Fail,
            client: None,
        }
    }
}

/// How a failed check weighs (`docs/grading.md`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Grade {
    /// Behaviour a client sees: wrong or ignored semantics, a wrong type
    /// of a field clients read, a field the official SDKs need missing, a
    /// broken stream.
    #[default]
    Fail,
    /// A deviation from a published schema's letter that the official SDKs
    /// accept (an explicit null, a field of the server's own, a nullable
    /// field left out): counted and shown, failing only with `--strict`.
    Spec,
    /// The official client works, and its user loses something: an
    /// error's message or type, the usage (`--clients` grades it).
    Degraded,
    /// The server answers a request the published spec forbids (a case
    /// marked `lenient`): shown apart, failing only with `--strict`.
    Lenient,
}

impl Grade {
    pub fn breaks(&self) -> bool {
        *self == Grade::Fail
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Grade::Fail => "fail",
            Grade::Degraded => "degraded",
            Grade::Spec => "spec",
            Grade::Lenient => "lenient",
        }
    }

    /// How much worse than the others: fail, degraded, spec, lenient.
    pub fn weight(self) -> u8 {
        match self {
            Grade::Fail => 3,
            Grade::Degraded => 2,
            Grade::Spec => 1,
            Grade::Lenient => 0,
        }
    }
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
        let found = if on.iter().any(|&i| i >= steps.len()) {
            vec![(
                format!("step {:?}", self.step),
                format!("{} steps", steps.len()),
            )]
        } else {
            self.mismatches(steps, &on)
        };
        let kind = kind_name(&self.check);
        let graded = |found: Vec<Mismatch>, grade| -> Vec<Failure> {
            found
                .into_iter()
                .map(|(expected, actual)| Failure {
                    check: kind.clone(),
                    expected,
                    actual,
                    grade,
                    client: None,
                })
                .collect()
        };
        let mut failures = graded(found, Grade::Fail);
        // Nothing a client breaks on: the schema's letter gives the grade.
        if failures.is_empty() && self.check == Check::Schema {
            // (Reached only when every step of `on` exists.)
            let letter = per_step(&on, |i| wire::schema_letter(&steps[i]));
            failures.extend(graded(letter, Grade::Spec));
        }
        failures
    }

    /// Checks over several steps go to their family whole; every other
    /// check looks at each step alone.
    fn mismatches(&self, steps: &[Exchange], on: &[usize]) -> Vec<Mismatch> {
        match &self.check {
            Check::AllEqual { field } => across_steps::all_equal(steps, on, *field),
            Check::CachedTokens { allow_misses, .. } if *allow_misses > 0 => {
                usage::cached_tokens_with_misses(&self.check, steps, on, *allow_misses)
            }
            Check::OwnMarker { marker } => across_steps::own_marker(steps, on, marker),
            Check::SameAs { of, field } => across_steps::same_as(steps, on, *of, *field),
            Check::StopsBeforeReplyWord { of } => {
                across_steps::stops_before_reply_word(steps, on, *of)
            }
            Check::StoppedAtStop { of } => across_steps::stopped_at_stop(steps, on, *of),
            Check::BatchCompleted => batch::completed(steps),
            Check::SlotsFreed => across_steps::slots_freed(steps),
            Check::BatchRefused => batch::refused(steps),
            Check::BatchFiles => batch::files(steps),
            Check::DiffersFrom { of, field } => across_steps::differs_from(steps, on, *of, *field),
            Check::PromptHoldsHistory { of, with_reply } => {
                across_steps::prompt_holds_history(steps, on, *of, *with_reply)
            }
            Check::NoTokenOf { of } => across_steps::no_token_of(steps, on, *of),
            Check::OwnReply => across_steps::own_reply(steps, on),
            check => per_step(on, |i| check_one(check, &steps[i])),
        }
    }
}

/// A one-step check's mismatches over steps `on`, each named by its step
/// when there are several.
fn per_step(on: &[usize], outcome: impl Fn(usize) -> Outcome) -> Vec<Mismatch> {
    let several = on.len() > 1;
    on.iter()
        .filter_map(|&i| {
            outcome(i).err().map(|(expected, actual)| match several {
                true => (expected, format!("step {i}: {actual}")),
                false => (expected, actual),
            })
        })
        .collect()
}

/// A 2xx whose body should be JSON and is not (an HTML page, bytes that
/// are not UTF-8, JSON nested past the parser's limit, nothing): every
/// check but the status and the headers fails naming what came, instead
/// of an "empty content" that hides it.
fn unreadable_body(check: &Check, ex: &Exchange) -> Option<Mismatch> {
    let wire_only = matches!(
        check,
        Check::Status { .. }
            | Check::StatusIn { .. }
            | Check::HeaderPresent { .. }
            | Check::Header { .. }
    );
    if wire_only || !(200..300).contains(&ex.status) {
        return None;
    }
    let stream_came = ex.done_marker || !ex.chunks.is_empty() || !ex.malformed_lines.is_empty();
    if !ex.streamed && ex.body.is_null() && stream_came {
        let bad = match ex.malformed_lines.first() {
            Some(line) => format!(
                ", {} lines that are not SSE data, the first {:?}",
                ex.malformed_lines.len(),
                line.chars().take(80).collect::<String>()
            ),
            None => String::new(),
        };
        return Some((
            "a JSON body".into(),
            format!(
                "an event stream ({} chunks{bad}) to a request that did not ask to stream",
                ex.chunks.len()
            ),
        ));
    }
    let Value::String(text) = &ex.body else {
        return None;
    };
    if !ex.chunks.is_empty() {
        return None;
    }
    let kind = ex
        .headers
        .get("content-type")
        .map_or("untyped", String::as_str);
    let why = serde_json::from_str::<Value>(text)
        .err()
        .map_or(String::new(), |e| format!(" ({e})"));
    let head: String = text.chars().take(80).collect();
    Some((
        "a JSON body".into(),
        format!("a {kind} body that is not JSON{why}: {head:?}"),
    ))
}

/// What a check expected and what it saw, before [`CheckSpec::evaluate`]
/// names the check in a [`Failure`].
type Mismatch = (String, String);

fn kind_name(c: &Check) -> String {
    serde_json::to_value(c)
        .ok()
        .and_then(|v| v["kind"].as_str().map(str::to_string))
        .unwrap_or_default()
}

/// One check on one exchange (checks over several exchanges, such as
/// `all_equal`, need [`CheckSpec::evaluate`]); afm-bench checks each reply
/// under load with it.
pub fn check_one(check: &Check, ex: &Exchange) -> Outcome {
    if let Some(e) = &ex.transport_error {
        return Err(("a response".into(), format!("transport error: {e}")));
    }
    if let Some(m) = unreadable_body(check, ex) {
        return Err(m);
    }
    let r = Reply::of(ex);
    match check {
        Check::Status { equals } => http::status(ex, *equals),
        Check::StatusIn { any } => http::status_in(ex, any),
        Check::HeaderPresent { name } => http::header_present(ex, name),
        Check::Header { name, equals } => http::header(ex, name, equals),
        Check::JsonPointerPositive { pointer } => http::json_pointer_positive(ex, pointer),
        Check::ModelsList => http::models_list(ex),
        Check::ModelObject => http::model_object(ex),
        Check::ErrorBody { param } => errors::error_body(ex, param.as_deref()),
        Check::NoError => errors::no_error(ex, &r),
        Check::RefusedOrCall => errors::refused_or_call(ex, &r),
        Check::Sse => wire::sse(ex),
        Check::ItemIds => wire::item_ids(ex),
        Check::NoSplitCharacters => wire::no_split_characters(ex),
        Check::Schema => wire::published_schema(ex),
        Check::FinishReason { one_of } => content::finish_reason(&r, one_of),
        Check::ContentNonEmpty => content::non_empty(&r),
        Check::Answered => content::answered(&r),
        Check::TurnTaken => match r.tool_calls.is_empty() {
            false => Ok(()),
            true => content::answered(&r).map_err(|(_, actual)| {
                (
                    "text, a tool call, or reasoning cut by max_tokens".into(),
                    actual,
                )
            }),
        },
        Check::ContentMatches { pattern } => content::matches(&r, pattern),
        Check::ContentNotContains { any } => content::not_contains(&r, any),
        Check::NoRepetition { max } => content::no_repetition(&r, *max),
        Check::OnePieceRepeated { min } => content::one_piece_repeated(&r, *min),
        Check::ReasoningNonEmpty => reasoning::non_empty(&r),
        Check::ReasoningEmpty => reasoning::empty(&r),
        Check::ReasoningNotContains { any } => reasoning::not_contains(&r, any),
        Check::JsonValid => json::valid(&r),
        Check::JsonSchema { schema } => json::schema(ex, &r, schema.as_ref()),
        Check::ToolCall { name, count } => tools::call(&r, name.as_deref(), *count),
        Check::NoToolCalls => tools::none(&r),
        Check::ToolArgs => tools::args(ex, &r),
        Check::ToolCallIds => tools::ids(&r),
        Check::AtMostCalls { max } => tools::at_most(&r, *max),
        Check::ArgumentsAreStrings => tools::arguments_are_strings(ex),
        Check::Usage {
            completion_max,
            reasoning_min,
            reasoning_max,
        } => usage::usage(&r, *completion_max, *reasoning_min, *reasoning_max),
        Check::CachedTokens {
            min,
            max,
            min_fraction,
            max_fraction,
            ..
        } => usage::cached_tokens(&r, *min, *max, *min_fraction, *max_fraction),
        Check::Logprobs { top } => logprobs::logprobs(&r, *top),
        Check::NoLogprobs => logprobs::none(&r),
        Check::RefusedWhileStopping => match ex.status {
            503 => Ok(()),
            0 if ex.body["connection"].is_string() => Ok(()),
            status => Err((
                "a 503, or the connection refused, for a request after SIGTERM".into(),
                format!("{status}: {}", crate::outcome::clip(&ex.body.to_string())),
            )),
        },
        Check::Exited => match ex.status {
            200 => Ok(()),
            _ => Err((
                "the process ended within 30 s of SIGTERM".into(),
                "still running".into(),
            )),
        },
        Check::FiniteLogprobs => logprobs::finite(&r),
        Check::AllEqual { .. }
        | Check::SameAs { .. }
        | Check::OwnMarker { .. }
        | Check::PromptHoldsHistory { .. }
        | Check::StopsBeforeReplyWord { .. }
        | Check::StoppedAtStop { .. }
        | Check::BatchCompleted
        | Check::SlotsFreed
        | Check::BatchRefused
        | Check::BatchFiles
        | Check::DiffersFrom { .. }
        | Check::NoTokenOf { .. }
        | Check::OwnReply => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_200_that_is_not_json_is_named_by_every_reply_check_but_not_the_status() {
        let mut ex = fixtures::chat_body(Value::String(
            "<html><h1>502 Bad Gateway</h1></html>".into(),
        ));
        ex.headers.insert("content-type".into(), "text/html".into());
        let (expected, actual) = check_one(&Check::ContentNonEmpty, &ex).unwrap_err();
        assert_eq!(expected, "a JSON body");
        assert!(
            actual.starts_with("a text/html body that is not JSON (")
                && actual.contains("502 Bad Gateway"),
            "{actual}"
        );
        assert!(check_one(&Check::Status { equals: 200 }, &ex).is_ok());
        let json = fixtures::chat_reply("hello");
        assert!(check_one(&Check::ContentNonEmpty, &json).is_ok());
        // A stream, with a line that is not UTF-8, to a whole request.
        let mut ex = fixtures::chat_body(Value::Null);
        ex.malformed_lines = vec!["invalid UTF-8: data: {...}".into()];
        let (_, actual) = check_one(&Check::ContentNonEmpty, &ex).unwrap_err();
        assert!(
            actual.contains("invalid UTF-8") && actual.contains("did not ask to stream"),
            "{actual}"
        );
        let streamed = fixtures::chat_stream(&["a", "b"]);
        assert!(check_one(&Check::ContentNonEmpty, &streamed).is_ok());
    }
}
