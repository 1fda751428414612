//! Grades from what the official clients did (`docs/grading.md`, "The
//! clients' word"). The rules of the checks stay the fast path; where a
//! replay shows a client doing otherwise, the replay wins:
//!
//! - a wrong error body (by the `error_body` rules, or off the schema)
//!   whose status the client still raised as the right exception class is
//!   `degraded` when its user loses the error's message or type, `spec`
//!   when the exception still carries both;
//! - a reply off the schema or the stream rules that the client read whole,
//!   handing its user values of the types it declares, is `spec`;
//!   a client that raised on it, or handed its user a wrong type, is `fail`;
//! - a usage the request asked for and the client's user never gets
//!   (absent, not wrong) is `degraded`, whether one path the SDK offers
//!   loses it (the chat `.stream()` helper drops a chunk whose `object` is
//!   not `chat.completion.chunk`, usage and all) or every path does;
//!   content, calls or a finish that a path drops are a `fail`;
//! - an answer to a request the published spec forbids, in a case marked
//!   `lenient`, is `lenient`.
//!
//! Every other check is about behaviour and stays `fail`. Each failure
//! the replay saw carries the client's own words as evidence.

use crate::protocol::endpoint::Endpoint;
use crate::suite::checks::{Failure, Grade};
use crate::suite::Case;

use super::ClientOutcome;

/// One step of a case as the grade needs it: its status and what the
/// client did with its reply (none: no client call for its path).
#[derive(Debug, Clone, Copy)]
pub struct Replayed<'a> {
    pub status: u16,
    pub client: Option<&'a ClientOutcome>,
    /// The request asked for the usage (`Dialect::asks_usage`; false on
    /// paths that are no generation).
    pub asks_usage: bool,
}

impl<'a> Replayed<'a> {
    /// The step that sent `request` to `path` (`streamed`: asking for a
    /// stream) and got `status`.
    pub fn of(
        path: &str,
        request: &serde_json::Value,
        streamed: bool,
        status: u16,
        client: Option<&'a ClientOutcome>,
    ) -> Replayed<'a> {
        Replayed {
            status,
            client,
            asks_usage: Endpoint::of_path(path)
                .is_some_and(|e| e.dialect().asks_usage(request, streamed)),
        }
    }
}

