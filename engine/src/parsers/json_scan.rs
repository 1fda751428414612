//! Reading a JSON object whose text may still be arriving.
//!
//! The scanner lists the members that are certainly complete (their value
//! is followed by `,` or `}`), so members found in a prefix of a text are a
//! prefix of the members found in the whole text. That property is what
//! lets tool-call arguments stream member by member and still concatenate
//! to the non-streaming result.

/// What is known about an object starting at some offset of a text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ObjectScan<'a> {
    /// Complete members, in order: the key and the raw text of the value.
    pub members: Vec<(String, &'a str)>,
    /// A member whose key is read but whose value is not yet complete:
    /// the key and the byte offset where its value starts.
    pub pending: Option<(String, usize)>,
    /// Offset just past the closing `}`, once seen.
    pub end: Option<usize>,
    /// The text is not a JSON object here; scanning stopped.
    pub invalid: bool,
}

/// Scans the object starting at `text[start]` (which should be `{`).
pub fn scan_object(text: &str, start: usize) -> ObjectScan<'_> {
    let b = text.as_bytes();
    let mut out = ObjectScan::default();
    if b.get(start) != Some(&b'{') {
        out.invalid = start < b.len();
        return out;
    }
    let mut i = start + 1;
    loop {
        i = skip_ws(b, i);
        match b.get(i) {
            None => return out,
            Some(b'}') => {
                out.end = Some(i + 1);
                return out;
            }
            Some(b',') => {
                i += 1;
                continue;
            }
            Some(b'"') => {}
            Some(_) => {
                out.invalid = true;
                return out;
            }
        }
        let Some(key_end) = skip_string(b, i) else {
            return out;
        };
        let key = serde_json::from_str::<String>(&text[i..key_end])
            .unwrap_or_else(|_| text[i + 1..key_end - 1].to_string());
        i = skip_ws(b, key_end);
        match b.get(i) {
            None => return out,
            Some(b':') => i = skip_ws(b, i + 1),
            Some(_) => {
                out.invalid = true;
                return out;
            }
        }
        let value_start = i;
        out.pending = Some((key.clone(), value_start));
        let Some(value_end) = skip_value(b, i) else {
            return out;
        };
        i = skip_ws(b, value_end);
        match b.get(i) {
            None => return out,
            Some(b',') | Some(b'}') => {
                out.pending = None;
                out.members.push((key, &text[value_start..value_end]));
                if b[i] == b'}' {
                    out.end = Some(i + 1);
                    return out;
                }
                i += 1;
            }
            Some(_) => {
                out.invalid = true;
                return out;
            }
        }
    }
}

pub fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// Offset past the string starting at `b[i] == '"'`; `None` if unfinished.
pub fn skip_string(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'"' => return Some(j + 1),
            _ => j += 1,
        }
    }
    None
}

/// Offset past the value starting at `b[i]`; `None` while it may still
/// grow (an unclosed string or bracket, or a scalar at the end of text).
pub fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => skip_string(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'"' => {
                        j = skip_string(b, j)?;
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
                j += 1;
            }
            None
        }
        _ => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b'}' | b']') && !b[j].is_ascii_whitespace()
            {
                j += 1;
            }
            (j < b.len()).then_some(j)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_only_complete_members() {
        let t = r#"{"a": 1, "b": "x,y", "c": 12"#;
        let s = scan_object(t, 0);
        assert_eq!(s.members, vec![("a".into(), "1"), ("b".into(), "\"x,y\"")]);
        assert_eq!(s.pending, Some(("c".into(), t.len() - 2)));
        assert_eq!(s.end, None);
    }

    #[test]
    fn nested_values_and_the_end() {
        let t = r#"{"a": {"b": [1, {"c": "}"}]}} tail"#;
        let s = scan_object(t, 0);
        assert_eq!(s.members, vec![("a".into(), r#"{"b": [1, {"c": "}"}]}"#)]);
        assert_eq!(s.end, Some(t.len() - 5));
    }

    #[test]
    fn members_of_a_prefix_are_a_prefix_of_the_members() {
        let t = r#"{"name": "f", "arguments": {"x": -2.5e3, "y": [true, null], "z": "q\"}"}}"#;
        let whole = scan_object(t, 0).members;
        for cut in 0..t.len() {
            let part = scan_object(&t[..cut], 0).members;
            assert!(part.len() <= whole.len());
            assert_eq!(part[..], whole[..part.len()], "cut at {cut}");
        }
    }

    #[test]
    fn not_an_object() {
        assert!(scan_object("[1]", 0).invalid);
        assert!(scan_object("{1: 2}", 0).invalid);
    }
}
