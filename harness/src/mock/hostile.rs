//! The replies of a broken server (`--fault endless|slow-bytes|huge-body|
//! huge-length|html-200|invalid-utf8|redirect-loop|lying-length|json-bomb`, and
//! `endless-models` for `GET /v1/models`): what a harness must survive,
//! ending the request within its time limit, naming what it saw and
//! keeping its memory bounded. They replace a reply whole, whatever its
//! protocol.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::Response;
use futures_util::{stream, StreamExt as _};
use serde_json::json;

use super::faults::Fault;

/// The broken reply for `fault` to a request (`streamed` or not), or
/// None when the fault is not one that replaces a reply.
pub fn reply(fault: Fault, itl_ms: f64, path: &str, streamed: bool) -> Option<Response> {
    let sse = |body: Body| {
        Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .body(body)
            .expect("a response")
    };
    let chunk = |text: &str| {
        let c = json!({"id": "mock-hostile", "object": "chat.completion.chunk", "created": 0,
            "model": "mock", "choices": [{"index": 0,
            "delta": {"role": "assistant", "content": text}, "finish_reason": null}]});
        Bytes::from(format!("data: {c}\n\n"))
    };
    match fault {
        Fault::Endless if !streamed => {
            // A chat completion whose content never closes.
            let gap = Duration::from_secs_f64(itl_ms.max(1.0) / 1000.0);
            let head = Bytes::from_static(
                b"{\"id\":\"mock-hostile\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,\
                  \"message\":{\"role\":\"assistant\",\"content\":\"on",
            );
            let s = stream::once(async move { Ok::<Bytes, std::io::Error>(head) }).chain(
                stream::unfold((), move |()| async move {
                    tokio::time::sleep(gap).await;
                    Some((Ok::<Bytes, std::io::Error>(Bytes::from_static(b" on")), ()))
                }),
            );
            Some(
                Response::builder()
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(Body::from_stream(s))
                    .expect("a response"),
            )
        }
        Fault::Endless | Fault::EndlessModels => {
            let gap = Duration::from_secs_f64(itl_ms.max(1.0) / 1000.0);
            let s = stream::unfold((), move |()| async move {
                tokio::time::sleep(gap).await;
                Some((Ok::<Bytes, std::io::Error>(chunk(" on")), ()))
            });
            Some(sse(Body::from_stream(s)))
        }
        Fault::SlowBytes => {
            let whole = [chunk("slow"), Bytes::from_static(b"data: [DONE]\n\n")].concat();
            let s = stream::unfold(0usize, move |k| {
                let whole = whole.clone();
                async move {
                    if k >= whole.len() {
                        return None;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    Some((
                        Ok::<Bytes, std::io::Error>(Bytes::from(vec![whole[k]])),
                        k + 1,
                    ))
                }
            });
            Some(sse(Body::from_stream(s)))
        }
        Fault::HugeBody => {
            // `{"x":"` then 2 GiB of spaces in 1 MiB pieces, then `"}`.
            const MIB: usize = 1 << 20;
            let pieces = 2048;
            let s = stream::iter((0..pieces + 2).map(move |k| {
                Ok::<Bytes, std::io::Error>(match k {
                    0 => Bytes::from_static(b"{\"x\":\""),
                    k if k == pieces + 1 => Bytes::from_static(b"\"}"),
                    _ => Bytes::from(vec![b' '; MIB]),
                })
            }));
            Some(
                Response::builder()
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(Body::from_stream(s))
                    .expect("a response"),
            )
        }
        Fault::HugeLength => {
            let s = stream::unfold((), |()| async {
                tokio::time::sleep(Duration::from_secs(1)).await;
                Some((Ok::<Bytes, std::io::Error>(Bytes::from_static(b" ")), ()))
            });
            Some(
                Response::builder()
                    .header(header::CONTENT_TYPE, "application/json")
                    .header(header::CONTENT_LENGTH, (1u64 << 30).to_string())
                    .body(Body::from_stream(s))
                    .expect("a response"),
            )
        }
        Fault::Html200 => Some(
            Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "text/html")
                .body(Body::from(
                    "<html><body><h1>502 Bad Gateway</h1>nginx</body></html>",
                ))
                .expect("a response"),
        ),
        Fault::InvalidUtf8 => {
            let mut bad = b"data: {\"id\":\"mock-hostile\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"".to_vec();
            bad.extend_from_slice(&[0xff, 0xfe, 0xfd]);
            bad.extend_from_slice(b"\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
            Some(sse(Body::from(bad)))
        }
        Fault::RedirectLoop => Some(
            Response::builder()
                .status(StatusCode::TEMPORARY_REDIRECT)
                .header(header::LOCATION, path)
                .body(Body::empty())
                .expect("a response"),
        ),
        Fault::LyingLength => {
            // Says 100,000 bytes, sends 20 and then nothing more.
            let s = stream::once(async {
                Ok::<Bytes, std::io::Error>(Bytes::from_static(b"{\"choices\": [{\"ind"))
            })
            .chain(stream::pending());
            Some(
                Response::builder()
                    .header(header::CONTENT_TYPE, "application/json")
                    .header(header::CONTENT_LENGTH, "100000")
                    .body(Body::from_stream(s))
                    .expect("a response"),
            )
        }
        Fault::JsonBomb => {
            let depth = 100_000;
            let mut bomb = "[".repeat(depth);
            bomb.push_str(&"]".repeat(depth));
            Some(
                Response::builder()
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(Body::from(bomb))
                    .expect("a response"),
            )
        }
        _ => None,
    }
}
