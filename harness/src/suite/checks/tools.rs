//! Checks on tool calls: how many and which, none, arguments valid
//! against the offered tool, ids (`tool_call`, `no_tool_calls`,
//! `tool_args`, `tool_call_ids`).

use std::collections::BTreeSet;

use serde_json::Value;

use super::json::schema_errors;
use crate::outcome::{clip, ensure, Outcome};
use crate::protocol::dialect::Dialect;
use crate::protocol::exchange::Exchange;
use crate::protocol::reply::{is_token_limit, Reply};

/// Exactly `count` calls (else at least one), the first named `name`.
pub(super) fn call(r: &Reply, name: Option<&str>, count: Option<usize>) -> Outcome {
    let n = r.tool_calls.len();
    match count {
        Some(c) => ensure(n == c, format!("{c} tool calls"), || {
            format!("{n}; content {}", clip(&r.content))
        })?,
        None => ensure(n > 0, "a tool call", || {
            format!("none; content {}", clip(&r.content))
        })?,
    }
    match (name, r.tool_calls.first()) {
        (Some(want), Some(c)) => ensure(c.name == want, format!("tool {want}"), || {
            format!("tool {}", c.name)
        }),
        _ => Ok(()),
    }
}

pub(super) fn none(r: &Reply) -> Outcome {
    ensure(r.tool_calls.is_empty(), "no tool calls", || {
        format!("{:?}", r.tool_calls)
    })
}

/// Each call's arguments: one JSON object, of a tool the request offered,
/// valid against its parameters (types included: "10" is not an integer).
/// A reply stopped at its token limit may end inside its last call, whose
/// arguments are then whatever the server makes of a cut object (the text
/// as written, healed JSON, or the keys that ended): that call must only
/// be an offered tool with a JSON object or the start of one, as a cut
/// JSON reply is held to no schema.
pub(super) fn args(ex: &Exchange, r: &Reply) -> Outcome {
    let tools = Dialect::of(ex).tool_schemas(&ex.request);
    let last = r.tool_calls.len().saturating_sub(1);
    let cut_at_limit = is_token_limit(r.finish_reason.as_deref());
    for (i, c) in r.tool_calls.iter().enumerate() {
        let cut = cut_at_limit && i == last;
        let schema = tools.get(&c.name).ok_or((
            "a call of an offered tool".to_string(),
            format!("unknown tool {:?}", c.name),
        ))?;
        let args: Value = match serde_json::from_str(&c.arguments) {
            Ok(args) => args,
            Err(e) if e.is_eof() && cut => continue,
            Err(e) => {
                return Err((
                    "arguments: one JSON object".to_string(),
                    format!("{}: {e}: {}", c.name, clip(&c.arguments)),
                ))
            }
        };
        ensure(args.is_object(), "arguments: a JSON object", || {
            format!("{}: {}", c.name, clip(&c.arguments))
        })?;
        if !cut {
            schema_errors(schema, &args).map_err(|(e, a)| (e, format!("{}: {a}", c.name)))?;
        }
    }
    Ok(())
}

