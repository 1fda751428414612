//! Checks on structured output: the content is JSON, and valid against
//! a schema (`json_valid`, `json_schema`). Tool arguments are validated
//! the same way ([`schema_errors`]).

use serde_json::Value;

use crate::outcome::{clip, ensure, Outcome};
use crate::protocol::dialect::Dialect;
use crate::protocol::exchange::Exchange;
use crate::protocol::reply::{is_token_limit, Reply};

/// Surrounding whitespace is allowed. A reply cut at its token limit
/// passes when what came is JSON so far: the server kept to the format,
/// and OpenAI's own docs say such content "may be partially cut off". The
/// length of a small model's answer is not the server's to judge.
pub(super) fn valid(r: &Reply) -> Outcome {
    parse(r).map(|_| ())
}

/// Against `schema`, or else the one the request asked for (its
/// protocol's `response_format`, `output_config` or `text.format`).
pub(super) fn schema(ex: &Exchange, r: &Reply, schema: Option<&Value>) -> Outcome {
    let schema = schema
        .cloned()
        .or_else(|| Dialect::of(ex).output_schema(&ex.request))
        .ok_or(("a schema".into(), "none in the case or request".into()))?;
    match parse(r)? {
        Some(value) => schema_errors(&schema, &value),
        // Cut at the limit: a value cannot be held against a schema whole.
        None => Ok(()),
    }
}

/// The content as one JSON value; `None` when it is a cut prefix of one
/// and the reply stopped at its token limit.
fn parse(r: &Reply) -> Result<Option<Value>, (String, String)> {
    let text = r.content.trim();
    match serde_json::from_str(text) {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.is_eof() && !text.is_empty() && is_token_limit(r.finish_reason.as_deref()) => {
            Ok(None)
        }
        Err(e) => Err(("valid JSON".into(), format!("{e}: {}", clip(&r.content)))),
    }
}

/// Every way `value` breaks `schema`, with where.
pub(super) fn schema_errors(schema: &Value, value: &Value) -> Outcome {
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
    use serde_json::json;

    use crate::suite::checks::fixtures::{chat_body, chat_reply};
    use crate::suite::checks::{check_one, Check};

    #[test]
    fn the_content_must_be_one_json_value() {
        assert_eq!(
            check_one(&Check::JsonValid, &chat_reply(" {\"a\": 1}\n")),
            Ok(())
        );
        let fenced = chat_reply("```json\n{\"a\": 1}\n```");
        assert_eq!(
            check_one(&Check::JsonValid, &fenced).unwrap_err().0,
            "valid JSON"
        );
    }

    #[test]
    fn a_reply_cut_at_its_limit_passes_only_as_json_so_far() {
        let cut = |content: &str, finish: &str| {
            chat_body(json!({"choices": [{"message": {"content": content},
                "finish_reason": finish}]}))
        };
        let prefix = "{\"name\": \"Tom\", \"looks\": {\"fur\": \"gr";
        assert_eq!(check_one(&Check::JsonValid, &cut(prefix, "length")), Ok(()));
        let schema = Check::JsonSchema {
            schema: Some(json!({"type": "object"})),
        };
        assert_eq!(check_one(&schema, &cut(prefix, "length")), Ok(()));
        // The same text said to be finished is broken JSON.
        assert!(check_one(&Check::JsonValid, &cut(prefix, "stop")).is_err());
        // Text that is no JSON prefix, or nothing at all, fails even when cut.
        assert!(check_one(&Check::JsonValid, &cut("Sure! {\"name\"", "length")).is_err());
        assert!(check_one(&Check::JsonValid, &cut("  ", "length")).is_err());
    }

    #[test]
    fn the_content_is_validated_against_the_requested_schema() {
        let schema = json!({"type": "object", "required": ["n"],
            "properties": {"n": {"type": "integer"}}});
        let reply = |content: &str| {
            let mut ex = chat_reply(content);
            ex.request = json!({"response_format": {"type": "json_schema",
                "json_schema": {"name": "n", "schema": schema}}});
            ex
        };
        let check = Check::JsonSchema { schema: None };
        assert_eq!(check_one(&check, &reply("{\"n\": 10}")), Ok(()));
        let (expected, actual) = check_one(&check, &reply("{\"n\": \"10\"}")).unwrap_err();
        assert_eq!(expected, "valid against the schema");
        assert!(actual.contains("/n"), "{actual}");
        assert_eq!(
            check_one(&check, &chat_reply("{}")),
            Err(("a schema".into(), "none in the case or request".into()))
        );
        let given = Check::JsonSchema {
            schema: Some(json!({"type": "array"})),
        };
        assert!(check_one(&given, &reply("{\"n\": 10}")).is_err());
    }
}
