//! Stop strings matched across token boundaries.
//!
//! Text is released only when it can no longer be the start of a stop
//! string; once a stop string appears, the text before it is released and
//! the stop string itself never is.

/// Outcome of feeding text to a [`StopMatcher`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopScan {
    /// Text that is safe to emit now.
    pub emit: String,
    /// A stop string was found (its index among the stops): generation
    /// ends after `emit`.
    pub stopped_by: Option<usize>,
}

#[derive(Debug, Clone, Default)]
pub struct StopMatcher {
    stops: Vec<String>,
    held: String,
}

impl StopMatcher {
    pub fn new(stops: Vec<String>) -> Self {
        StopMatcher {
            stops,
            held: String::new(),
        }
    }

    /// Adds generated text.
    pub fn push(&mut self, text: &str) -> StopScan {
        self.held.push_str(text);
        if self.stops.is_empty() {
            return StopScan {
                emit: std::mem::take(&mut self.held),
                stopped_by: None,
            };
        }
        // The earliest stop string occurrence wins.
        if let Some((at, k)) = self
            .stops
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.is_empty())
            .filter_map(|(k, s)| self.held.find(s.as_str()).map(|at| (at, k)))
            .min()
        {
            let emit = self.held[..at].to_string();
            self.held.clear();
            return StopScan {
                emit,
                stopped_by: Some(k),
            };
        }
        // Hold back the longest tail that is a prefix of some stop string.
        let keep = self
            .stops
            .iter()
            .map(|s| longest_suffix_prefix(&self.held, s))
            .max()
            .unwrap_or(0);
        let cut = self.held.len() - keep;
        let emit = self.held[..cut].to_string();
        self.held.drain(..cut);
        StopScan {
            emit,
            stopped_by: None,
        }
    }

    /// Releases the held text at the end of generation (no stop followed).
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }
}

/// Length of the longest suffix of `text` that is a proper prefix of `stop`,
/// at a char boundary.
fn longest_suffix_prefix(text: &str, stop: &str) -> usize {
    if stop.is_empty() {
        return 0;
    }
    let max = (stop.len() - 1).min(text.len());
    (1..=max)
        .rev()
        .find(|&n| {
            let start = text.len() - n;
            text.is_char_boundary(start) && stop.as_bytes().starts_with(&text.as_bytes()[start..])
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stops: &[&str], pieces: &[&str]) -> (String, bool) {
        let mut m = StopMatcher::new(stops.iter().map(|s| s.to_string()).collect());
        let mut out = String::new();
        for p in pieces {
            let scan = m.push(p);
            out.push_str(&scan.emit);
            if scan.stopped_by.is_some() {
                return (out, true);
            }
        }
        out.push_str(&m.finish());
        (out, false)
    }

    #[test]
    fn stop_split_across_pieces_is_not_emitted() {
        assert_eq!(
            run(&["END"], &["abc E", "N", "D tail"]),
            ("abc ".into(), true)
        );
        assert_eq!(run(&["\n\n"], &["one\n", "\ntwo"]), ("one".into(), true));
    }

    #[test]
    fn a_false_start_is_released() {
        assert_eq!(run(&["END"], &["EN", "x", " ok"]), ("ENx ok".into(), false));
    }

    #[test]
    fn the_earliest_of_several_stops_wins() {
        assert_eq!(run(&["zz", "b"], &["a b zz"]), ("a ".into(), true));
    }

    #[test]
    fn the_matched_stop_is_named_by_its_index() {
        let mut m = StopMatcher::new(vec![String::new(), "zz".into(), "b".into()]);
        assert_eq!(m.push("a b zz").stopped_by, Some(2));
    }

    #[test]
    fn held_text_is_released_at_the_end() {
        assert_eq!(run(&["STOP"], &["all ST"]), ("all ST".into(), false));
    }

    #[test]
    fn multibyte_text_is_cut_at_char_boundaries() {
        assert_eq!(run(&["é!"], &["caf", "é", "!"]), ("caf".into(), true));
        assert_eq!(run(&["éx"], &["aé", "b"]), ("aéb".into(), false));
    }
}
