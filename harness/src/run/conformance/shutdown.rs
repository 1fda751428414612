//! The `shutdown` scenario: how a server this run started stops. A
//! stream is started; once its first event came, SIGTERM goes to the
//! server's process group; 300 ms later a new request is sent; then the
//! process is watched until it exits (30 s at most). What a graceful stop
//! looks like (vLLM's own test of it): the request in flight finishes, a
//! new one is refused, the process ends.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::protocol::exchange::Exchange;
use crate::server::{Outgoing, Target};

/// How long the process has to exit after the signal.
const EXIT_LIMIT: Duration = Duration::from_secs(30);

pub async fn play(target: &Target, path: &str, streamed: Value, later: Value) -> Vec<Exchange> {
    let Some(group) = target.owned() else {
        return Vec::new();
    };
    let first = std::sync::Arc::new(tokio::sync::Notify::new());
    let in_flight = {
        let (target, path) = (target.clone(), path.to_string());
        let mut out = Outgoing::post(&path, serde_json::to_vec(&streamed).expect("JSON"));
        out.first_event = Some(first.clone());
        tokio::spawn(async move { target.send(out).await })
    };
    // The first event (a reply that never streams: the time limit).
    let _ = tokio::time::timeout(Duration::from_secs(120), first.notified()).await;
    let signalled = Instant::now();
    let _ = std::process::Command::new("kill")
        .args(["-TERM", "--", &format!("-{group}")])
        .status();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut after = target.post(path, &later).await;
    // A closed listener is the refusal asked for, not a failure to test:
    // kept as the step's body (status 0), not as a transport error.
    if let Some(why) = after.transport_error.take() {
        after.status = 0;
        after.body = json!({ "connection": why });
    }
    let mut stream = in_flight.await.unwrap_or_else(|e| Exchange {
        transport_error: Some(format!("task failed: {e}")),
        ..Default::default()
    });
    // A stream the stop cut is what the case grades (it never finished),
    // not an error of the run: its cause goes to the exit step.
    let cut = stream.transport_error.take();
    let exited = loop {
        if !alive(group) {
            break Some(signalled.elapsed());
        }
        if signalled.elapsed() > EXIT_LIMIT {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let exit = Exchange {
        path: "exit".into(),
        status: if exited.is_some() { 200 } else { 0 },
        body: json!({"exited_after_ms": exited.map(|d| d.as_millis() as u64), "in_flight_cut": cut}),
        ..Default::default()
    };
    vec![stream, after, exit]
}

/// The process still runs: it exists and is not a zombie (afm-test is its
/// parent and reaps it only when the run ends).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command's closing parenthesis.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}
