//! `llama3_json`: the whole message is `{"name": "f", "parameters": {..}}`
//! (several separated by `;`), or the same after `<|python_tag|>`.

use super::json_calls::scan_objects;
use super::BodyScan;
use crate::parsers::json_scan::{scan_object, skip_ws};

pub fn scan(body: &str, complete: bool) -> BodyScan {
    let mut out = BodyScan::default();
    let start = skip_ws(body.as_bytes(), 0);
    // A message that merely starts with `{` is a call only if its first
    // key names a function.
    let first = scan_object(body, start);
    if first.invalid && first.members.is_empty() && first.pending.is_none() {
        out.not_a_call = start < body.len();
        return out;
    }
    let first_key = first
        .members
        .first()
        .map(|(k, _)| k.as_str())
        .or(first.pending.as_ref().map(|(k, _)| k.as_str()));
    match first_key {
        Some("name") | Some("type") => {}
        Some(_) => {
            out.not_a_call = true;
            return out;
        }
        None if complete => {
            out.not_a_call = true;
            return out;
        }
        None => return out,
    }
    scan_objects(body, start, complete, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_json_content_is_not_a_call() {
        assert!(scan("{\"answer\": 4}", true).not_a_call);
        assert!(!scan("{\"na", false).not_a_call);
        let s = scan(
            "{\"name\": \"f\", \"parameters\": {\"x\": 1}}; {\"name\": \"g\", \"parameters\": {}}",
            true,
        );
        assert_eq!(s.calls.len(), 2);
    }
}
