//! Call objects written as JSON, shared by the JSON-based formats:
//! `{"name": "f", "arguments": {..}}` (or `"parameters"`), one after another.

use serde_json::Value;

use super::{BodyScan, CallScan, RawArg};
use crate::parsers::json_scan::{scan_object, skip_ws};

/// Keys that hold a call's arguments.
const ARG_KEYS: [&str; 2] = ["arguments", "parameters"];

/// Reads call objects from `body[pos..]`, separated by whitespace, `;` or
/// `,`, until something else. Returns where it stopped.
///
/// The first object is reported while it streams. A later object is
/// reported once complete, and dropped (counted) when it repeats the object
/// before it verbatim, the `{..}{..}` duplication some models produce.
pub fn scan_objects(body: &str, mut pos: usize, complete: bool, out: &mut BodyScan) -> usize {
    let b = body.as_bytes();
    let mut previous: Option<Value> = None;
    loop {
        pos = skip_ws(b, pos);
        if b.get(pos) != Some(&b'{') {
            return pos;
        }
        let outer = scan_object(body, pos);
        if outer.invalid && outer.members.is_empty() {
            return pos;
        }
        let Some(end) = outer.end else {
            if previous.is_none() {
                out.calls.push(call_of(body, &outer, complete));
            }
            return body.len();
        };
        let value: Option<Value> = serde_json::from_str(&body[pos..end]).ok();
        let repeated = previous.is_some() && value.is_some() && previous == value;
        if repeated {
            out.repeated_calls += 1;
        } else {
            out.calls.push(call_of(body, &outer, true));
        }
        previous = value.or(Some(Value::Null));
        pos = skip_ws(b, end);
        while matches!(b.get(pos), Some(b';') | Some(b',')) {
            pos = skip_ws(b, pos + 1);
        }
    }
}

fn call_of(
    body: &str,
    outer: &crate::parsers::json_scan::ObjectScan<'_>,
    closed: bool,
) -> CallScan {
    let mut call = CallScan {
        closed: closed || outer.end.is_some(),
        ..CallScan::default()
    };
    for (key, raw) in &outer.members {
        if key == "name" && call.name.is_none() {
            call.name = serde_json::from_str::<String>(raw).ok();
        }
    }
    let args = outer
        .members
        .iter()
        .find(|(k, _)| ARG_KEYS.contains(&k.as_str()))
        .map(|(_, raw)| (*raw, true))
        .or_else(|| {
            outer
                .pending
                .as_ref()
                .filter(|(k, _)| ARG_KEYS.contains(&k.as_str()))
                .map(|(_, start)| (&body[*start..], false))
        });
    if let Some((raw, value_complete)) = args {
        if raw.starts_with('{') {
            let inner = scan_object(raw, 0);
            call.members = inner
                .members
                .iter()
                .map(|(k, v)| (k.clone(), raw_arg(v)))
                .collect();
        } else if value_complete && raw.starts_with('"') {
            // Arguments as a JSON-encoded string, possibly holding the
            // object more than once: every object's members, in order.
            if let Ok(text) = serde_json::from_str::<String>(raw) {
                for obj in serde_json::Deserializer::from_str(&text).into_iter::<Value>() {
                    match obj {
                        Ok(Value::Object(map)) => call
                            .members
                            .extend(map.into_iter().map(|(k, v)| (k, RawArg::Json(v)))),
                        _ => break,
                    }
                }
            }
        }
    }
    call
}

/// A member value: JSON when it parses, else its text (e.g. Python's
/// `True`), which coercion may still convert.
pub fn raw_arg(raw: &str) -> RawArg {
    serde_json::from_str(raw)
        .map(RawArg::Json)
        .unwrap_or_else(|_| RawArg::Text(raw.to_string()))
}