/// Regrades `failures` of `case` from the client outcomes of its steps.
pub fn regrade(case: &Case, failures: &mut [Failure], steps: &[Replayed<'_>]) {
    let accepted = !steps.is_empty() && steps.iter().all(|s| (200..300).contains(&s.status));
    for f in failures.iter_mut() {
        let (grade, evidence) = judge(case, f, steps, accepted);
        if let Some(grade) = grade {
            f.grade = grade;
        }
        if let Some(e) = evidence {
            f.client = Some(e.quote());
        }
    }
}

/// The grade a failure takes from the replay (`None`: the rule's stands)
/// and the outcome quoted as evidence.
fn judge<'a>(
    case: &Case,
    f: &Failure,
    steps: &[Replayed<'a>],
    accepted: bool,
) -> (Option<Grade>, Option<&'a ClientOutcome>) {
    let errors = || steps.iter().filter(|s| s.status >= 400);
    let successes = || steps.iter().filter(|s| (200..300).contains(&s.status));
    match f.check.as_str() {
        "status" | "status_in" | "error_body" if case.lenient && accepted => {
            (Some(Grade::Lenient), steps.iter().find_map(|s| s.client))
        }
        "error_body" => match raised_grade(errors()) {
            Some((grade, evidence)) => (Some(grade), Some(evidence)),
            None => (None, None),
        },
        "schema" | "sse" => {
            // The failure does not say which step it read: an error body
            // off the schema is graded as a wrong error body, a 2xx reply
            // by how the client read it, and the worse of the two stands.
            let refused = raised_grade(errors());
            let read = read_grade(f, successes());
            match [refused, read]
                .into_iter()
                .flatten()
                .max_by_key(|(g, _)| g.weight())
            {
                Some((grade, evidence)) => (Some(grade), Some(evidence)),
                None => (None, None),
            }
        }
        "usage" => {
            let outcomes: Vec<&ClientOutcome> = successes().filter_map(|s| s.client).collect();
            let Some(&evidence) = outcomes.first() else {
                return (None, None);
            };
            match outcomes.iter().find(|c| usage_missing(c)) {
                Some(&absent) => (Some(Grade::Degraded), Some(absent)),
                None => (None, Some(evidence)),
            }
        }
        _ => (None, steps.iter().rev().find_map(|s| s.client)),
    }
}

/// An error reply the clients raised: `spec` when every one raised the
/// status's own exception class with the error's message and type intact,
/// `degraded` when its user loses either, `fail` for any other exception
/// (`None`: no client call for them).
fn raised_grade<'a, 'b>(
    errors: impl Iterator<Item = &'b Replayed<'a>>,
) -> Option<(Grade, &'a ClientOutcome)>
where
    'a: 'b,
{
    let outcomes: Vec<(u16, &ClientOutcome)> = errors
        .filter_map(|s| s.client.map(|c| (s.status, c)))
        .collect();
    let &(_, evidence) = outcomes.first()?;
    let right_class = outcomes
        .iter()
        .all(|(status, c)| c.raised.as_ref().is_some_and(|r| r.status == Some(*status)));
    // What the user reads of the exception: its message and type.
    let lost = outcomes.iter().any(|(_, c)| {
        c.raised
            .as_ref()
            .is_some_and(|r| !super::lost_fields(r.fields.as_ref()).is_empty())
    });
    let grade = match (right_class, lost) {
        (false, _) => Grade::Fail,
        (true, true) => Grade::Degraded,
        (true, false) => Grade::Spec,
    };
    Some((grade, evidence))
}

/// A 2xx reply off the schema or the stream rules, by what the clients
/// did with it (`None`: no client call for them).
fn read_grade<'a, 'b>(
    f: &Failure,
    successes: impl Iterator<Item = &'b Replayed<'a>>,
) -> Option<(Grade, &'a ClientOutcome)>
where
    'a: 'b,
{
    let read: Vec<(bool, &ClientOutcome)> = successes
        .filter_map(|s| s.client.map(|c| (s.asks_usage, c)))
        .collect();
    let &(_, evidence) = read.first()?;
    // The rules' letter-only deviation breaks the client only if it
    // raised or got a wrong value; a field the SDK declares that the
    // server leaves out is then newer than the server, as the rules read
    // it (`protocol::spec_schemas`).
    let letter_only = f.grade == Grade::Spec;
    if let Some(&(_, broke)) = read.iter().find(|(_, c)| breaks(c, letter_only)) {
        return Some((Grade::Fail, broke));
    }
    // Read rightly, but the user of a call the SDK offers loses what the
    // reply carried: the usage only is degraded, an answer's content,
    // calls or finish a failure.
    if let Some(&(_, lossy)) = read.iter().find(|(_, c)| !c.lost.is_empty()) {
        let grade = match lossy.lost.iter().all(|l| l == "usage") {
            true => Grade::Degraded,
            false => Grade::Fail,
        };
        return Some((grade, lossy));
    }
    // A usage the request asked for that no path hands its user weighs
    // as one that a single path loses. Only the stream rules find a usage
    // chunk missing: a schema finding is about another field, whatever
    // another step of its case lost.
    let usage_found_missing = f.check == "sse";
    if let Some(&(_, unused)) = read
        .iter()
        .find(|(asked, c)| usage_found_missing && *asked && usage_missing(c))
    {
        return Some((Grade::Degraded, unused));
    }
    Some((Grade::Spec, evidence))
}

/// The client returned, and its user reads no usage (absent, not wrong).
fn usage_missing(c: &ClientOutcome) -> bool {
    c.raised.is_none()
        && c.value
            .as_ref()
            .is_some_and(|v| v.get("usage").is_none_or(|u| u.is_null()))
}

/// The client raised, or handed its user a value its own types rule out
/// (with `wrong_values_only`, a wrong value, not a field left out). A
/// chunk's or object's `object` field alone does not break a client: the
/// SDKs' plain streams yield such chunks unchanged (what the chat
/// `.stream()` helper, which reads it, drops is the outcome's `lost`).
fn breaks(c: &ClientOutcome, wrong_values_only: bool) -> bool {
    c.raised.is_some()
        || c.rejected.iter().any(|r| {
            let object_only = r.starts_with("object: ");
            let left_out = wrong_values_only && r.ends_with(": Field required");
            !(object_only || left_out)
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::clients::Raised;

    fn case(lenient: bool) -> Case {
        let mut c: Case = toml::from_str(
            r#"id = "t.case"
name = "t"
tier = "smoke"
check = [{ kind = "status", equals = 400 }]"#,
        )
        .unwrap();
        c.lenient = lenient;
        c
    }

    fn step(status: u16, client: ClientOutcome) -> (u16, ClientOutcome) {
        (status, client)
    }

    fn raised(status: u16) -> ClientOutcome {
        ClientOutcome {
            client: "openai-python 3.54.0".into(),
            call: None,
            raised: Some(Raised {
                class: "BadRequestError".into(),
                message: "Error code: 400".into(),
                status: Some(status),
                fields: Some(json!({"message": null, "type": null})),
            }),
            value: None,
            rejected: vec![],
            lost: vec![],
        }
    }

    fn returned(usage: serde_json::Value, rejected: &[&str]) -> ClientOutcome {
        ClientOutcome {
            client: "openai-python 3.54.0".into(),
            call: Some("chat.completions.create".into()),
            raised: None,
            value: Some(json!({"content": "hi", "usage": usage})),
            rejected: rejected.iter().map(|s| s.to_string()).collect(),
            lost: vec![],
        }
    }

    fn graded(case: &Case, check: &str, steps: &[(u16, ClientOutcome)]) -> Failure {
        let mut f = vec![Failure::new(check, "x".into(), "y".into())];
        let replayed: Vec<Replayed> = steps
            .iter()
            .map(|(status, c)| Replayed {
                status: *status,
                client: Some(c),
                asks_usage: true,
            })
            .collect();
        regrade(case, &mut f, &replayed);
        f.remove(0)
    }

    #[test]
    fn a_wrong_error_body_the_client_raises_rightly_is_degraded() {
        let f = graded(&case(false), "error_body", &[step(400, raised(400))]);
        assert_eq!(f.grade, Grade::Degraded);
        let quote = f.client.unwrap();
        assert!(quote.contains("raised BadRequestError (400)"), "{quote}");
        assert!(quote.contains("(error message, type empty)"), "{quote}");
        // The shape off Anthropic's, message and type intact: nothing lost.
        let mut intact = raised(400);
        intact.raised.as_mut().unwrap().fields = Some(json!({"message": "m", "type": "t"}));
        let f = graded(&case(false), "error_body", &[step(400, intact)]);
        assert_eq!(f.grade, Grade::Spec);
        // A client that raised something else (no status) stays a failure.
        let mut other = raised(400);
        other.raised.as_mut().unwrap().status = None;
        let f = graded(&case(false), "error_body", &[step(400, other)]);
        assert_eq!(f.grade, Grade::Fail);
    }

    #[test]
    fn an_off_schema_reply_is_spec_only_when_the_client_reads_it_rightly() {
        let usage = json!({"prompt_tokens": 1});
        let only_object = returned(usage.clone(), &["object: Input should be 'x'"]);
        let f = graded(&case(false), "schema", &[step(200, only_object)]);
        assert_eq!(f.grade, Grade::Spec);
        let wrong_type = returned(usage, &["choices.0.index: Input should be a valid integer"]);
        let f = graded(&case(false), "schema", &[step(200, wrong_type)]);
        assert_eq!(f.grade, Grade::Fail);
        let f = graded(&case(false), "sse", &[step(200, raised(200))]);
        assert_eq!(f.grade, Grade::Fail);
    }

    #[test]
    fn a_letter_only_deviation_becomes_a_failure_only_on_a_wrong_value() {
        let usage = json!({"input_tokens": 1});
        let letter = |rejected: &[&str]| {
            let mut f = vec![Failure::new("schema", "x".into(), "y".into())];
            f[0].grade = Grade::Spec;
            let c = returned(usage.clone(), rejected);
            let replayed = [Replayed {
                status: 200,
                client: Some(&c),
                asks_usage: true,
            }];
            regrade(&case(false), &mut f, &replayed);
            f.remove(0).grade
        };
        // A field newer than the server: the SDK declares it, the server
        // leaves it out; nobody's code broke.
        let newer = "usage.input_tokens_details.cache_write_tokens: Field required";
        assert_eq!(letter(&[newer]), Grade::Spec);
        assert_eq!(
            letter(&["usage.input_tokens: Input should be a valid integer"]),
            Grade::Fail
        );
    }

    #[test]
    fn an_invalid_request_answered_is_lenient_only_where_the_case_says() {
        let ok = returned(json!({"prompt_tokens": 1}), &[]);
        let f = graded(&case(true), "status", &[step(200, ok.clone())]);
        assert_eq!(f.grade, Grade::Lenient);
        let f = graded(&case(false), "status", &[step(200, ok.clone())]);
        assert_eq!(f.grade, Grade::Fail);
        // A lenient case refused with the wrong status is no answer.
        let f = graded(&case(true), "status", &[step(500, raised(500))]);
        assert_eq!(f.grade, Grade::Fail);
    }

    #[test]
    fn a_chunk_the_stream_helper_drops_is_degraded_for_usage_and_a_failure_for_content() {
        let mut helper = returned(serde_json::Value::Null, &["object: Input should be 'x'"]);
        helper.call = Some("chat.completions.stream() helper".into());
        helper.lost = vec!["usage".into()];
        let f = graded(&case(false), "sse", &[step(200, helper.clone())]);
        assert_eq!(f.grade, Grade::Degraded);
        assert!(
            f.client
                .unwrap()
                .contains("its user loses the reply's usage"),
            "the evidence names the loss"
        );
        helper.lost = vec!["content".into(), "usage".into()];
        let f = graded(&case(false), "sse", &[step(200, helper)]);
        assert_eq!(f.grade, Grade::Fail);
    }

    #[test]
    fn a_schema_finding_on_an_error_body_is_graded_by_what_the_client_raised() {
        // vLLM's Messages 400: OpenAI's error type in Anthropic's envelope;
        // anthropic-python raises BadRequestError, message and type intact.
        let mut intact = raised(400);
        intact.client = "anthropic-python 1.13.0".into();
        intact.raised.as_mut().unwrap().fields =
            Some(json!({"message": "not a multimodal model", "type": "BadRequestError"}));
        let f = graded(&case(false), "schema", &[step(400, intact.clone())]);
        assert_eq!(f.grade, Grade::Spec);
        assert!(f.client.unwrap().contains("raised BadRequestError (400)"));
        // Its message lost: degraded; another exception: a failure.
        let f = graded(&case(false), "schema", &[step(400, raised(400))]);
        assert_eq!(f.grade, Grade::Degraded);
        let mut other = intact.clone();
        other.raised.as_mut().unwrap().status = None;
        let f = graded(&case(false), "schema", &[step(400, other)]);
        assert_eq!(f.grade, Grade::Fail);
        // Beside a 2xx reply the client broke on, the worse grade stands.
        let broken = returned(
            json!({"input_tokens": 1}),
            &["content.0.text: Field required"],
        );
        let f = graded(
            &case(false),
            "schema",
            &[step(400, intact), step(200, broken)],
        );
        assert_eq!(f.grade, Grade::Fail);
    }

    #[test]
    fn usage_asked_for_and_lost_on_every_path_is_degraded_like_one_path() {
        // llama-cpp-python: no usage chunk, though the request asked for
        // one; both stream paths read the rest rightly.
        let mut both = returned(serde_json::Value::Null, &[]);
        both.call = Some("chat.completions.create(stream) and .stream()".into());
        let f = graded(&case(false), "sse", &[step(200, both.clone())]);
        assert_eq!(f.grade, Grade::Degraded);
        // Not asked for (no include_usage): nothing is lost.
        let mut f = vec![Failure::new("sse", "x".into(), "y".into())];
        let replayed = [Replayed {
            status: 200,
            client: Some(&both),
            asks_usage: false,
        }];
        regrade(&case(false), &mut f, &replayed);
        assert_eq!(f[0].grade, Grade::Spec);
        // Asked for and delivered: the deviation is the letter's only.
        let delivered = returned(json!({"prompt_tokens": 1}), &[]);
        let f = graded(&case(false), "sse", &[step(200, delivered)]);
        assert_eq!(f.grade, Grade::Spec);
        // A schema finding (a `refusal` left out) beside that stream is
        // about its own field: the usage does not weigh on it.
        let f = graded(&case(false), "schema", &[step(200, both)]);
        assert_eq!(f.grade, Grade::Spec);
    }

    #[test]
    fn usage_left_out_is_degraded_and_usage_wrong_is_a_failure() {
        let absent = returned(serde_json::Value::Null, &[]);
        assert_eq!(
            graded(&case(false), "usage", &[step(200, absent)]).grade,
            Grade::Degraded
        );
        let present = returned(json!({"prompt_tokens": 9}), &[]);
        assert_eq!(
            graded(&case(false), "usage", &[step(200, present)]).grade,
            Grade::Fail
        );
    }

    #[test]
    fn behaviour_checks_stay_failures_with_the_clients_value_as_evidence() {
        let ok = returned(json!({"prompt_tokens": 1}), &[]);
        let f = graded(&case(true), "content_not_contains", &[step(200, ok)]);
        assert_eq!(f.grade, Grade::Fail);
        assert!(f.client.unwrap().contains("returned {\"content\":\"hi\""));
    }
}
