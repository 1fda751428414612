//! `qwen3_coder`: XML-style calls,
//! `<tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>\n</tool_call>`.
//!
//! Every value is text; the tool's schema decides its type. A parameter
//! ends at `</parameter>`, or, when the model leaves it open, at the next
//! `<parameter=` or `</function>`.

use super::{BodyScan, CallScan, RawArg};
use crate::parsers::coercion::decode_entities;

const FUNCTION: &str = "<function=";
const FUNCTION_END: &str = "</function>";
const PARAM: &str = "<parameter=";
const PARAM_END: &str = "</parameter>";

pub fn scan(body: &str, complete: bool) -> BodyScan {
    let mut out = BodyScan::default();
    let mut pos = 0;
    while let Some(f) = body[pos..].find(FUNCTION).map(|i| pos + i) {
        let name_start = f + FUNCTION.len();
        let Some(gt) = body[name_start..].find('>').map(|i| name_start + i) else {
            return out;
        };
        let mut call = CallScan {
            name: Some(body[name_start..gt].trim().to_string()),
            ..CallScan::default()
        };
        let function_end = body[gt..].find(FUNCTION_END).map(|i| gt + i);
        let limit = function_end.unwrap_or(body.len());
        let mut p = gt + 1;
        while let Some(k) = body[p..limit].find(PARAM).map(|i| p + i) {
            let key_start = k + PARAM.len();
            let Some(kgt) = body[key_start..limit].find('>').map(|i| key_start + i) else {
                break;
            };
            let value_start = kgt + 1;
            let rest = &body[value_start..limit];
            let explicit = rest.find(PARAM_END);
            let next = rest.find(PARAM);
            let (value_end, resume) = match (explicit, next) {
                (Some(e), Some(n)) if n < e => (n, n),
                (Some(e), _) => (e, e + PARAM_END.len()),
                (None, Some(n)) => (n, n),
                (None, None) if function_end.is_some() => (rest.len(), rest.len()),
                (None, None) => break, // still arriving (or cut off)
            };
            let key = body[key_start..kgt].trim().to_string();
            call.members
                .push((key, RawArg::Text(value_text(&rest[..value_end]))));
            p = value_start + resume;
        }
        call.closed = function_end.is_some() || complete;
        out.calls.push(call);
        match function_end {
            Some(e) => pos = e + FUNCTION_END.len(),
            None => return out,
        }
    }
    out
}

/// The value between the tags: one newline on each side is layout.
fn value_text(raw: &str) -> String {
    let v = raw.strip_prefix('\n').unwrap_or(raw);
    let v = v.strip_suffix('\n').unwrap_or(v);
    decode_entities(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_parameters_as_text() {
        let body = "\n<function=get_weather>\n<parameter=city>\nTokyo &amp; Osaka\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n";
        let s = scan(body, true);
        assert_eq!(s.calls[0].name.as_deref(), Some("get_weather"));
        assert_eq!(
            s.calls[0].members,
            vec![
                ("city".into(), RawArg::Text("Tokyo & Osaka".into())),
                ("days".into(), RawArg::Text("3".into()))
            ]
        );
    }

    #[test]
    fn an_open_parameter_waits() {
        let s = scan(
            "<function=f><parameter=a>1</parameter><parameter=b>2",
            false,
        );
        assert_eq!(s.calls[0].members.len(), 1);
        assert!(!s.calls[0].closed);
        let s = scan("<function=f><parameter=a>1<parameter=b>2</function>", false);
        assert_eq!(s.calls[0].members.len(), 2);
    }
}
