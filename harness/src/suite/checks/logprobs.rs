//! The `logprobs` check: every content token's log-probability is there
//! and well formed, with the alternatives asked for.

use crate::outcome::{ensure, Outcome};
use crate::protocol::reply::Reply;

/// Each token: a finite logprob <= 0, its `bytes`, and `top` alternatives.
/// The failure tells an empty list from no logprobs at all. `bytes` may be
/// null: OpenAI's schema allows it ("no bytes representation") and the
/// SDKs read it as None, so only a missing field fails.
pub(super) fn logprobs(r: &Reply, top: usize) -> Outcome {
    ensure(!r.logprobs.is_empty(), "logprobs for the content", || {
        if r.logprobs_present {
            "an empty logprobs list".into()
        } else {
            "no logprobs".into()
        }
    })?;
    for (k, t) in r.logprobs.iter().enumerate() {
        let lp = t["logprob"].as_f64();
        ensure(
            lp.is_some_and(|v| v <= 0.0 && v.is_finite()),
            "logprob <= 0",
            || format!("token {k}: {}", t["logprob"]),
        )?;
        let bytes = t.get("bytes");
        ensure(
            bytes.is_some_and(|b| b.is_array() || b.is_null()),
            "token bytes",
            || format!("token {k}: {t}"),
        )?;
        let alts = t["top_logprobs"].as_array().map_or(0, Vec::len);
        ensure(alts == top, format!("{top} top_logprobs"), || {
            format!("token {k}: {alts}")
        })?;
    }
    Ok(())
}

/// Logprobs for the content, each a finite number <= 0.
pub(super) fn finite(r: &Reply) -> Outcome {
    ensure(!r.logprobs.is_empty(), "logprobs for the content", || {
        "no logprobs".into()
    })?;
    for (k, t) in r.logprobs.iter().enumerate() {
        ensure(
            t["logprob"]
                .as_f64()
                .is_some_and(|v| v <= 0.0 && v.is_finite()),
            "a finite logprob <= 0 for every token",
            || format!("token {k} ({}): {}", t["token"], t["logprob"]),
        )?;
    }
    Ok(())
}

/// No logprobs object anywhere in the reply.
pub(super) fn none(r: &Reply) -> Outcome {
    ensure(
        !r.logprobs_present,
        "no logprobs (null or absent), as the request asked",
        || format!("logprobs with {} tokens", r.logprobs.len()),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use crate::protocol::exchange::Exchange;
    use crate::suite::checks::fixtures::{chat_body, chat_reply};
    use crate::suite::checks::{check_one, Check};

    fn with_logprobs(logprobs: Value) -> Exchange {
        chat_body(
            json!({"choices": [{"message": {"content": "Hi"}, "finish_reason": "stop",
            "logprobs": logprobs}]}),
        )
    }

    /// One token "Hi" with `logprob` and two alternatives.
    fn token(logprob: f64) -> Value {
        json!({"token": "Hi", "logprob": logprob, "bytes": [72, 105], "top_logprobs": [
            {"token": "Hi", "logprob": logprob, "bytes": [72, 105]},
            {"token": "Hey", "logprob": -3.0, "bytes": [72, 101, 121]}]})
    }

    #[test]
    fn each_token_has_a_logprob_bytes_and_its_alternatives() {
        let two = Check::Logprobs { top: 2 };
        let ok = with_logprobs(json!({"content": [token(-0.1)]}));
        assert_eq!(check_one(&two, &ok), Ok(()));
        assert_eq!(
            check_one(&Check::Logprobs { top: 3 }, &ok),
            Err(("3 top_logprobs".into(), "token 0: 2".into()))
        );
        let positive = with_logprobs(json!({"content": [token(-0.1), token(0.5)]}));
        assert_eq!(
            check_one(&two, &positive),
            Err(("logprob <= 0".into(), "token 1: 0.5".into()))
        );
        let mut bytesless = token(-0.1);
        bytesless.as_object_mut().unwrap().remove("bytes");
        let bytesless = with_logprobs(json!({"content": [bytesless]}));
        assert_eq!(check_one(&two, &bytesless).unwrap_err().0, "token bytes");
        let mut null_bytes = token(-0.1);
        null_bytes["bytes"] = Value::Null;
        let null_bytes = with_logprobs(json!({"content": [null_bytes]}));
        assert_eq!(check_one(&two, &null_bytes), Ok(()));
    }

    #[test]
    fn missing_logprobs_are_told_from_an_empty_list() {
        let check = Check::Logprobs { top: 0 };
        assert_eq!(
            check_one(&check, &chat_reply("Hi")),
            Err(("logprobs for the content".into(), "no logprobs".into()))
        );
        let empty = with_logprobs(json!({"content": []}));
        assert_eq!(
            check_one(&check, &empty).unwrap_err().1,
            "an empty logprobs list"
        );
    }
}
