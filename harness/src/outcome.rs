//! What a check or a protocol check concludes: nothing, or what it
//! expected and what it saw (quoted and clipped for reports).

/// `Err((expected, actual))` on failure.
pub type Outcome = std::result::Result<(), (String, String)>;

/// `Ok` when `ok`, else what was expected and (computed only then) seen.
pub fn ensure(ok: bool, expected: impl Into<String>, actual: impl FnOnce() -> String) -> Outcome {
    if ok {
        Ok(())
    } else {
        Err((expected.into(), actual()))
    }
}

/// `s` quoted and clipped to report size.
pub fn clip(s: &str) -> String {
    clip_to(s, 400)
}

/// `s` quoted, cut at a character boundary after `max` bytes.
pub fn clip_to(s: &str, max: usize) -> String {
    if s.len() <= max {
        return format!("{s:?}");
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}… ({} bytes)", &s[..end], s.len())
}
