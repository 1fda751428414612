//! The accept loop in front of the routes: what a hostile client can hold.
//!
//! axum's own `serve` has no header timeout, so a client that sends its
//! headers a byte at a time (slowloris), or opens a connection and says
//! nothing, holds a connection and a task forever. Here every connection
//! is served by hyper with a timer: headers (of the first request and of
//! each next one on a kept-alive connection) must arrive within
//! `read_timeout`, and an idle connection is closed when it passes. At most
//! `max_connections` are open; one more is answered `503` and closed, so a
//! flood of idle sockets is refused in plain words instead of exhausting
//! the process's file descriptors. Headers past hyper's buffer get `431`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// Connection-level limits (afm-serve's `--max-connections`,
/// `--read-timeout`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConnectionLimits {
    /// Open connections at most; one more gets `503` and is closed.
    pub max_connections: usize,
    /// Time a client has to send a request's headers, and its body; also
    /// how long an idle kept-alive connection stays open. `None`: no limit.
    pub read_timeout: Option<Duration>,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: 4096,
            read_timeout: Some(Duration::from_secs(30)),
        }
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets the open
/// connections finish their requests (streams included).
pub async fn serve_connections(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let open = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).keep_alive(true);
    builder.header_read_timeout(limits.read_timeout);
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Out of descriptors or a connection reset before it was
                    // taken: wait a little rather than spin, keep serving.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let Ok(permit) = open.clone().try_acquire_owned() else {
            tokio::spawn(refuse(stream, limits.max_connections));
            continue;
        };
        let service = TowerToHyperService::new(app.clone());
        let conn = builder.serve_connection(TokioIo::new(stream), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// A connection past the cap: its request is read briefly (closing with
/// unread bytes would reset it before the client sees the answer), then it
/// gets a `503` in OpenAI's error shape and is closed.
async fn refuse(mut stream: TcpStream, max_connections: usize) {
    let mut buf = [0u8; 8192];
    let _ = tokio::time::timeout(Duration::from_millis(200), stream.read(&mut buf)).await;
    let body = serde_json::json!({"error": {
        "message": format!("too many open connections (at most {max_connections}: --max-connections); retry"),
        "type": "server_error",
        "param": null,
        "code": "too_many_connections",
    }})
    .to_string();
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         retry-after: 1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body.as_bytes()).await;
    let _ = stream.shutdown().await;
}
