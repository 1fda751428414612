//! Checks that compare several replies of a scenario rather than look at
//! one: `all_equal`, `same_as`, `own_marker`, `prompt_holds_history`,
//! `stops_before_reply_word`, `stopped_at_stop`, `differs_from`. Each takes the scenario's `steps` and the
//! subjects it checks (`on`, indices into `steps`) and returns one
//! mismatch per subject that fails (`all_equal`: one for all).

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Field, Mismatch};
use crate::outcome::clip;
use crate::protocol::exchange::Exchange;
use crate::protocol::reply::Reply;

pub(super) fn all_equal(steps: &[Exchange], on: &[usize], field: Field) -> Vec<Mismatch> {
    let values: Vec<String> = on
        .iter()
        .map(|&i| field_of(&Reply::of(&steps[i]), field))
        .collect();
    let distinct: BTreeSet<&String> = values.iter().collect();
    if distinct.len() > 1 {
        let listing = values
            .iter()
            .enumerate()
            .map(|(k, v)| format!("[{}] {}", on[k], clip(v)))
            .collect::<Vec<_>>()
            .join("\n");
        return vec![(
            format!("{} identical {field:?}", values.len()),
            format!("{} different:\n{listing}", distinct.len()),
        )];
    }
    Vec::new()
}

/// Subject k's marker is `marker` with `{{slot}}` = k. A marker that
/// holds another's (slot 1 in slot 10) does not count as that other.
pub(super) fn own_marker(steps: &[Exchange], on: &[usize], marker: &str) -> Vec<Mismatch> {
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
                    *j != k && !markers[k].contains(m.as_str()) && content.contains(m.as_str())
                })
                .map(|(_, m)| m)
                .collect();
            (!content.contains(&markers[k]) || !others.is_empty()).then(|| {
                (
                    format!("slot {k}: {:?} and no other slot's marker", markers[k]),
                    format!("step {i}: {}", clip(&content)),
                )
            })
        })
        .collect()
}

/// Step `of` itself, when among the subjects, is the reference and not
/// checked.
pub(super) fn same_as(steps: &[Exchange], on: &[usize], of: usize, field: Field) -> Vec<Mismatch> {
    let Some(reference) = steps.get(of) else {
        return vec![(format!("step {of}"), "no such step".into())];
    };
    let want = field_of(&Reply::of(reference), field);
    on.iter()
        .filter(|&&i| i != of)
        .filter_map(|&i| {
            let got = field_of(&Reply::of(&steps[i]), field);
            (got != want).then(|| {
                (
                    format!("{field:?} of step {of}: {}", clip(&want)),
                    format!("step {i}: {}", clip(&got)),
                )
            })
        })
        .collect()
}

/// The content of step `of`, cut before its longest word and trimmed at
/// the end, is what each subject must say (trailing whitespace aside).
pub(super) fn stops_before_reply_word(
    steps: &[Exchange],
    on: &[usize],
    of: usize,
) -> Vec<Mismatch> {
    let Some(full) = steps.get(of).map(Reply::of) else {
        return vec![(format!("step {of}"), "no such step".into())];
    };
    let word = full.longest_word();
    let Some(at) = full.content.find(word).filter(|_| !word.is_empty()) else {
        return vec![(
            format!("a word in step {of}'s content"),
            clip(&full.content),
        )];
    };
    let before = full.content[..at].trim_end();
    on.iter()
        .filter(|&&i| i != of)
        .filter_map(|&i| {
            let got = Reply::of(&steps[i]).content;
            let cut = got.trim_end();
            (cut != before).then(|| {
                (
                    format!("step {of}'s content up to {word:?}: {}", clip(before)),
                    format!("step {i}: {}", clip(&got)),
                )
            })
        })
        .collect()
}