/// Ids present and distinct, and each call's id and name sent once in a
/// stream (a repeat would open a second call in a client).
pub(super) fn ids(r: &Reply) -> Outcome {
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

/// At most `max` calls.
pub(super) fn at_most(r: &Reply, max: usize) -> Outcome {
    let n = r.tool_calls.len();
    ensure(n <= max, format!("at most {max} tool calls"), || {
        let names: Vec<&str> = r.tool_calls.iter().map(|c| c.name.as_str()).collect();
        format!("{n}: {}", names.join(", "))
    })
}

/// `function.arguments` is a string wherever it is sent: in the whole
/// reply's calls, or in each streamed delta that carries it.
pub(super) fn arguments_are_strings(ex: &Exchange) -> Outcome {
    let calls = |v: &Value, at: &str| -> Vec<Value> {
        v["choices"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|c| c[at]["tool_calls"].as_array().cloned().unwrap_or_default())
            .collect()
    };
    let mut sent: Vec<Value> = calls(&ex.body, "message");
    for chunk in &ex.chunks {
        sent.extend(calls(chunk, "delta"));
    }
    let bad = sent.iter().find(|c| {
        c["function"]
            .get("arguments")
            .is_some_and(|a| !a.is_string())
    });
    ensure(bad.is_none(), "function.arguments as a JSON string", || {
        format!(
            "{}",
            bad.map_or(Value::Null, |c| c["function"]["arguments"].clone())
        )
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use crate::protocol::exchange::Exchange;
    use crate::suite::checks::fixtures::{chat_message, chat_reply, chat_stream};
    use crate::suite::checks::{check_one, Check};

    /// A reply calling `(id, name, arguments)`, to a request offering
    /// `get_weather(city: string, days: integer)`.
    fn calls(calls: &[(&str, &str, &str)]) -> Exchange {
        let calls: Vec<Value> = calls
            .iter()
            .map(|(id, name, args)| {
                json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
            })
            .collect();
        let mut ex = chat_message(json!({"content": null, "tool_calls": calls}));
        ex.request = json!({"tools": [{"type": "function", "function": {"name": "get_weather",
            "parameters": {"type": "object", "required": ["city"], "properties": {
                "city": {"type": "string"}, "days": {"type": "integer"}}}}}]});
        ex
    }

    #[test]
    fn calls_are_counted_and_the_first_named() {
        let one = calls(&[("c1", "get_weather", "{}")]);
        let any = Check::ToolCall {
            name: None,
            count: None,
        };
        assert_eq!(check_one(&any, &one), Ok(()));
        assert_eq!(
            check_one(&any, &chat_reply("sunny")).unwrap_err().0,
            "a tool call"
        );
        let two = Check::ToolCall {
            name: None,
            count: Some(2),
        };
        assert_eq!(check_one(&two, &one).unwrap_err().0, "2 tool calls");
        let named = |name: &str| Check::ToolCall {
            name: Some(name.into()),
            count: None,
        };
        assert_eq!(check_one(&named("get_weather"), &one), Ok(()));
        assert_eq!(
            check_one(&named("get_time"), &one),
            Err(("tool get_time".into(), "tool get_weather".into()))
        );
        assert_eq!(check_one(&Check::NoToolCalls, &chat_reply("sunny")), Ok(()));
        assert!(check_one(&Check::NoToolCalls, &one).is_err());
    }

    #[test]
    fn arguments_must_fit_the_offered_tool() {
        let args = |a: &str| check_one(&Check::ToolArgs, &calls(&[("c1", "get_weather", a)]));
        assert_eq!(args(r#"{"city": "Oslo", "days": 3}"#), Ok(()));
        let (expected, actual) = args(r#"{"city": "Oslo", "days": "3"}"#).unwrap_err();
        assert_eq!(expected, "valid against the schema");
        assert!(actual.starts_with("get_weather: "), "{actual}");
        assert_eq!(
            args(r#"["Oslo"]"#).unwrap_err().0,
            "arguments: a JSON object"
        );
        assert_eq!(
            args(r#"{"city": "#).unwrap_err().0,
            "arguments: one JSON object"
        );
        let unknown = calls(&[("c1", "get_time", "{}")]);
        assert_eq!(
            check_one(&Check::ToolArgs, &unknown),
            Err((
                "a call of an offered tool".into(),
                "unknown tool \"get_time\"".into()
            ))
        );
    }

    #[test]
    fn only_a_call_cut_by_the_token_limit_may_miss_its_arguments() {
        let cut = |calls_: &[(&str, &str, &str)], finish: &str| {
            let mut ex = calls(calls_);
            ex.body["choices"][0]["finish_reason"] = json!(finish);
            check_one(&Check::ToolArgs, &ex)
        };
        // The last call, cut: the keys that ended, or the text as written.
        assert_eq!(cut(&[("c1", "get_weather", "{}")], "length"), Ok(()));
        assert_eq!(
            cut(&[("c1", "get_weather", r#"{"city": "Os"#)], "length"),
            Ok(())
        );
        // The same calls in a reply that ended by itself are wrong.
        assert_eq!(
            cut(&[("c1", "get_weather", "{}")], "tool_calls")
                .unwrap_err()
                .0,
            "valid against the schema"
        );
        // A cut reply's earlier calls ended, and are judged whole.
        assert_eq!(
            cut(
                &[("c1", "get_weather", "{}"), ("c2", "get_weather", "{}")],
                "length"
            )
            .unwrap_err()
            .0,
            "valid against the schema"
        );
        // Cut or not: no second object after the first, no unknown tool.
        assert_eq!(
            cut(
                &[("c1", "get_weather", r#"{"city": "Oslo"}{"city"#)],
                "length"
            )
            .unwrap_err()
            .0,
            "arguments: one JSON object"
        );
        assert_eq!(
            cut(&[("c1", "get_time", "{}")], "length").unwrap_err().0,
            "a call of an offered tool"
        );
    }

    #[test]
    fn ids_are_present_distinct_and_sent_once() {
        let distinct = calls(&[("c1", "get_weather", "{}"), ("c2", "get_weather", "{}")]);
        assert_eq!(check_one(&Check::ToolCallIds, &distinct), Ok(()));
        let same = calls(&[("c1", "get_weather", "{}"), ("c1", "get_weather", "{}")]);
        assert_eq!(
            check_one(&Check::ToolCallIds, &same).unwrap_err().0,
            "distinct ids"
        );
        let missing = chat_message(json!({"content": null, "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]}));
        assert_eq!(
            check_one(&Check::ToolCallIds, &missing),
            Err(("an id on every call".into(), "0 ids for 1 calls".into()))
        );
        // A stream that sends the call's id again with its arguments.
        let mut repeated = chat_stream(&[]);
        repeated.chunks = vec![
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c1",
                "function": {"name": "get_weather", "arguments": ""}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c1",
                "function": {"arguments": "{}"}}]}}]}),
        ];
        assert_eq!(
            check_one(&Check::ToolCallIds, &repeated),
            Err((
                "each call's id and name sent once".into(),
                "1 repeated headers".into()
            ))
        );
    }

    #[test]
    fn arguments_must_be_strings_whole_and_streamed() {
        let text = chat_message(json!({"content": null, "tool_calls": [{"id": "c1",
            "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]}));
        assert_eq!(check_one(&Check::ArgumentsAreStrings, &text), Ok(()));
        let object = chat_message(json!({"content": null, "tool_calls": [{"id": "c1",
            "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]}));
        assert_eq!(
            check_one(&Check::ArgumentsAreStrings, &object),
            Err((
                "function.arguments as a JSON string".into(),
                "{\"a\":1}".into()
            ))
        );
        let mut streamed = chat_stream(&[]);
        streamed.chunks = vec![
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c1",
                "function": {"name": "f", "arguments": ""}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0,
                "function": {"arguments": {"a": 1}}}]}}]}),
        ];
        assert!(check_one(&Check::ArgumentsAreStrings, &streamed).is_err());
    }

    #[test]
    fn at_most_counts_the_calls() {
        let two = calls(&[("c1", "f", "{}"), ("c2", "g", "{}")]);
        assert!(check_one(&Check::AtMostCalls { max: 2 }, &two).is_ok());
        assert_eq!(
            check_one(&Check::AtMostCalls { max: 1 }, &two),
            Err(("at most 1 tool calls".into(), "2: f, g".into()))
        );
    }
}
