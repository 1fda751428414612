//! A requested output format as a decoding constraint, whichever field a
//! protocol sends it in (`response_format`, `text.format`,
//! `output_config.format`).

use serde_json::Value;

use crate::api::error::ApiError;
use crate::runtime::Constraint;

/// A requested output format (`text`, `json_object`, `json_schema` with
/// its schema) as a constraint; `at` and `schema_at` name the fields in
/// errors.
pub fn output_format(
    format: &Value,
    at: &str,
    schema: Option<&Value>,
    schema_at: &str,
) -> Result<Option<Constraint>, ApiError> {
    match format.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(Constraint::JsonObject)),
        Some("json_schema") => {
            let schema = schema.cloned().ok_or_else(|| {
                ApiError::invalid_param(schema_at, "is required for type json_schema")
            })?;
            if !schema.is_object() && !schema.is_boolean() {
                return Err(ApiError::invalid_param(
                    schema_at,
                    "must be a JSON Schema object",
                ));
            }
            Ok(Some(Constraint::JsonSchema(schema)))
        }
        Some(other) => Err(ApiError::invalid_param(
            &format!("{at}.type"),
            format!("'{other}' is not one of text, json_object, json_schema"),
        )),
        None => Err(ApiError::invalid_param(
            &format!("{at}.type"),
            "is required (text, json_object or json_schema)",
        )),
    }
}
