//! Finding markers in text that is still arriving: a marker may be split
//! across deltas, so the tail that could begin one is held back until the
//! next delta resolves it.

/// Where the first of several markers is, or how much text is safe to
/// release because no marker can start in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerScan {
    /// `markers[marker]` starts at byte `at`.
    Found { at: usize, marker: usize },
    /// No marker in the text; `buf[..safe]` cannot be part of one, the
    /// rest is a marker's beginning and must wait.
    Clear { safe: usize },
}

/// Scans `buf` for the earliest of `markers` (ties go to the longer one).
pub fn scan(buf: &str, markers: &[&str]) -> MarkerScan {
    let mut best: Option<(usize, usize)> = None;
    for (i, m) in markers.iter().enumerate() {
        if let Some(at) = buf.find(m) {
            let better = match best {
                None => true,
                Some((b_at, b_i)) => at < b_at || (at == b_at && m.len() > markers[b_i].len()),
            };
            if better {
                best = Some((at, i));
            }
        }
    }
    if let Some((at, marker)) = best {
        return MarkerScan::Found { at, marker };
    }
    MarkerScan::Clear {
        safe: buf.len() - partial_suffix(buf, markers),
    }
}

/// Length of the longest tail of `buf` that is a proper prefix of a marker.
pub fn partial_suffix(buf: &str, markers: &[&str]) -> usize {
    let longest = markers.iter().map(|m| m.len()).max().unwrap_or(0);
    let floor = buf.len().saturating_sub(longest.saturating_sub(1));
    buf.char_indices()
        .map(|(i, _)| i)
        .filter(|&i| i >= floor)
        .find(|&i| {
            let tail = &buf[i..];
            markers
                .iter()
                .any(|m| m.len() > tail.len() && m.starts_with(tail))
        })
        .map_or(0, |i| buf.len() - i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_earliest_marker() {
        let m = ["</think>", "<turn|>"];
        assert_eq!(
            scan("ab<turn|>c</think>", &m),
            MarkerScan::Found { at: 2, marker: 1 }
        );
    }

    #[test]
    fn holds_back_a_partial_marker() {
        assert_eq!(
            scan("hello </th", &["</think>"]),
            MarkerScan::Clear { safe: 6 }
        );
        assert_eq!(scan("hello", &["</think>"]), MarkerScan::Clear { safe: 5 });
        assert_eq!(scan("a<", &["<tool_call>"]), MarkerScan::Clear { safe: 1 });
    }

    #[test]
    fn multibyte_text_is_cut_on_char_boundaries() {
        assert_eq!(scan("héé<", &["<x>"]), MarkerScan::Clear { safe: 5 });
    }
}
