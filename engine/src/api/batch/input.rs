//! A batch input file read into its requests, checked as OpenAI checks
//! it. As OpenAI does, a bad file does not make `POST /v1/batches` fail:
//! the batch is created, and its validation (in the runner, before any
//! line runs) ends it `failed` with the problems in `errors.data`, each
//! with its code and 1-based `line`: `invalid_json_line`,
//! `missing_required_parameter`, `invalid_value`, `url_mismatch`,
//! `duplicate_custom_id`, `model_mismatch`, `empty_file`,
//! `too_many_tasks`. Whether each body is a valid request is left to the
//! endpoint's own handler when the line runs: a bad body fails that line
//! alone (the error file), as a bad interactive request fails alone.

use std::collections::HashSet;

use serde_json::{json, Map, Value};

/// Requests one batch may hold (OpenAI's limit).
pub const MAX_REQUESTS: usize = 50_000;
/// Problems reported at most: enough to fix a file, bounded whatever its
/// size.
const MAX_ERRORS: usize = 100;

/// One request of a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchLine {
    pub custom_id: String,
    pub body: Map<String, Value>,
}

/// One problem of an input file: an entry of the batch's `errors.data`.
#[derive(Debug, Clone, PartialEq)]
pub struct LineError {
    pub code: &'static str,
    pub message: String,
    pub param: Option<&'static str>,
    pub line: Option<usize>,
}

impl LineError {
    fn at(line: usize, code: &'static str, param: Option<&'static str>, message: String) -> Self {
        LineError {
            code,
            message,
            param,
            line: Some(line),
        }
    }

    pub fn json(&self) -> Value {
        json!({
            "code": self.code,
            "message": self.message,
            "param": self.param,
            "line": self.line,
        })
    }
}

