//! `gemma4`: `<|tool_call>call:NAME{key:<|"|>text<|"|>,n:3,xs:[1,2]}<tool_call|>`.
//!
//! Keys are bare words; strings are wrapped in the `<|"|>` quote token;
//! numbers, booleans and null are bare; objects and arrays nest with the
//! same rules. Values are converted to JSON here.

use serde_json::{Map, Value};

use super::{BodyScan, CallScan, RawArg};

const QUOTE: &str = "<|\"|>";
const CALL: &str = "call:";

/// Every `call:NAME{...}` of a region body: a model may write several in
/// one `<|tool_call>` region (mlx-lm's and vllm-mlx's parsers read them
/// all) as well as one region per call.
pub fn scan(body: &str, complete: bool) -> BodyScan {
    let mut out = BodyScan::default();
    let mut from = 0;
    while let Some(c) = body[from..].find(CALL).map(|c| from + c) {
        let name_start = c + CALL.len();
        let Some(brace) = body[name_start..].find('{').map(|i| name_start + i) else {
            break;
        };
        let (call, end) = scan_call(body, name_start, brace);
        out.calls.push(call);
        match end {
            Some(end) => from = end,
            None => break,
        }
    }
    if let Some(last) = out.calls.last_mut() {
        last.closed |= complete;
    }
    out
}

/// One call whose name starts at `name_start` and arguments at `brace`;
/// with the offset past its closing brace once it has one.
fn scan_call(body: &str, name_start: usize, brace: usize) -> (CallScan, Option<usize>) {
    let mut call = CallScan {
        name: Some(body[name_start..brace].trim().to_string()),
        ..CallScan::default()
    };
    let mut i = brace + 1;
    loop {
        i = skip_ws(body, i);
        if body[i..].starts_with('}') {
            call.closed = true;
            return (call, Some(i + 1));
        }
        if body[i..].starts_with(',') {
            i += 1;
            continue;
        }
        let Some(colon) = body[i..].find(':').map(|k| i + k) else {
            break;
        };
        let key = unquote_key(body[i..colon].trim());
        let vstart = skip_ws(body, colon + 1);
        let Some(vend) = skip_value(body, vstart) else {
            break;
        };
        let after = skip_ws(body, vend);
        if !(body[after..].starts_with(',') || body[after..].starts_with('}')) {
            break;
        }
        let raw = &body[vstart..vend];
        let arg = match parse_value(raw) {
            Some((v, rest)) if rest.trim().is_empty() => RawArg::Json(v),
            _ => RawArg::Text(raw.to_string()),
        };
        call.members.push((key, arg));
        i = after;
    }
    (call, None)
}

fn skip_ws(s: &str, i: usize) -> usize {
    i + (s[i..].len() - s[i..].trim_start().len())
}

fn unquote_key(k: &str) -> String {
    let k = k
        .strip_prefix(QUOTE)
        .and_then(|k| k.strip_suffix(QUOTE))
        .unwrap_or(k);
    k.trim_matches('"').to_string()
}

/// Offset past the value at `s[i..]`; `None` while it may still grow.
fn skip_value(s: &str, i: usize) -> Option<usize> {
    let rest = &s[i..];
    if let Some(inner) = rest.strip_prefix(QUOTE) {
        return inner.find(QUOTE).map(|e| i + QUOTE.len() + e + QUOTE.len());
    }
    if rest.starts_with('"') {
        return crate::parsers::json_scan::skip_string(s.as_bytes(), i);
    }
    if rest.starts_with('{') || rest.starts_with('[') {
        let mut depth = 0usize;
        let mut j = i;
        while j < s.len() {
            let r = &s[j..];
            if r.starts_with(QUOTE) {
                j = skip_value(s, j)?;
                continue;
            }
            match r.as_bytes()[0] {
                b'"' => {
                    j = crate::parsers::json_scan::skip_string(s.as_bytes(), j)?;
                    continue;
                }
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(j + 1);
                    }
                }
                _ => {}
            }
            // A whole character: `j` stays on a boundary for `&s[j..]`.
            j += r.chars().next().map_or(1, char::len_utf8);
        }
        return None;
    }
    let end = rest.find([',', '}', ']']).map(|e| i + e)?;
    Some(end)
}

/// Parses one value at the start of `s`; returns it and the rest.
fn parse_value(s: &str) -> Option<(Value, &str)> {
    let s = s.trim_start();
    if let Some(inner) = s.strip_prefix(QUOTE) {
        let e = inner.find(QUOTE)?;
        return Some((
            Value::String(inner[..e].to_string()),
            &inner[e + QUOTE.len()..],
        ));
    }
    if s.starts_with('"') {
        let e = crate::parsers::json_scan::skip_string(s.as_bytes(), 0)?;
        let v: String = serde_json::from_str(&s[..e]).ok()?;
        return Some((Value::String(v), &s[e..]));
    }
    if let Some(mut rest) = s.strip_prefix('{') {
        let mut map = Map::new();
        loop {
            rest = rest.trim_start();
            if let Some(r) = rest.strip_prefix('}') {
                return Some((Value::Object(map), r));
            }
            if let Some(r) = rest.strip_prefix(',') {
                rest = r;
                continue;
            }
            let colon = rest.find(':')?;
            let key = unquote_key(rest[..colon].trim());
            let (v, r) = parse_value(&rest[colon + 1..])?;
            map.insert(key, v);
            rest = r;
        }
    }
    if let Some(mut rest) = s.strip_prefix('[') {
        let mut items = Vec::new();
        loop {
            rest = rest.trim_start();
            if let Some(r) = rest.strip_prefix(']') {
                return Some((Value::Array(items), r));
            }
            if let Some(r) = rest.strip_prefix(',') {
                rest = r;
                continue;
            }
            let (v, r) = parse_value(rest)?;
            items.push(v);
            rest = r;
        }
    }
    let end = s.find([',', '}', ']']).unwrap_or(s.len());
    let word = s[..end].trim();
    if word.is_empty() {
        return None;
    }
    let v = serde_json::from_str::<Value>(word)
        .ok()
        .filter(|v| !v.is_object() && !v.is_array())
        .unwrap_or_else(|| Value::String(word.to_string()));
    Some((v, &s[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn converts_values_to_json() {
        let body = r#"call:book{city:<|"|>Paris, FR<|"|>,n:3,ok:true,xs:[1,<|"|>a<|"|>],o:{k:<|"|>v}<|"|>,z:null}}"#;
        let s = scan(body, true);
        let c = &s.calls[0];
        assert_eq!(c.name.as_deref(), Some("book"));
        let got: Vec<_> = c
            .members
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("city", RawArg::Json(json!("Paris, FR"))),
                ("n", RawArg::Json(json!(3))),
                ("ok", RawArg::Json(json!(true))),
                ("xs", RawArg::Json(json!([1, "a"]))),
                ("o", RawArg::Json(json!({"k": "v}", "z": null}))),
            ]
        );
        assert!(c.closed);
    }

    #[test]
    fn partial_values_wait() {
        let s = scan(r#"call:f{a:<|"|>x, y"#, false);
        assert!(s.calls[0].members.is_empty());
        let s = scan(r#"call:f{a:12"#, false);
        assert!(s.calls[0].members.is_empty());
        let s = scan(r#"call:f{a:12,"#, false);
        assert_eq!(s.calls[0].members.len(), 1);
    }
}
