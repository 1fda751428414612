//! Checks on errors: a refusal in the protocol's error shape, no error
//! where a reply is due, and a refusal-or-call where a request forces a
//! tool (`error_body`, `no_error`, `refused_or_call`).

use crate::outcome::{clip, ensure, Outcome};
use crate::protocol::dialect::Dialect;
use crate::protocol::exchange::Exchange;
use crate::protocol::reply::Reply;

/// `error.message` and `error.type` strings (Anthropic's body also
/// `"type": "error"`), and `error.param` when one is asked.
pub(super) fn error_body(ex: &Exchange, param: Option<&str>) -> Outcome {
    let e = &ex.body["error"];
    let shaped = e["message"].as_str().is_some_and(|m| !m.is_empty()) && e["type"].is_string();
    let protocol = match Dialect::of(ex) {
        Dialect::Anthropic => "an Anthropic error body",
        _ => "an OpenAI error body",
    };
    let anthropic_ok = Dialect::of(ex) != Dialect::Anthropic || ex.body["type"] == "error";
    ensure(shaped && anthropic_ok, protocol, || {
        clip(&ex.body.to_string())
    })?;
    match param {
        Some(p) => ensure(
            e["param"].as_str() == Some(p),
            format!("error.param {p:?}"),
            || format!("error.param {}", e["param"]),
        ),
        None => Ok(()),
    }
}

pub(super) fn no_error(ex: &Exchange, r: &Reply) -> Outcome {
    ensure(r.error.is_none() && ex.status < 400, "no error", || {
        format!(
            "status {}: {}",
            ex.status,
            r.error.as_ref().unwrap_or(&ex.body)
        )
    })
}

/// A 4xx must carry the protocol's error body; anything else must be a
/// call (`tool_calls`, or the legacy `function_call`).
pub(super) fn refused_or_call(ex: &Exchange, r: &Reply) -> Outcome {
    let legacy_call = ex.body.pointer("/choices/0/message/function_call");
    let called = !r.tool_calls.is_empty() || legacy_call.is_some_and(|c| !c.is_null());
    if (400..500).contains(&ex.status) {
        error_body(ex, None)
    } else {
        ensure(called, "a 4xx refusal or a call", || {
            format!("status {}: {}", ex.status, clip(&r.content))
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::protocol::exchange::Exchange;
    use crate::suite::checks::fixtures::{chat_body, chat_message, chat_reply};
    use crate::suite::checks::{check_one, Check};

    fn refusal(path: &str, body: serde_json::Value) -> Exchange {
        Exchange {
            path: path.into(),
            status: 400,
            body,
            ..Default::default()
        }
    }

    #[test]
    fn an_error_body_has_a_message_a_type_and_the_param_asked() {
        let body =
            json!({"error": {"message": "bad n", "type": "invalid_request_error", "param": "n"}});
        let ex = refusal("/v1/chat/completions", body);
        assert_eq!(check_one(&Check::ErrorBody { param: None }, &ex), Ok(()));
        let n = Check::ErrorBody {
            param: Some("n".into()),
        };
        assert_eq!(check_one(&n, &ex), Ok(()));
        let top_p = Check::ErrorBody {
            param: Some("top_p".into()),
        };
        assert_eq!(
            check_one(&top_p, &ex),
            Err(("error.param \"top_p\"".into(), "error.param \"n\"".into()))
        );
        let bare = refusal("/v1/chat/completions", json!({"error": "bad n"}));
        let (expected, _) = check_one(&Check::ErrorBody { param: None }, &bare).unwrap_err();
        assert_eq!(expected, "an OpenAI error body");
    }

    #[test]
    fn an_anthropic_error_body_is_typed_error() {
        let error = json!({"type": "invalid_request_error", "message": "bad"});
        let check = Check::ErrorBody { param: None };
        let typed = refusal("/v1/messages", json!({"type": "error", "error": error}));
        assert_eq!(check_one(&check, &typed), Ok(()));
        let untyped = refusal("/v1/messages", json!({"error": error}));
        let (expected, _) = check_one(&check, &untyped).unwrap_err();
        assert_eq!(expected, "an Anthropic error body");
    }

    #[test]
    fn no_error_fails_on_an_error_status_or_object() {
        assert_eq!(check_one(&Check::NoError, &chat_reply("hi")), Ok(()));
        let object = chat_body(json!({"error": {"message": "overloaded", "type": "server_error"}}));
        assert!(check_one(&Check::NoError, &object).is_err());
        let mut status = chat_reply("hi");
        status.status = 503;
        assert!(check_one(&Check::NoError, &status).is_err());
        let mut lost = chat_reply("hi");
        lost.transport_error = Some("connection reset".into());
        assert_eq!(
            check_one(&Check::NoError, &lost),
            Err((
                "a response".into(),
                "transport error: connection reset".into()
            ))
        );
    }

    #[test]
    fn a_forced_call_is_refused_or_made_never_ignored() {
        let call = json!({"content": null, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "f", "arguments": "{}"}}]});
        assert_eq!(
            check_one(&Check::RefusedOrCall, &chat_message(call)),
            Ok(())
        );
        let legacy = json!({"content": null, "function_call": {"name": "f", "arguments": "{}"}});
        assert_eq!(
            check_one(&Check::RefusedOrCall, &chat_message(legacy)),
            Ok(())
        );
        let ignored = check_one(&Check::RefusedOrCall, &chat_reply("Sure."));
        assert_eq!(ignored.unwrap_err().0, "a 4xx refusal or a call");
        let body = json!({"error": {"message": "no tools", "type": "invalid_request_error"}});
        let refused = refusal("/v1/chat/completions", body);
        assert_eq!(check_one(&Check::RefusedOrCall, &refused), Ok(()));
        let shapeless = refusal("/v1/chat/completions", json!({"detail": "no tools"}));
        assert!(check_one(&Check::RefusedOrCall, &shapeless).is_err());
    }
}
