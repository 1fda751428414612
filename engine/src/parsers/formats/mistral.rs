//! `mistral`: `[TOOL_CALLS][{"name": "f", "arguments": {..}}, ..]` (v3 and
//! earlier) or `[TOOL_CALLS]f[ARGS]{..}` (v11 and later, one marker per
//! call). The region runs to the end of the message.

use super::json_calls::{raw_arg, scan_objects};
use super::{BodyScan, CallScan};
use crate::parsers::json_scan::{scan_object, skip_ws};

const MARKER: &str = "[TOOL_CALLS]";
const ARGS: &str = "[ARGS]";

pub fn scan(body: &str, complete: bool) -> BodyScan {
    let mut out = BodyScan::default();
    let parts: Vec<&str> = body.split(MARKER).collect();
    let last = parts.len() - 1;
    for (i, part) in parts.iter().enumerate() {
        let part_complete = complete || i < last;
        let b = part.as_bytes();
        let start = skip_ws(b, 0);
        match b.get(start) {
            None => continue,
            Some(b'[') => {
                scan_objects(part, start + 1, part_complete, &mut out);
            }
            Some(b'{') => {
                scan_objects(part, start, part_complete, &mut out);
            }
            Some(_) => {
                let Some(args_at) = part.find(ARGS) else {
                    if part_complete {
                        // A name with no arguments marker: not a call we can read.
                        break;
                    }
                    return out;
                };
                let name = part[start..args_at].trim().to_string();
                let obj_at = skip_ws(b, args_at + ARGS.len());
                let obj = scan_object(part, obj_at);
                out.calls.push(CallScan {
                    name: Some(name),
                    members: obj
                        .members
                        .iter()
                        .map(|(k, v)| (k.clone(), raw_arg(v)))
                        .collect(),
                    closed: part_complete || obj.end.is_some(),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_generations_of_the_format() {
        let v3 = scan(
            r#"[{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {}}]"#,
            true,
        );
        assert_eq!(v3.calls.len(), 2);
        let v11 = scan(r#"f[ARGS]{"a": 1}[TOOL_CALLS]g[ARGS]{}"#, true);
        assert_eq!(v11.calls.len(), 2);
        assert_eq!(v11.calls[1].name.as_deref(), Some("g"));
    }
}
