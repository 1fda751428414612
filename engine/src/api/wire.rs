//! Reading a protocol's JSON: the body into its request type, and the
//! required string fields of its parts, each failure a 400 naming what is
//! wrong and where.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::error::ApiError;

/// A request body: JSON, an object, then the protocol's request type.
pub fn read_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}"), None))?;
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the body must be a JSON object",
            None,
        ));
    }
    serde_json::from_value(value)
        .map_err(|e| ApiError::bad_request(format!("invalid request: {e}"), None))
}

/// `v[key]` as a string; `at` names `v` in the error.
pub fn string_field(v: &Value, key: &str, at: &str) -> Result<String, ApiError> {
    v.get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| ApiError::invalid_param(&format!("{at}.{key}"), "must be a string"))
}
