//! Checks on the token counts a reply reports: `usage` (present,
//! consistent, within bounds) and `cached_tokens` (the prefix cache's
//! share of the prompt, with misses allowed across parallel requests).

use super::{check_one, Check, Mismatch};
use crate::outcome::{ensure, Outcome};
use crate::protocol::exchange::Exchange;
use crate::protocol::reply::Reply;

/// total = prompt + completion with a prompt, and the completion and
/// reasoning counts within the bounds given (a missing reasoning count
/// is 0).
pub(super) fn usage(
    r: &Reply,
    completion_max: Option<u64>,
    reasoning_min: Option<u64>,
    reasoning_max: Option<u64>,
) -> Outcome {
    let prompt = r.usage_field("prompt_tokens");
    let completion = r.usage_field("completion_tokens");
    let total = r.usage_field("total_tokens");
    let (Some(p), Some(c), Some(t)) = (prompt, completion, total) else {
        return Err((
            "usage with prompt, completion and total tokens".into(),
            format!("{:?}", r.usage),
        ));
    };
    ensure(
        p > 0 && t == p + c,
        "total = prompt + completion, prompt > 0",
        || format!("prompt {p}, completion {c}, total {t}"),
    )?;
    if let Some(max) = completion_max {
        ensure(c <= max, format!("completion_tokens <= {max}"), || {
            c.to_string()
        })?;
    }
    let reasoning = r
        .usage_field("completion_tokens_details.reasoning_tokens")
        .unwrap_or(0);
    if let Some(min) = reasoning_min {
        ensure(
            reasoning >= min,
            format!("reasoning_tokens >= {min}"),
            || reasoning.to_string(),
        )?;
    }
    if let Some(max) = reasoning_max {
        ensure(
            reasoning <= max,
            format!("reasoning_tokens <= {max}"),
            || reasoning.to_string(),
        )?;
    }
    Ok(())
}

/// `prompt_tokens_details.cached_tokens` within the tightest of the
/// absolute and fractional bounds, and never above the prompt.
pub(super) fn cached_tokens(
    r: &Reply,
    min: Option<u64>,
    max: Option<u64>,
    min_fraction: Option<f64>,
    max_fraction: Option<f64>,
) -> Outcome {
    let cached = r
        .usage_field("prompt_tokens_details.cached_tokens")
        .ok_or((
            "usage.prompt_tokens_details.cached_tokens".into(),
            format!("{:?}", r.usage),
        ))?;
    let prompt = r.usage_field("prompt_tokens").unwrap_or(0);
    let expected = format!(
        "cached_tokens in [{}, {}]{}",
        min.map_or("0".into(), |m| m.to_string()),
        max.map_or("prompt".into(), |m| m.to_string()),
        min_fraction.map_or(String::new(), |f| format!(", >= {f} of the prompt"))
            + &max_fraction.map_or(String::new(), |f| format!(", <= {f} of the prompt"))
    );
    let low = min
        .unwrap_or(0)
        .max(min_fraction.map_or(0, |f| (f * prompt as f64).ceil() as u64));
    let high = max
        .unwrap_or(prompt)
        .min(max_fraction.map_or(prompt, |f| (f * prompt as f64).floor() as u64));
    ensure(
        cached >= low && cached <= high && cached <= prompt,
        expected,
        || format!("{cached} of {prompt}"),
    )
}

/// `cached_tokens` with `allow_misses`: requests released together may
/// each miss (the first computes the prefix the others reuse), so up to
/// that many subjects out of bounds still pass, and more fail as one.
pub(super) fn cached_tokens_with_misses(
    check: &Check,
    steps: &[Exchange],
    on: &[usize],
    allow_misses: usize,
) -> Vec<Mismatch> {
    let misses: Vec<String> = on
        .iter()
        .filter_map(|&i| {
            check_one(check, &steps[i])
                .err()
                .map(|(e, a)| format!("step {i}: {a} (wanted {e})"))
        })
        .collect();
    if misses.len() > allow_misses {
        return vec![(
            format!("at most {allow_misses} of {} outside the bounds", on.len()),
            misses.join("; "),
        )];
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use crate::protocol::exchange::Exchange;
    use crate::suite::checks::fixtures::chat_body;
    use crate::suite::checks::{check_one, Check, CheckSpec};

    fn with_usage(usage: Value) -> Exchange {
        chat_body(
            json!({"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}],
            "usage": usage}),
        )
    }

    /// `cached` of a 100-token prompt.
    fn cached(cached: u64) -> Exchange {
        with_usage(
            json!({"prompt_tokens": 100, "completion_tokens": 1, "total_tokens": 101,
            "prompt_tokens_details": {"cached_tokens": cached}}),
        )
    }

    #[test]
    fn usage_must_add_up_and_keep_its_bounds() {
        let bounds = |completion_max, reasoning_min, reasoning_max| Check::Usage {
            completion_max,
            reasoning_min,
            reasoning_max,
        };
        let ex = with_usage(
            json!({"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12,
            "completion_tokens_details": {"reasoning_tokens": 4}}),
        );
        assert_eq!(check_one(&bounds(Some(7), Some(4), Some(4)), &ex), Ok(()));
        assert_eq!(
            check_one(&bounds(Some(6), None, None), &ex),
            Err(("completion_tokens <= 6".into(), "7".into()))
        );
        assert!(check_one(&bounds(None, Some(5), None), &ex).is_err());
        assert!(check_one(&bounds(None, None, Some(3)), &ex).is_err());
        let off =
            with_usage(json!({"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 13}));
        assert_eq!(
            check_one(&bounds(None, None, None), &off),
            Err((
                "total = prompt + completion, prompt > 0".into(),
                "prompt 5, completion 7, total 13".into()
            ))
        );
        let absent = chat_body(json!({"choices": [{"message": {"content": "hi"}}]}));
        assert!(check_one(&bounds(None, None, None), &absent).is_err());
    }

    #[test]
    fn cached_tokens_keep_absolute_and_fractional_bounds() {
        let check = Check::CachedTokens {
            min: Some(10),
            max: None,
            min_fraction: Some(0.5),
            max_fraction: None,
            allow_misses: 0,
        };
        assert_eq!(check_one(&check, &cached(50)), Ok(()));
        assert_eq!(
            check_one(&check, &cached(49)),
            Err((
                "cached_tokens in [10, prompt], >= 0.5 of the prompt".into(),
                "49 of 100".into()
            ))
        );
        let none = Check::CachedTokens {
            min: None,
            max: Some(0),
            min_fraction: None,
            max_fraction: None,
            allow_misses: 0,
        };
        assert_eq!(check_one(&none, &cached(0)), Ok(()));
        assert!(check_one(&none, &cached(1)).is_err());
    }

    #[test]
    fn allowed_cache_misses_pass_and_one_more_fails() {
        let spec = CheckSpec {
            check: Check::CachedTokens {
                min: Some(64),
                max: None,
                min_fraction: None,
                max_fraction: None,
                allow_misses: 1,
            },
            step: None,
        };
        let one_miss = [cached(0), cached(64), cached(80)];
        assert!(spec.evaluate(&one_miss, &[0, 1, 2]).is_empty());
        let two_misses = [cached(0), cached(3), cached(80)];
        let failures = spec.evaluate(&two_misses, &[0, 1, 2]);
        assert_eq!(failures.len(), 1);
        assert_eq!(failures[0].check, "cached_tokens");
        assert_eq!(failures[0].expected, "at most 1 of 3 outside the bounds");
        assert!(
            failures[0].actual.starts_with("step 0: 0 of 100"),
            "{:?}",
            failures[0]
        );
    }
}
