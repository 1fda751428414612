//! Checks on the reply as its protocol sends it, rather than on what it
//! says: the stream's event rules, characters kept whole across events,
//! Codex's item matching, and the vendor's published schema (`sse`,
//! `no_split_characters`, `item_ids`, `schema`).

use std::collections::BTreeSet;

use serde_json::Value;

use crate::outcome::{clip, ensure, Outcome};
use crate::protocol::dialect::Dialect;
use crate::protocol::exchange::Exchange;

/// Each protocol's own rules (see [`Dialect::stream_protocol`]).
pub(super) fn sse(ex: &Exchange) -> Outcome {
    Dialect::of(ex).stream_protocol(ex)
}

/// Codex's matching of a Responses reply ([`Check::ItemIds`]): items by
/// `id`, function calls by `call_id`, namespaced tools by `namespace`.
///
/// [`Check::ItemIds`]: super::Check::ItemIds
pub(super) fn item_ids(ex: &Exchange) -> Outcome {
    // The items as the reply ends: the final response's (or the body's).
    let last = ex.chunks.last();
    let final_items: Vec<Value> = match last {
        Some(e) => e["response"]["output"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
        None => ex.body["output"].as_array().cloned().unwrap_or_default(),
    };
    ensure(
        !final_items.is_empty(),
        "a response with output items",
        || clip(&last.unwrap_or(&ex.body).to_string()),
    )?;
    let namespaces = namespaced_tools(&ex.request);
    for item in &final_items {
        ensure(
            item["id"].as_str().is_some_and(|id| !id.is_empty()),
            "every output item has an id",
            || clip(&item.to_string()),
        )?;
        if item["type"] == "function_call" {
            ensure(
                item["call_id"].as_str().is_some_and(|c| !c.is_empty()),
                "every function call has a call_id",
                || clip(&item.to_string()),
            )?;
            let name = item["name"].as_str().unwrap_or_default();
            let namespace = item["namespace"].as_str();
            ensure(
                keeps_namespace(&namespaces, name, namespace),
                "a call of an offered tool, in its namespace",
                || format!("name {name:?}, namespace {namespace:?}"),
            )?;
        }
    }
    let ids: BTreeSet<&str> = final_items
        .iter()
        .filter_map(|i| i["id"].as_str())
        .collect();
    ensure(ids.len() == final_items.len(), "distinct item ids", || {
        format!("{} items, {} ids", final_items.len(), ids.len())
    })?;
    // Streamed: what each event said of an item is what the end says.
    for e in &ex.chunks {
        let kind = e["type"].as_str().unwrap_or_default();
        let Some(index) = e["output_index"].as_u64() else {
            continue;
        };
        let Some(end) = final_items.get(index as usize) else {
            return Err((
                "events of items the final response holds".into(),
                clip(&e.to_string()),
            ));
        };
        let said = match kind {
            "response.output_item.added" | "response.output_item.done" => &e["item"]["id"],
            _ => &e["item_id"],
        };
        if !said.is_null() {
            ensure(said == &end["id"], "one id per item across events", || {
                format!("{kind} says {said}, the final response {}", end["id"])
            })?;
        }
        if kind == "response.output_item.done" && end["type"] == "function_call" {
            for field in ["call_id", "name", "namespace"] {
                ensure(
                    e["item"][field] == end[field],
                    "a call's call_id, name and namespace the same when done and at the end",
                    || {
                        format!(
                            "{field}: {} when done, {} at the end",
                            e["item"][field], end[field]
                        )
                    },
                )?;
            }
        }
    }
    Ok(())
}

/// Whether a call routes as Codex routes it: an offered tool in its own
/// namespace. A name that no offered tool has, whole or flattened with a
/// namespace, is the model's invention, which the server passes on as
/// said (Codex answers it with an "unsupported call" output): not the
/// wire's fault, so not this check's.
fn keeps_namespace(
    offered: &[(Option<String>, String)],
    name: &str,
    namespace: Option<&str>,
) -> bool {
    let exact = offered
        .iter()
        .any(|(ns, n)| n == name && ns.as_deref() == namespace);
    let mangled = offered.iter().any(|(ns, n)| {
        n == name
            || ns
                .as_deref()
                .is_some_and(|ns| name.contains(ns) && name.contains(n.as_str()))
    });
    exact || !mangled
}

/// The function tools of a Responses request: (namespace, name).
fn namespaced_tools(request: &Value) -> Vec<(Option<String>, String)> {
    let mut out = Vec::new();
    for t in request["tools"].as_array().into_iter().flatten() {
        match t["type"].as_str() {
            Some("namespace") => {
                for f in t["tools"].as_array().into_iter().flatten() {
                    if let (Some(ns), Some(n)) = (t["name"].as_str(), f["name"].as_str()) {
                        out.push((Some(ns.to_string()), n.to_string()));
                    }
                }
            }
            _ => {
                if let Some(n) = t["name"].as_str() {
                    out.push((None, n.to_string()));
                }
            }
        }
    }
    out
}

/// A text delta ending in U+FFFD with another delta after it is a
/// multi-byte character split between events; one inside a delta is the
/// model's own bytes, and one at the very end a character cut by
/// `max_tokens`.
pub(super) fn no_split_characters(ex: &Exchange) -> Outcome {
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

/// The published schema as the official SDKs read it: a deviation here
/// breaks a client (the check's `fail` grade, and what afm-bench counts).
pub(super) fn published_schema(ex: &Exchange) -> Outcome {
    let found = crate::protocol::spec_schemas::deviations(ex).breaking;
    ensure(
        found.is_empty(),
        "a reply the official SDKs read (the published schema, as they read it)",
        || found.join("\n"),
    )
}

/// The published schema's letter, where the SDKs' reading found nothing:
/// what the case's `spec` grade shows.
pub(super) fn schema_letter(ex: &Exchange) -> Outcome {
    let found = crate::protocol::spec_schemas::deviations(ex).letter;
    ensure(
        found.is_empty(),
        "a reply that validates against the published schema",
        || found.join("\n"),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::suite::checks::fixtures::{chat_body, chat_stream};
    use crate::suite::checks::{check_one, Check, CheckSpec};

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

    #[test]
    fn a_chat_stream_must_end_with_done() {
        let mut ex = chat_stream(&[]);
        ex.chunks = vec![
            json!({"id": "c", "object": "chat.completion.chunk",
                "choices": [{"delta": {"role": "assistant", "content": "Hi"}, "finish_reason": null}]}),
            json!({"id": "c", "object": "chat.completion.chunk",
                "choices": [{"delta": {}, "finish_reason": "stop"}]}),
        ];
        assert_eq!(
            check_one(&Check::Sse, &ex),
            Err(("data: [DONE] last".into(), "no [DONE]".into()))
        );
        ex.done_marker = true;
        assert_eq!(check_one(&Check::Sse, &ex), Ok(()));
    }

    #[test]
    fn a_reply_missing_a_required_field_fails_the_published_schema() {
        let mut body = json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": null,
                "message": {"role": "assistant", "content": "hi", "refusal": null}}],
        });
        assert_eq!(check_one(&Check::Schema, &chat_body(body.clone())), Ok(()));
        body.as_object_mut().unwrap().remove("created");
        let (expected, actual) = check_one(&Check::Schema, &chat_body(body)).unwrap_err();
        assert_eq!(
            expected,
            "a reply the official SDKs read (the published schema, as they read it)"
        );
        assert!(actual.contains("created"), "{actual}");
    }

    /// An explicit null the SDKs read as absent: the case is graded
    /// `spec`, with the letter's deviation; `check_one` (what afm-bench
    /// counts) passes it.
    #[test]
    fn an_explicit_null_is_graded_spec_not_fail() {
        let body = json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": null,
                "message": {"role": "assistant", "content": "hi", "refusal": null,
                    "function_call": null}}],
        });
        let ex = chat_body(body);
        assert_eq!(check_one(&Check::Schema, &ex), Ok(()));
        let spec = CheckSpec {
            check: Check::Schema,
            step: None,
        };
        let found = spec.evaluate(&[ex], &[0]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].grade, crate::suite::checks::Grade::Spec);
        assert!(found[0].actual.contains("function_call"), "{found:?}");
    }

    #[test]
    fn a_call_whose_ids_drift_or_whose_namespace_is_lost_fails_item_ids() {
        let request = json!({"tools": [
            {"type": "function", "name": "exec_command"},
            {"type": "namespace", "name": "multi_agent_v1", "tools": [{"type": "function", "name": "spawn_agent"}]}
        ]});
        let call = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
            "name": "spawn_agent", "namespace": "multi_agent_v1", "arguments": "{}", "status": "completed"});
        let stream = |done: serde_json::Value, end: serde_json::Value| {
            let mut ex = crate::suite::checks::fixtures::chat_stream(&[]);
            ex.path = "/v1/responses".into();
            ex.request = request.clone();
            ex.chunks = vec![
                json!({"type": "response.created", "response": {"id": "r", "output": []}}),
                json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "spawn_agent", "arguments": ""}}),
                json!({"type": "response.output_item.done", "output_index": 0, "item": done}),
                json!({"type": "response.completed", "response": {"id": "r", "output": [end]}}),
            ];
            ex
        };
        assert_eq!(
            check_one(&Check::ItemIds, &stream(call.clone(), call.clone())),
            Ok(())
        );
        let mut drifted = call.clone();
        drifted["call_id"] = json!("call_2");
        assert!(check_one(&Check::ItemIds, &stream(call.clone(), drifted)).is_err());
        let mut flat = call.clone();
        flat.as_object_mut().unwrap().remove("namespace");
        flat["name"] = json!("multi_agent_v1__spawn_agent");
        let (expected, _) = check_one(&Check::ItemIds, &stream(flat.clone(), flat)).unwrap_err();
        assert_eq!(expected, "a call of an offered tool, in its namespace");
        // A plain tool put in a namespace, or a namespaced one out of it.
        let mut moved = call.clone();
        moved["name"] = json!("exec_command");
        assert!(check_one(&Check::ItemIds, &stream(moved.clone(), moved)).is_err());
        let mut bare = call.clone();
        bare.as_object_mut().unwrap().remove("namespace");
        assert!(check_one(&Check::ItemIds, &stream(bare.clone(), bare)).is_err());
    }

    #[test]
    fn a_call_of_a_tool_the_model_invented_is_not_the_wire_s_fault() {
        let request = json!({"tools": [{"type": "function", "name": "exec_command"}]});
        let call = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
            "name": "workdir", "arguments": "{}", "status": "completed"});
        let mut ex = crate::suite::checks::fixtures::chat_stream(&[]);
        ex.path = "/v1/responses".into();
        ex.request = request;
        ex.chunks = vec![
            json!({"type": "response.output_item.done", "output_index": 0, "item": call.clone()}),
            json!({"type": "response.completed", "response": {"id": "r", "output": [call]}}),
        ];
        assert_eq!(check_one(&Check::ItemIds, &ex), Ok(()));
    }
}
