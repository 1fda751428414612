//! Which started prompts get a step's prefill budget first.
//!
//! In arrival order, a short prompt that starts while long ones are being
//! read waits for all of them: with four coding-agent sessions on 2 CPU
//! cores, a cached turn (a reply and a tool result past thousands of
//! cached tokens) waited 104 s behind the other sessions' cold prompts,
//! longer than a cold prompt took (77 s). Shortest first would end that
//! and starve a long prompt under a stream of short ones. So a prompt is
//! due when it would have been read had it run alone from its start: its
//! start plus its uncached tokens at the pace prompts are read now, the
//! decodes beside them included ([`PrefillBudget::read_seconds`]), and
//! the earliest due goes first. A
//! short prompt passes the long ones that started shortly before it; a
//! long prompt that has waited about its own length passes every prompt
//! that starts after that.
//!
//! [`PrefillBudget::read_seconds`]: crate::runtime::prefill_budget::PrefillBudget::read_seconds

use std::time::{Duration, Instant};

/// When a prompt that started at `started` with `tokens` left to compute
/// is due, a token taking `token_s` seconds to read (unknown: at its
/// start, so arrival order).
pub fn due(started: Instant, tokens: usize, token_s: Option<f64>) -> Instant {
    let alone = match token_s {
        None => Duration::ZERO,
        // Not a duration (infinite, NaN): last.
        Some(t) => Duration::try_from_secs_f64(t * tokens as f64).unwrap_or(NEVER),
    };
    started
        .checked_add(alone.min(NEVER))
        .unwrap_or(started + NEVER)
}

/// Later than any prompt is due (a century).
const NEVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Option<f64> = Some(0.001);

    #[test]
    fn a_short_prompt_passes_a_long_one_that_started_just_before_it() {
        let t0 = Instant::now();
        let long = due(t0, 8_000, MS);
        let short = due(t0 + Duration::from_secs(1), 500, MS);
        assert!(short < long);
    }

    #[test]
    fn a_long_prompt_that_waited_its_length_passes_later_short_ones() {
        let t0 = Instant::now();
        let long = due(t0, 8_000, MS);
        // 7.6 s later a 500-token prompt would be due at 8.1 s, after the
        // long one's 8 s.
        let short = due(t0 + Duration::from_millis(7_600), 500, MS);
        assert!(long < short);
    }

    #[test]
    fn unpriced_prompts_go_in_arrival_order() {
        let t0 = Instant::now();
        let long = due(t0, 8_000, None);
        let short = due(t0 + Duration::from_millis(1), 5, None);
        assert!(long < short);
    }

    #[test]
    fn an_absurd_price_sorts_last_instead_of_panicking() {
        let t0 = Instant::now();
        assert!(due(t0, 10, Some(f64::INFINITY)) > due(t0, 10_000, MS));
        assert!(due(t0, usize::MAX, Some(1e300)) > due(t0, 10_000, MS));
    }
}