/// The stop strings a request sent (`stop` or Anthropic's
/// `stop_sequences`, a string or a list); an empty string stops nothing.
fn stops_of(request: &Value) -> Vec<String> {
    let v = match &request["stop"] {
        Value::Null => &request["stop_sequences"],
        v => v,
    };
    let list = match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    };
    list.into_iter().filter(|s| !s.is_empty()).collect()
}

/// Step `of`'s content cut before the earliest occurrence of any of each
/// subject's stops (all of it when none occurs) is what the subject says,
/// trailing whitespace aside. A thinking model's server may match stops
/// in the reasoning too (vLLM does; AFM and afm-serve only in the
/// content): where a stop first occurs inside step `of`'s reasoning, the
/// subject may instead be that reasoning cut there, with no content.
pub(super) fn stopped_at_stop(steps: &[Exchange], on: &[usize], of: usize) -> Vec<Mismatch> {
    let Some(full) = steps.get(of).map(Reply::of) else {
        return vec![(format!("step {of}"), "no such step".into())];
    };
    on.iter()
        .filter(|&&i| i != of)
        .filter_map(|&i| {
            let stops = stops_of(&steps[i].request);
            let first = |whole: &str| stops.iter().filter_map(|s| whole.find(s.as_str())).min();
            let at = first(&full.content);
            let want = at.map_or(full.content.as_str(), |at| &full.content[..at]);
            let got = Reply::of(&steps[i]);
            let in_content = got.content.trim_end() == want.trim_end();
            // Exactly: a reasoning that kept the stop was not cut by it.
            let in_reasoning = first(&full.reasoning).is_some_and(|r| {
                got.content.trim().is_empty() && got.reasoning == full.reasoning[..r]
            });
            (!in_content && !in_reasoning).then(|| {
                let how = match at {
                    Some(_) => "cut at the first of",
                    None => "whole: it holds none of",
                };
                (
                    format!("step {of}'s content {how} {stops:?}: {}", clip(want)),
                    format!("step {i}: {}", clip(&got.content)),
                )
            })
        })
        .collect()
}