/// The file's requests, or every problem found (at most [`MAX_ERRORS`]).
/// Blank lines are skipped; `endpoint` is the batch's, which every line's
/// `url` must name.
pub fn read_lines(content: &[u8], endpoint: &str) -> Result<Vec<BatchLine>, Vec<LineError>> {
    let mut lines = Vec::new();
    let mut errors = Vec::new();
    let mut seen = HashSet::new();
    let mut model: Option<(String, usize)> = None;
    for (i, raw) in content.split(|&b| b == b'\n').enumerate() {
        let n = i + 1;
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if errors.len() >= MAX_ERRORS {
            break;
        }
        let line = match read_line(raw, n, endpoint) {
            Ok(line) => line,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        if !seen.insert(line.custom_id.clone()) {
            errors.push(LineError::at(
                n,
                "duplicate_custom_id",
                Some("custom_id"),
                format!(
                    "The custom_id '{}' is used by an earlier line; each must be unique in a batch.",
                    line.custom_id
                ),
            ));
            continue;
        }
        if let Some(m) = line.body.get("model").and_then(Value::as_str) {
            match &model {
                None => model = Some((m.to_string(), n)),
                Some((first, at)) if first != m => errors.push(LineError::at(
                    n,
                    "model_mismatch",
                    Some("body.model"),
                    format!(
                        "The model '{m}' differs from line {at}'s '{first}'; a batch runs one model."
                    ),
                )),
                Some(_) => {}
            }
        }
        lines.push(line);
    }
    if errors.is_empty() && lines.is_empty() {
        errors.push(LineError {
            code: "empty_file",
            message: "The input file has no requests.".into(),
            param: None,
            line: None,
        });
    }
    if errors.is_empty() && lines.len() > MAX_REQUESTS {
        errors.push(LineError {
            code: "too_many_tasks",
            message: format!(
                "The input file has {} requests; a batch may have at most {MAX_REQUESTS}.",
                lines.len()
            ),
            param: None,
            line: None,
        });
    }
    match errors.is_empty() {
        true => Ok(lines),
        false => Err(errors),
    }
}

/// One line: `{custom_id, method: "POST", url, body}`.
fn read_line(raw: &[u8], n: usize, endpoint: &str) -> Result<BatchLine, LineError> {
    let Ok(Value::Object(mut fields)) = serde_json::from_slice::<Value>(raw) else {
        return Err(LineError::at(
            n,
            "invalid_json_line",
            None,
            "This line is not parseable as a JSON object.".into(),
        ));
    };
    let mut field = |name: &'static str| {
        fields.remove(name).ok_or_else(|| {
            LineError::at(
                n,
                "missing_required_parameter",
                Some(name),
                format!("The line has no '{name}'."),
            )
        })
    };
    let (custom_id, method, url, body) = (
        field("custom_id")?,
        field("method")?,
        field("url")?,
        field("body")?,
    );
    let invalid = |param: &'static str, message: String| {
        Err(LineError::at(n, "invalid_value", Some(param), message))
    };
    let custom_id = match custom_id {
        Value::String(s) if !s.is_empty() => s,
        _ => return invalid("custom_id", "custom_id must be a non-empty string.".into()),
    };
    if method != "POST" {
        return invalid("method", format!("method must be \"POST\", not {method}."));
    }
    if url != endpoint {
        return Err(LineError::at(
            n,
            "url_mismatch",
            Some("url"),
            format!("The url {url} is not the batch's endpoint \"{endpoint}\"."),
        ));
    }
    let Value::Object(body) = body else {
        return invalid("body", "body must be a JSON object.".into());
    };
    Ok(BatchLine { custom_id, body })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHAT: &str = "/v1/chat/completions";

    fn line(id: &str) -> String {
        json!({"custom_id": id, "method": "POST", "url": CHAT,
               "body": {"messages": [{"role": "user", "content": "hi"}]}})
        .to_string()
    }

    fn codes(content: &str) -> Vec<(&'static str, Option<usize>)> {
        read_lines(content.as_bytes(), CHAT)
            .unwrap_err()
            .iter()
            .map(|e| (e.code, e.line))
            .collect()
    }

    #[test]
    fn good_lines_become_requests_and_blank_lines_are_skipped() {
        let content = format!("{}\n\n{}\r\n", line("a"), line("b"));
        let lines = read_lines(content.as_bytes(), CHAT).unwrap();
        let ids: Vec<&str> = lines.iter().map(|l| l.custom_id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(lines[0].body["messages"][0]["content"], "hi");
    }

    #[test]
    fn each_bad_line_is_named_with_its_code_and_line_number() {
        let content = [
            line("a"),
            "not json".into(),
            "[1, 2]".into(),
            json!({"method": "POST", "url": CHAT, "body": {}}).to_string(),
            json!({"custom_id": "e", "method": "GET", "url": CHAT, "body": {}}).to_string(),
            json!({"custom_id": "f", "method": "POST", "url": "/v1/embeddings", "body": {}})
                .to_string(),
            json!({"custom_id": "g", "method": "POST", "url": CHAT, "body": "x"}).to_string(),
            line("a"),
            json!({"custom_id": 7, "method": "POST", "url": CHAT, "body": {}}).to_string(),
        ]
        .join("\n");
        assert_eq!(
            codes(&content),
            [
                ("invalid_json_line", Some(2)),
                ("invalid_json_line", Some(3)),
                ("missing_required_parameter", Some(4)),
                ("invalid_value", Some(5)),
                ("url_mismatch", Some(6)),
                ("invalid_value", Some(7)),
                ("duplicate_custom_id", Some(8)),
                ("invalid_value", Some(9)),
            ]
        );
        let e = &read_lines(content.as_bytes(), CHAT).unwrap_err()[2];
        assert_eq!(e.param, Some("custom_id"));
        assert_eq!(e.json()["line"], 4);
    }

    #[test]
    fn an_empty_file_and_mixed_models_fail_the_batch() {
        assert_eq!(codes(""), [("empty_file", None)]);
        assert_eq!(codes("\n  \n"), [("empty_file", None)]);
        let with_model = |id: &str, m: &str| {
            json!({"custom_id": id, "method": "POST", "url": CHAT, "body": {"model": m}})
                .to_string()
        };
        let content = [
            with_model("a", "x"),
            with_model("b", "x"),
            with_model("c", "y"),
        ]
        .join("\n");
        assert_eq!(codes(&content), [("model_mismatch", Some(3))]);
    }

    #[test]
    fn the_error_list_is_bounded() {
        let content = "x\n".repeat(MAX_ERRORS * 3);
        assert_eq!(
            read_lines(content.as_bytes(), CHAT).unwrap_err().len(),
            MAX_ERRORS
        );
    }
}
