//! Checks on the HTTP answer itself, whatever the protocol: its status,
//! its headers, and fields of its body (`status`, `status_in`,
//! `header_present`, `header`, `json_pointer_positive`, `models_list`).

use serde_json::Value;

use crate::outcome::{clip, ensure, Outcome};
use crate::protocol::exchange::Exchange;

pub(super) fn status(ex: &Exchange, equals: u16) -> Outcome {
    ensure(ex.status == equals, format!("status {equals}"), || {
        format!("status {}: {}", ex.status, clip(&ex.body.to_string()))
    })
}

pub(super) fn status_in(ex: &Exchange, any: &[u16]) -> Outcome {
    ensure(
        any.contains(&ex.status),
        format!("status in {any:?}"),
        || format!("status {}: {}", ex.status, clip(&ex.body.to_string())),
    )
}

/// Header names are matched lower-case, as the exchange keeps them.
pub(super) fn header_present(ex: &Exchange, name: &str) -> Outcome {
    ensure(
        ex.headers.contains_key(&name.to_ascii_lowercase()),
        format!("header {name}"),
        || format!("{:?}", ex.headers.keys().collect::<Vec<_>>()),
    )
}

pub(super) fn header(ex: &Exchange, name: &str, equals: &str) -> Outcome {
    let got = ex.headers.get(&name.to_ascii_lowercase());
    ensure(
        got.is_some_and(|v| v == equals),
        format!("{name}: {equals}"),
        || format!("{got:?}"),
    )
}

pub(super) fn json_pointer_positive(ex: &Exchange, pointer: &str) -> Outcome {
    let v = ex.body.pointer(pointer);
    ensure(
        v.and_then(Value::as_u64).is_some_and(|n| n > 0),
        format!("a positive integer at {pointer}"),
        || clip(&ex.body.to_string()),
    )
}

/// `GET /v1/models`: a non-empty `data` list whose entries all have ids.
pub(super) fn models_list(ex: &Exchange) -> Outcome {
    let ok = ex.body["data"]
        .as_array()
        .is_some_and(|d| !d.is_empty() && d.iter().all(|m| m["id"].is_string()));
    ensure(ok, "a list of models with ids", || {
        clip(&ex.body.to_string())
    })
}

/// `GET /v1/models/{id}`: the model object of that id.
pub(super) fn model_object(ex: &Exchange) -> Outcome {
    let segment = ex.path.split_once("/models/").map_or("", |(_, id)| id);
    let asked = percent_encoding::percent_decode_str(segment).decode_utf8_lossy();
    let ok = ex.body["object"] == "model" && ex.body["id"].as_str() == Some(&*asked);
    ensure(ok, format!("a model object with id {asked:?}"), || {
        format!("{} {}", ex.status, clip(&ex.body.to_string()))
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::suite::checks::fixtures::{chat_body, chat_reply};
    use crate::suite::checks::{check_one, Check};

    #[test]
    fn the_status_must_be_the_one_asked() {
        let mut ex = chat_reply("hi");
        assert_eq!(check_one(&Check::Status { equals: 200 }, &ex), Ok(()));
        ex.status = 500;
        let (expected, actual) = check_one(&Check::Status { equals: 200 }, &ex).unwrap_err();
        assert_eq!(expected, "status 200");
        assert!(actual.starts_with("status 500: "), "{actual}");
        let any = Check::StatusIn {
            any: vec![400, 422],
        };
        assert!(check_one(&any, &ex).is_err());
        ex.status = 422;
        assert_eq!(check_one(&any, &ex), Ok(()));
    }

    #[test]
    fn headers_are_found_whatever_the_case_of_their_name() {
        let mut ex = chat_reply("hi");
        ex.headers.insert("x-request-id".into(), "abc".into());
        let present = |name: &str| Check::HeaderPresent { name: name.into() };
        assert_eq!(check_one(&present("X-Request-Id"), &ex), Ok(()));
        assert!(check_one(&present("Retry-After"), &ex).is_err());
        let header = |equals: &str| Check::Header {
            name: "X-Request-Id".into(),
            equals: equals.into(),
        };
        assert_eq!(check_one(&header("abc"), &ex), Ok(()));
        assert!(check_one(&header("abd"), &ex).is_err());
    }

    #[test]
    fn a_pointer_must_reach_a_positive_integer() {
        let check = Check::JsonPointerPositive {
            pointer: "/usage/total_tokens".into(),
        };
        assert_eq!(
            check_one(&check, &chat_body(json!({"usage": {"total_tokens": 3}}))),
            Ok(())
        );
        for bad in [json!(0), json!("3"), json!(null)] {
            let ex = chat_body(json!({"usage": {"total_tokens": bad}}));
            assert!(check_one(&check, &ex).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_models_list_needs_models_with_ids() {
        let list = |data| chat_body(json!({"object": "list", "data": data}));
        let ok = list(json!([{"id": "m", "object": "model"}]));
        assert_eq!(check_one(&Check::ModelsList, &ok), Ok(()));
        assert!(check_one(&Check::ModelsList, &list(json!([]))).is_err());
        assert!(check_one(&Check::ModelsList, &list(json!([{"name": "m"}]))).is_err());
    }
}
