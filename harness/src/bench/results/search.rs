//! `--slo-search`: the highest load (request rate, or users) whose correct
//! goodput share stays at least the target. Loads double from the first
//! until one misses (or halve until one meets), then bisect between the
//! highest that met and the lowest that missed, within a number of probes.

use anyhow::Result;

use crate::bench::results::Search;

/// Probes `probe(x) -> share` from `start`; `integer` loads are users.
pub fn search(
    start: f64,
    integer: bool,
    steps: usize,
    target_share: f64,
    mut probe: impl FnMut(f64) -> Result<f64>,
) -> Result<Search> {
    let mut probes: Vec<[f64; 2]> = Vec::new();
    let (mut met, mut missed): (Option<f64>, Option<f64>) = (None, None);
    let mut x = start;
    for _ in 0..steps.max(1) {
        let share = probe(x)?;
        probes.push([x, share]);
        if share >= target_share {
            met = Some(met.map_or(x, |m| m.max(x)));
        } else {
            missed = Some(missed.map_or(x, |m| m.min(x)));
        }
        let next = match (met, missed) {
            (Some(m), None) => m * 2.0,
            (None, Some(m)) => m / 2.0,
            (Some(a), Some(b)) => (a + b) / 2.0,
            (None, None) => unreachable!("a probe ran"),
        };
        let next = if integer {
            next.floor()
        } else {
            (next * 1000.0).round() / 1000.0
        };
        if next <= 0.0 || (integer && next < 1.0) || probes.iter().any(|p| p[0] == next) {
            break;
        }
        x = next;
    }
    Ok(Search {
        over: if integer { "concurrency" } else { "rate" }.into(),
        target_share,
        probes,
        best: met,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_search_doubles_then_bisects_to_the_knee() {
        // Goodput holds up to 5 req/s.
        let s = search(1.0, false, 6, 0.9, |x| Ok(if x <= 5.0 { 1.0 } else { 0.2 })).unwrap();
        let xs: Vec<f64> = s.probes.iter().map(|p| p[0]).collect();
        assert_eq!(xs, vec![1.0, 2.0, 4.0, 8.0, 6.0, 5.0]);
        assert_eq!(s.best, Some(5.0));
    }

    #[test]
    fn a_user_search_stays_on_whole_users_and_can_find_none() {
        let s = search(4.0, true, 8, 0.9, |x| Ok(if x <= 2.0 { 1.0 } else { 0.0 })).unwrap();
        assert_eq!(s.best, Some(2.0));
        assert!(s.probes.iter().all(|p| p[0].fract() == 0.0));
        let none = search(1.0, true, 8, 0.9, |_| Ok(0.0)).unwrap();
        assert_eq!((none.best, none.probes.len()), (None, 1));
    }
}