/// The `/metrics` step of a `disconnect` scenario: its gauge's last
/// sample is 0.
pub(super) fn slots_freed(steps: &[Exchange]) -> Vec<Mismatch> {
    let Some(watch) = steps
        .iter()
        .find(|s| s.path == crate::protocol::endpoint::METRICS_PATH)
    else {
        return vec![("the scenario's /metrics step".into(), "none".into())];
    };
    let Some(gauge) = watch.body["gauge"].as_str() else {
        return Vec::new();
    };
    let samples = watch.body["samples"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let last = samples
        .last()
        .map(|s| (s[0].as_u64().unwrap_or(0), s[1].as_f64().unwrap_or(-1.0)));
    match last {
        Some((_, 0.0)) => Vec::new(),
        _ => vec![(
            format!("{gauge} back to 0 within 15 s of the clients leaving"),
            format!(
                "{} at {} ms",
                last.map_or("no sample".into(), |(_, v)| v.to_string()),
                last.map_or(0, |(t, _)| t)
            ),
        )],
    }
}

pub(super) fn differs_from(
    steps: &[Exchange],
    on: &[usize],
    of: usize,
    field: Field,
) -> Vec<Mismatch> {
    let Some(reference) = steps.get(of) else {
        return vec![(format!("step {of}"), "no such step".into())];
    };
    let same = field_of(&Reply::of(reference), field);
    on.iter()
        .filter(|&&i| i != of)
        .filter_map(|&i| {
            let got = field_of(&Reply::of(&steps[i]), field);
            (got == same).then(|| {
                (
                    format!("{field:?} other than step {of}'s"),
                    format!("step {i}, the same: {}", clip(&got)),
                )
            })
        })
        .collect()
}

/// Usage tells whether the history reached the model, whatever the model
/// then made of it: each subject's prompt exceeds step `of`'s prompt and,
/// `with_reply`, its completion.
pub(super) fn prompt_holds_history(
    steps: &[Exchange],
    on: &[usize],
    of: usize,
    with_reply: bool,
) -> Vec<Mismatch> {
    let Some(earlier) = steps.get(of).map(Reply::of) else {
        return vec![(format!("step {of}"), "no such step".into())];
    };
    let (Some(p0), Some(c0)) = (
        earlier.usage_field("prompt_tokens"),
        earlier.usage_field("completion_tokens"),
    ) else {
        return vec![(
            format!("usage of step {of}"),
            "no prompt_tokens/completion_tokens".into(),
        )];
    };
    let c0 = if with_reply { c0 } else { 0 };
    on.iter()
        .filter(|&&i| i != of)
        .filter_map(|&i| {
            let p = Reply::of(&steps[i]).usage_field("prompt_tokens");
            (p.is_none_or(|p| p <= p0 + c0)).then(|| {
                (
                    format!(
                        "more than {} prompt tokens ({p0} + {c0} of step {of})",
                        p0 + c0
                    ),
                    format!("step {i}: {p:?}"),
                )
            })
        })
        .collect()
}

/// The first logprobs token of step `of` is in no subject's logprobs:
/// the same text, or the same `id` where a server gives ids (mlx-lm gives
/// ids and no text).
pub(super) fn no_token_of(steps: &[Exchange], on: &[usize], of: usize) -> Vec<Mismatch> {
    let first = steps
        .get(of)
        .map(Reply::of)
        .and_then(|r| r.logprobs.first().cloned());
    let Some(banned) = first.filter(|t| t["token"].is_string() || t["id"].is_u64()) else {
        return vec![(
            format!("a logprobs token in step {of}"),
            "no logprobs there".into(),
        )];
    };
    let same = |t: &Value| {
        (banned["token"].is_string() && t["token"] == banned["token"])
            || (banned["id"].is_u64() && t["id"] == banned["id"])
    };
    let name = banned.get("token").unwrap_or(&banned["id"]).to_string();
    on.iter()
        .filter(|&&i| i != of)
        .filter_map(|&i| {
            let r = Reply::of(&steps[i]);
            if r.logprobs.is_empty() {
                return Some((format!("logprobs in step {i}"), "no logprobs".into()));
            }
            let at = r.logprobs.iter().position(same)?;
            Some((
                format!("no token {name} (banned)"),
                format!(
                    "step {i}: token {at} is {name}; content {}",
                    clip(&r.content)
                ),
            ))
        })
        .collect()
}

/// Scenario `parallel_alone` holds the parallel replies first and then
/// each request's reply alone, in the same order. Subject k fails when
/// its text shares a longer prefix with another request's reply alone
/// than with its own.
pub(super) fn own_reply(steps: &[Exchange], on: &[usize]) -> Vec<Mismatch> {
    let n = steps.len() / 2;
    let text = |i: usize| {
        let r = Reply::of(&steps[i]);
        format!("{}\n{}", r.reasoning, r.content)
    };
    let alone: Vec<String> = (n..2 * n).map(text).collect();
    let common = |a: &str, b: &str| a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    on.iter()
        .filter(|&&k| k < n)
        .filter_map(|&k| {
            let got = text(k);
            let own = common(&got, &alone[k]);
            let (j, other) = (0..n)
                .filter(|&j| j != k)
                .map(|j| (j, common(&got, &alone[j])))
                .max_by_key(|&(_, c)| c)?;
            (other > own).then(|| {
                (
                    format!("request {k}'s reply close to its own reply alone"),
                    format!(
                        "it is request {j}'s ({other} characters in common, {own} with its own): {}",
                        clip(&got)
                    ),
                )
            })
        })
        .collect()
}

/// The compared text of a reply; tool calls as `name(arguments)` with
/// the arguments' JSON normalized.
fn field_of(r: &Reply, f: Field) -> String {
    match f {
        Field::Content => r.content.clone(),
        Field::Reasoning => r.reasoning.clone(),
        Field::Text => format!("{}{}", r.reasoning, r.content),
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::protocol::exchange::Exchange;
    use crate::suite::checks::fixtures::{chat_body, chat_message, chat_reply};
    use crate::suite::checks::{Check, CheckSpec, Field};

    fn spec(check: Check) -> CheckSpec {
        CheckSpec { check, step: None }
    }

    /// A reply with these prompt and completion token counts.
    fn used(prompt: u64, completion: u64) -> Exchange {
        chat_body(
            json!({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                "total_tokens": prompt + completion}}),
        )
    }

    #[test]
    fn a_stop_sequence_must_cut_before_its_word() {
        let spec = spec(Check::StopsBeforeReplyWord { of: 0 });
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
    fn a_stop_cuts_at_its_first_occurrence_and_a_missing_one_cuts_nothing() {
        let spec = spec(Check::StoppedAtStop { of: 0 });
        let full = chat_reply("Say hello.\nThen stopping here.");
        let run = |stop: serde_json::Value, got: &str| {
            let mut ex = chat_reply(got);
            ex.request = json!({"stop": stop});
            spec.evaluate(&[full.clone(), ex], &[1]).len()
        };
        // Inside a word, on a newline, the earliest of several.
        assert_eq!(run(json!(["ell"]), "Say h"), 0);
        assert_eq!(
            run(json!("ell"), "Say hello."),
            1,
            "a stop inside a word ignored"
        );
        assert_eq!(run(json!(["\n"]), "Say hello."), 0);
        assert_eq!(
            run(json!(["\n"]), "Say hello.\nThen"),
            1,
            "the newline ignored"
        );
        assert_eq!(run(json!(["here", "Then"]), "Say hello.\n"), 0);
        // A near miss or an empty list: the whole reply.
        let whole = "Say hello.\nThen stopping here.";
        assert_eq!(run(json!(["stoppinx"]), whole), 0);
        assert_eq!(
            run(json!(["stoppinx"]), "Say hello.\nThen "),
            1,
            "fired on a near miss"
        );
        assert_eq!(run(json!([]), whole), 0);
        assert_eq!(run(json!([]), ""), 1, "an empty list stopped at once");
        // A stop met first in a thinking model's reasoning.
        let mut thought = chat_reply("Fruits: apple");
        thought.body["choices"][0]["message"]["reasoning_content"] = json!("Think.\nList.");
        let mut cut_there = chat_reply("");
        cut_there.body["choices"][0]["message"]["reasoning_content"] = json!("Think.");
        cut_there.request = json!({"stop": ["\n"]});
        assert!(spec
            .evaluate(&[thought.clone(), cut_there], &[1])
            .is_empty());
        let mut cut_nowhere = chat_reply("");
        cut_nowhere.body["choices"][0]["message"]["reasoning_content"] = json!("Think.\nList.");
        cut_nowhere.request = json!({"stop": ["\n"]});
        assert_eq!(spec.evaluate(&[thought, cut_nowhere], &[1]).len(), 1);
        // A stop in neither the reasoning nor the content must leave the
        // content whole: the newline between a thinking model's reasoning
        // and its answer is in neither.
        let mut answered = chat_reply("apple, pear");
        answered.body["choices"][0]["message"]["reasoning_content"] = json!("I list.\n");
        let mut emptied = chat_reply("");
        emptied.body["choices"][0]["message"]["reasoning_content"] = json!("I list.\n");
        emptied.request = json!({"stop": ["\n"]});
        assert_eq!(spec.evaluate(&[answered.clone(), emptied], &[1]).len(), 1);
        let mut kept = answered.clone();
        kept.request = json!({"stop": ["\n"]});
        assert!(spec.evaluate(&[answered, kept], &[1]).is_empty());
    }

    #[test]
    fn a_parameter_that_must_change_the_reply_did() {
        let spec = spec(Check::DiffersFrom {
            of: 0,
            field: Field::Content,
        });
        let steps = [chat_reply("apple apple"), chat_reply("apple pear")];
        assert!(spec.evaluate(&steps, &[1]).is_empty());
        let steps = [chat_reply("apple apple"), chat_reply("apple apple")];
        assert_eq!(spec.evaluate(&steps, &[1]).len(), 1);
    }

    #[test]
    fn all_subjects_must_agree_and_one_failure_lists_them() {
        let spec = spec(Check::AllEqual {
            field: Field::Content,
        });
        let same = [chat_reply("4"), chat_reply("4"), chat_reply("4")];
        assert!(spec.evaluate(&same, &[0, 1, 2]).is_empty());
        let differ = [chat_reply("4"), chat_reply("5"), chat_reply("4")];
        let failures = spec.evaluate(&differ, &[0, 1, 2]);
        assert_eq!(failures.len(), 1);
        assert_eq!(failures[0].check, "all_equal");
        assert_eq!(failures[0].expected, "3 identical Content");
        assert_eq!(
            failures[0].actual,
            "2 different:\n[0] \"4\"\n[1] \"5\"\n[2] \"4\""
        );
    }

    #[test]
    fn tool_calls_are_compared_by_name_and_normalized_arguments() {
        let call = |args: &str| {
            chat_message(
                json!({"content": null, "tool_calls": [{"id": "c", "type": "function",
                "function": {"name": "f", "arguments": args}}]}),
            )
        };
        let spec = spec(Check::SameAs {
            of: 0,
            field: Field::ToolCalls,
        });
        let spaced = [call(r#"{"a":1}"#), call(r#"{ "a": 1 }"#)];
        assert!(spec.evaluate(&spaced, &[0, 1]).is_empty());
        let other = [call(r#"{"a":1}"#), call(r#"{"a":2}"#)];
        let failures = spec.evaluate(&other, &[0, 1]);
        assert_eq!(failures.len(), 1);
        assert_eq!(failures[0].actual, "step 1: \"f({\\\"a\\\":2})\"");
    }

    #[test]
    fn each_parallel_reply_holds_its_own_marker_only() {
        let spec = spec(Check::OwnMarker {
            marker: "tag-{{slot}}".into(),
        });
        let own = [chat_reply("tag-0: hi"), chat_reply("tag-1: hi")];
        assert!(spec.evaluate(&own, &[0, 1]).is_empty());
        let crossed = [chat_reply("tag-0: hi"), chat_reply("tag-1 and tag-0")];
        let failures = spec.evaluate(&crossed, &[0, 1]);
        assert_eq!(failures.len(), 1);
        assert_eq!(
            failures[0].expected,
            "slot 1: \"tag-1\" and no other slot's marker"
        );
        let lost = [chat_reply("hi"), chat_reply("tag-1: hi")];
        assert_eq!(spec.evaluate(&lost, &[0, 1]).len(), 1);
    }

    #[test]
    fn a_later_prompt_holds_the_earlier_turn() {
        let with_reply = spec(Check::PromptHoldsHistory {
            of: 0,
            with_reply: true,
        });
        let turn = used(20, 10);
        assert!(with_reply
            .evaluate(&[turn.clone(), used(31, 1)], &[1])
            .is_empty());
        let failures = with_reply.evaluate(&[turn.clone(), used(30, 1)], &[1]);
        assert_eq!(failures.len(), 1);
        assert_eq!(
            failures[0].expected,
            "more than 30 prompt tokens (20 + 10 of step 0)"
        );
        let without_reply = spec(Check::PromptHoldsHistory {
            of: 0,
            with_reply: false,
        });
        assert!(without_reply
            .evaluate(&[turn.clone(), used(21, 1)], &[1])
            .is_empty());
        assert_eq!(without_reply.evaluate(&[turn, used(20, 1)], &[1]).len(), 1);
    }
}
