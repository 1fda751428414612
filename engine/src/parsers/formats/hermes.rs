//! `hermes`: `<tool_call>\n{"name": "f", "arguments": {..}}\n</tool_call>`,
//! one region per call (Qwen2.5, Qwen3, NousResearch Hermes templates).

use super::json_calls::scan_objects;
use super::BodyScan;

pub fn scan(body: &str, complete: bool) -> BodyScan {
    let mut out = BodyScan::default();
    scan_objects(body, 0, complete, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parsers::formats::RawArg;
    use serde_json::json;

    #[test]
    fn streams_members_and_closes() {
        let partial = scan(
            "\n{\"name\": \"f\", \"arguments\": {\"a\": 1, \"b\": 2",
            false,
        );
        assert_eq!(partial.calls.len(), 1);
        assert_eq!(partial.calls[0].name.as_deref(), Some("f"));
        assert_eq!(
            partial.calls[0].members,
            vec![("a".into(), RawArg::Json(json!(1)))]
        );
        assert!(!partial.calls[0].closed);
        let whole = scan(
            "\n{\"name\": \"f\", \"arguments\": {\"a\": 1, \"b\": 2}}\n",
            true,
        );
        assert_eq!(whole.calls[0].members.len(), 2);
        assert!(whole.calls[0].closed);
    }

    #[test]
    fn a_verbatim_repeat_is_one_call() {
        let one = r#"{"name": "f", "arguments": {"a": 1}}"#;
        let s = scan(&format!("{one}{one}"), true);
        assert_eq!((s.calls.len(), s.repeated_calls), (1, 1));
        let two = r#"{"name": "f", "arguments": {"a": 2}}"#;
        assert_eq!(scan(&format!("{one}\n{two}"), true).calls.len(), 2);
    }
}
