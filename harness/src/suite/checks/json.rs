//! Checks on structured output: the content is JSON, and valid against
//! a schema (`json_valid`, `json_schema`). Tool arguments are validated
//! the same way ([`schema_errors`]).

use serde_json::Value;

use crate::outcome::{clip, ensure, Outcome};
use crate::protocol::dialect::Dialect;
use crate::protocol::exchange::Exchange;
use crate::protocol::reply::Reply;

/// Surrounding whitespace is allowed.
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
    let value = parse(r)?;
    schema_errors(&schema, &value)
}

fn parse(r: &Reply) -> Result<Value, (String, String)> {
    serde_json::from_str(r.content.trim())
        .map_err(|e| ("valid JSON".into(), format!("{e}: {}", clip(&r.content))))
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

    use crate::suite::checks::fixtures::chat_reply;
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
