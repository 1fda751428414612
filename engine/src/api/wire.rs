//! Reading a protocol's JSON: the body into its request type, and the
//! required string fields of its parts, each failure a 400 naming what is
//! wrong and where. A `null` field means the field is absent, as the
//! OpenAI and Anthropic specifications allow and as clients that
//! serialize unset fields send it.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::error::ApiError;

/// A request body: JSON, an object, then the protocol's request type,
/// with every null member (at the top level and in the settings objects
/// the request types read) taken as absent.
pub fn read_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let mut value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}"), None))?;
    let Some(fields) = value.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the body must be a JSON object",
            None,
        ));
    };
    fields.retain(|_, v| !v.is_null());
    for settings in NULLABLE_SETTINGS {
        if let Some(obj) = fields.get_mut(*settings).and_then(Value::as_object_mut) {
            obj.retain(|_, v| !v.is_null());
        }
    }
    // Whole numbers written as floats (`"max_tokens": 3.0`) are integers to
    // every integer field; float fields read integers as well.
    for v in fields.values_mut() {
        if let Some(n) = integral(v).filter(|_| v.is_f64()) {
            *v = n.into();
        }
    }
    serde_json::from_value(value)
        .map_err(|e| ApiError::bad_request(format!("invalid request: {e}"), None))
}

/// Objects of settings whose own members may be null too (JSON Schemas and
/// messages are not among them: a null there can mean something).
const NULLABLE_SETTINGS: &[&str] = &[
    "stream_options",
    "thinking",
    "reasoning",
    "text",
    "output_config",
    "response_format",
];

/// A JSON number that is a whole number (`3` or `3.0`) in i64's range, as
/// clients that write every number as a float send counts and token ids.
pub fn integral(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18)
            .map(|f| f as i64)
    })
}

/// `v[key]` unless it is absent or null.
pub fn present<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.get(key).filter(|x| !x.is_null())
}

/// `v[key]` as a string; `at` names `v` in the error.
pub fn string_field(v: &Value, key: &str, at: &str) -> Result<String, ApiError> {
    v.get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| ApiError::invalid_param(&format!("{at}.{key}"), "must be a string"))
}

/// Checks that every field of `T` sent as `null` reads as if it were
/// absent: `read` gives the same result for `base` and for `base` with
/// the field null. `required` fields are left out (null is their absence,
/// which is an error of its own).
#[cfg(test)]
pub fn assert_nulls_mean_absent<T, R>(
    base: Value,
    required: &[&str],
    read: impl Fn(&[u8]) -> Result<R, ApiError>,
) where
    T: serde::Serialize + Default,
    R: std::fmt::Debug + PartialEq,
{
    let fields = serde_json::to_value(T::default()).expect("a request type serializes");
    let fields: Vec<&String> = fields.as_object().expect("an object").keys().collect();
    assert!(fields.len() > 5, "{fields:?}");
    let want = read(base.to_string().as_bytes()).expect("the base request reads");
    for field in fields
        .into_iter()
        .filter(|f| !required.contains(&f.as_str()))
    {
        let mut body = base.clone();
        body[field.as_str()] = Value::Null;
        let got = read(body.to_string().as_bytes())
            .unwrap_or_else(|e| panic!("{field}: null was refused: {}", e.message));
        assert_eq!(got, want, "{field}: null did not read as absent");
    }
    let mut body = base.clone();
    body["stream_options"] = serde_json::json!({"include_usage": null});
    if let Err(e) = read(body.to_string().as_bytes()) {
        panic!(
            "stream_options.include_usage: null was refused: {}",
            e.message
        );
    }
}
