//! The attacks, each one way a client can hurt a server, and what the
//! server answered. Raw sockets where the attack is in the bytes' timing
//! (slow headers, idle sockets, a body that never ends); HTTP where it is
//! in the request (deep JSON, a KV hog, a burst).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::protocol::endpoint::{Endpoint, MODELS_PATH};

/// The attacks in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Attack {
    /// Many connections sending their headers one line a second.
    Slowloris,
    /// Thousands of connections opened and never used.
    Idle,
    /// One request whose headers run to a mebibyte.
    BigHeaders,
    /// A body that says it is a gibibyte and is sent as fast as it goes.
    BigBody,
    /// A body sent one byte a second.
    SlowBody,
    /// JSON nested 100,000 deep.
    DeepJson,
    /// n x max_tokens x a long prompt: more KV than any machine has.
    KvHog,
    /// A thousand requests at once.
    Burst,
}

impl Attack {
    pub const ALL: [Attack; 8] = [
        Attack::Slowloris,
        Attack::Idle,
        Attack::BigHeaders,
        Attack::BigBody,
        Attack::SlowBody,
        Attack::DeepJson,
        Attack::KvHog,
        Attack::Burst,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Attack::Slowloris => "slowloris",
            Attack::Idle => "idle",
            Attack::BigHeaders => "big-headers",
            Attack::BigBody => "big-body",
            Attack::SlowBody => "slow-body",
            Attack::DeepJson => "deep-json",
            Attack::KvHog => "kv-hog",
            Attack::Burst => "burst",
        }
    }
}

/// How big each attack is (the flags of `afm-bench attack`).
#[derive(Debug, Clone, Serialize)]
pub struct Sizes {
    /// Connections of the slowloris attack.
    pub slow_connections: usize,
    /// Connections of the idle attack.
    pub idle_connections: usize,
    /// How long the slow and idle attacks hold their connections at most.
    pub hold: Duration,
    /// Requests of the burst.
    pub burst: usize,
}

/// Where the attacks go.
pub struct Aim {
    pub client: reqwest::Client,
    pub base: String,
    /// `host:port` of `base`, for raw sockets.
    pub addr: String,
    pub model: String,
    pub api_key: Option<String>,
}

/// What the server did with one attack.
#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    /// Each kind of outcome and how many attempts had it, e.g. "413" or
    /// "closed by the server after 30 s".
    pub outcomes: BTreeMap<String, usize>,
    /// Every attempt got a 2xx, a 4xx or a 503, or was closed by the
    /// server on a time limit; none got another 5xx and none was still
    /// held when the attack gave up. (Whether an error's body was JSON is
    /// in its outcome's label: a parser's 431 has no body.)
    pub clean: bool,
    pub seconds: f64,
}

/// One attempt's end.
#[derive(Debug, Clone, PartialEq)]
enum End {
    /// An HTTP status, and whether a non-2xx body was JSON.
    Status(u16, bool),
    /// The server closed the connection without an answer, after this long.
    Closed(Duration),
    /// Still open when the attack gave up.
    Held,
    /// The connection could not be made, or broke on the client's side.
    Failed(String),
}

impl End {
    fn label(&self) -> String {
        match self {
            End::Status(s, json) if (200..300).contains(s) || *json => format!("{s}"),
            End::Status(s, _) => format!("{s} (body not JSON)"),
            // Rounded, so one outcome does not become a hundred labels.
            End::Closed(d) => format!("closed by the server after ~{:.0} s", d.as_secs_f64()),
            End::Held => "still open when the attack stopped".into(),
            End::Failed(e) => format!("client error: {e}"),
        }
    }

    fn clean(&self) -> bool {
        match self {
            End::Status(s, _) => (200..300).contains(s) || (400..500).contains(s) || *s == 503,
            End::Closed(_) => true,
            End::Held | End::Failed(_) => false,
        }
    }
}

fn answer(ends: &[End], started: Instant) -> Answer {
    let mut outcomes = BTreeMap::new();
    for e in ends {
        *outcomes.entry(e.label()).or_insert(0) += 1;
    }
    Answer {
        outcomes,
        clean: !ends.is_empty() && ends.iter().all(End::clean),
        seconds: started.elapsed().as_secs_f64(),
    }
}

/// Runs one attack to its end.
pub async fn run(attack: Attack, aim: &Arc<Aim>, sizes: &Sizes) -> Answer {
    let started = Instant::now();
    let ends = match attack {
        Attack::Slowloris => {
            let hold = sizes.hold;
            many(sizes.slow_connections, aim, move |aim| {
                drip_headers(aim, hold)
            })
            .await
        }
        Attack::Idle => {
            let hold = sizes.hold;
            many(sizes.idle_connections, aim, move |aim| idle(aim, hold)).await
        }
        Attack::BigHeaders => vec![big_headers(aim).await],
        Attack::BigBody => vec![big_body(aim).await],
        Attack::SlowBody => vec![slow_body(aim, sizes.hold).await],
        Attack::DeepJson => vec![deep_json(aim).await],
        Attack::KvHog => vec![kv_hog(aim).await],
        Attack::Burst => burst(aim, sizes.burst).await,
    };
    answer(&ends, started)
}

/// `n` copies of one attempt at once.
async fn many<F, Fut>(n: usize, aim: &Arc<Aim>, attempt: F) -> Vec<End>
where
    F: Fn(Arc<Aim>) -> Fut,
    Fut: std::future::Future<Output = End> + Send + 'static,
{
    let tasks: Vec<_> = (0..n).map(|_| tokio::spawn(attempt(aim.clone()))).collect();
    let mut ends = Vec::with_capacity(n);
    for t in tasks {
        ends.push(t.await.unwrap_or_else(|e| End::Failed(e.to_string())));
    }
    ends
}

/// Reads what the server sends into `reply` until it closes or breaks
/// the connection (a mebibyte kept at most: an answer's head is enough).
async fn read_until_closed(rd: &mut (impl AsyncReadExt + Unpin), reply: &mut Vec<u8>) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = rd.read(&mut buf).await {
        if n == 0 {
            break;
        }
        if reply.len() < 1 << 20 {
            reply.extend_from_slice(&buf[..n]);
        }
    }
}

/// What the server sent on a raw connection within `limit`.
async fn read_reply(stream: &mut TcpStream, limit: Duration) -> Result<Vec<u8>, End> {
    let mut reply = Vec::new();
    let timed_out = tokio::time::timeout(limit, read_until_closed(stream, &mut reply))
        .await
        .is_err();
    match timed_out && reply.is_empty() {
        true => Err(End::Held),
        false => Ok(reply),
    }
}

/// An HTTP answer's status and whether its body is JSON; a connection the
/// server closed without a byte is `Closed`.
fn parse_reply(reply: &[u8], since: Instant) -> End {
    let text = String::from_utf8_lossy(reply);
    let Some(status) = text
        .strip_prefix("HTTP/1.1 ")
        .or_else(|| text.strip_prefix("HTTP/1.0 "))
        .and_then(|r| r.get(..3))
        .and_then(|s| s.parse::<u16>().ok())
    else {
        return End::Closed(since.elapsed());
    };
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    // A chunked body starts with its size line; JSON is what follows.
    let json = body.find('{').is_some_and(|i| {
        serde_json::Deserializer::from_str(&body[i..])
            .into_iter::<Value>()
            .next()
            .is_some_and(|v| v.is_ok())
    });
    End::Status(status, json)
}

async fn connect(aim: &Aim) -> Result<TcpStream, End> {
    TcpStream::connect(&aim.addr)
        .await
        .map_err(|e| End::Failed(format!("connect: {}", e.kind())))
}

fn head(aim: &Aim, method: &str, path: &str) -> String {
    let host = &aim.addr;
    let mut h = format!("{method} {path} HTTP/1.1\r\nhost: {host}\r\n");
    if let Some(key) = &aim.api_key {
        h.push_str(&format!("authorization: Bearer {key}\r\n"));
    }
    h
}

/// Slowloris: the request line, then one more header line a second, never
/// the blank line that ends them, for `hold` at most.
async fn drip_headers(aim: Arc<Aim>, hold: Duration) -> End {
    let started = Instant::now();
    let mut stream = match connect(&aim).await {
        Ok(s) => s,
        Err(e) => return e,
    };
    let (mut rd, mut wr) = stream.split();
    if wr
        .write_all(head(&aim, "POST", Endpoint::Chat.path()).as_bytes())
        .await
        .is_err()
    {
        return End::Closed(started.elapsed());
    }
    let drip = async {
        let mut i = 0u64;
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            i += 1;
            if wr
                .write_all(format!("x-slow-{i}: 1\r\n").as_bytes())
                .await
                .is_err()
            {
                return;
            }
        }
    };
    let mut reply = Vec::new();
    let read = read_until_closed(&mut rd, &mut reply);
    let over = tokio::time::sleep(hold);
    tokio::select! {
        _ = read => parse_reply(&reply, started),
        _ = drip => End::Closed(started.elapsed()),
        _ = over => End::Held,
    }
}

/// A connection opened and left silent for `hold` at most.
async fn idle(aim: Arc<Aim>, hold: Duration) -> End {
    let started = Instant::now();
    let mut stream = match connect(&aim).await {
        Ok(s) => s,
        Err(e) => return e,
    };
    match read_reply(&mut stream, hold).await {
        Ok(reply) => parse_reply(&reply, started),
        Err(end) => end,
    }
}

/// One mebibyte of headers on a model list request.
async fn big_headers(aim: &Aim) -> End {
    let started = Instant::now();
    let mut stream = match connect(aim).await {
        Ok(s) => s,
        Err(e) => return e,
    };
    let mut request = head(aim, "GET", MODELS_PATH);
    for i in 0..1024 {
        request.push_str(&format!("x-big-{i}: {}\r\n", "a".repeat(1000)));
    }
    request.push_str("\r\n");
    // The server may answer and close before all of it is sent.
    let _ = stream.write_all(request.as_bytes()).await;
    match read_reply(&mut stream, Duration::from_secs(30)).await {
        Ok(reply) => parse_reply(&reply, started),
        Err(end) => end,
    }
}

/// A chat request declaring a 1 GiB body, sent in 1 MiB pieces until the
/// server answers or stops reading.
async fn big_body(aim: &Aim) -> End {
    let started = Instant::now();
    let mut stream = match connect(aim).await {
        Ok(s) => s,
        Err(e) => return e,
    };
    let size: u64 = 1 << 30;
    let mut request = head(aim, "POST", Endpoint::Chat.path());
    request.push_str(&format!(
        "content-type: application/json\r\ncontent-length: {size}\r\n\r\n"
    ));
    let (mut rd, mut wr) = stream.split();
    let send = async {
        wr.write_all(request.as_bytes()).await?;
        let piece = vec![b' '; 1 << 20];
        for _ in 0..(size >> 20) {
            wr.write_all(&piece).await?;
        }
        Ok::<_, std::io::Error>(())
    };
    let mut reply = Vec::new();
    let read = read_until_closed(&mut rd, &mut reply);
    let limit = tokio::time::sleep(Duration::from_secs(60));
    tokio::select! {
        _ = read => {}
        _ = async { let _ = send.await; std::future::pending::<()>().await } => {}
        _ = limit => return End::Held,
    }
    parse_reply(&reply, started)
}

/// A chat body declared 2,000 bytes long and sent one byte a second.
async fn slow_body(aim: &Aim, hold: Duration) -> End {
    let started = Instant::now();
    let mut stream = match connect(aim).await {
        Ok(s) => s,
        Err(e) => return e,
    };
    let mut request = head(aim, "POST", Endpoint::Chat.path());
    request.push_str("content-type: application/json\r\ncontent-length: 2000\r\n\r\n");
    let (mut rd, mut wr) = stream.split();
    if wr.write_all(request.as_bytes()).await.is_err() {
        return End::Closed(started.elapsed());
    }
    let drip = async {
        loop {
            if wr.write_all(b" ").await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    };
    let mut reply = Vec::new();
    let read = read_until_closed(&mut rd, &mut reply);
    tokio::select! {
        _ = read => parse_reply(&reply, started),
        _ = drip => End::Closed(started.elapsed()),
        _ = tokio::time::sleep(hold) => End::Held,
    }
}

async fn post(aim: &Aim, body: String, limit: Duration) -> End {
    let mut req = aim
        .client
        .post(format!("{}/v1/chat/completions", aim.base))
        .header("content-type", "application/json")
        .timeout(limit)
        .body(body);
    if let Some(key) = &aim.api_key {
        req = req.bearer_auth(key);
    }
    match req.send().await {
        Ok(resp) => {
            let status = resp.status().as_u16();
            let json = match resp.bytes().await {
                Ok(b) => serde_json::from_slice::<Value>(&b).is_ok(),
                Err(_) => false,
            };
            End::Status(status, json)
        }
        Err(e) if e.is_timeout() => End::Held,
        Err(e) => End::Failed(without_url(&e)),
    }
}

fn without_url(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    if let Some(url) = e.url() {
        s = s.replace(url.as_str(), "URL");
    }
    s
}

/// Messages whose content is an array nested 100,000 deep.
async fn deep_json(aim: &Aim) -> End {
    let depth = 100_000;
    let body = format!(
        r#"{{"model":{},"messages":[{{"role":"user","content":{}{}}}]}}"#,
        Value::from(aim.model.as_str()),
        "[".repeat(depth),
        "]".repeat(depth)
    );
    post(aim, body, Duration::from_secs(60)).await
}

/// n = 16 choices of a million tokens each after a 3,000-word prompt,
/// streamed: the reply's first 5 s are read, then the client goes away.
async fn kv_hog(aim: &Aim) -> End {
    let body = json!({
        "model": aim.model,
        "messages": [{"role": "user", "content": "word ".repeat(3000)}],
        "n": 16,
        "max_tokens": 1_000_000,
        "stream": true,
    });
    let mut req = aim
        .client
        .post(format!("{}/v1/chat/completions", aim.base))
        .timeout(Duration::from_secs(120))
        .json(&body);
    if let Some(key) = &aim.api_key {
        req = req.bearer_auth(key);
    }
    let resp = match req.send().await {
        Ok(r) => r,
        Err(e) if e.is_timeout() => return End::Held,
        Err(e) => return End::Failed(without_url(&e)),
    };
    let status = resp.status().as_u16();
    if status != 200 {
        let json = resp
            .bytes()
            .await
            .is_ok_and(|b| serde_json::from_slice::<Value>(&b).is_ok());
        return End::Status(status, json);
    }
    // Served: read a while, then drop it (the server should free it).
    let mut resp = resp;
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while let Ok(Some(_)) = resp.chunk().await {}
    })
    .await;
    End::Status(200, false)
}

/// `n` short chat requests at once, each on its own connection.
async fn burst(aim: &Arc<Aim>, n: usize) -> Vec<End> {
    let body = json!({
        "model": aim.model,
        "messages": [{"role": "user", "content": "Count to three."}],
        "max_tokens": 8,
    })
    .to_string();
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let aim = aim.clone();
            let body = body.clone();
            tokio::spawn(async move { post(&aim, body, Duration::from_secs(600)).await })
        })
        .collect();
    let mut ends = Vec::with_capacity(n);
    for t in tasks {
        ends.push(t.await.unwrap_or_else(|e| End::Failed(e.to_string())));
    }
    ends
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_read_as_status_and_json_or_as_a_close() {
        let t = Instant::now();
        let r = b"HTTP/1.1 413 Payload Too Large\r\ncontent-type: application/json\r\n\r\n{\"error\":{}}";
        assert_eq!(parse_reply(r, t), End::Status(413, true));
        let html = b"HTTP/1.1 431 Request Header Fields Too Large\r\n\r\n";
        assert_eq!(parse_reply(html, t), End::Status(431, false));
        assert!(matches!(parse_reply(b"", t), End::Closed(_)));
    }

    #[test]
    fn only_4xx_503_served_and_timeouts_are_clean() {
        assert!(End::Status(200, false).clean());
        assert!(End::Status(503, true).clean());
        assert!(End::Status(431, false).clean());
        assert!(!End::Status(500, true).clean());
        assert!(End::Closed(Duration::from_secs(30)).clean());
        assert!(!End::Held.clean());
        assert!(!End::Failed("connect: ConnectionRefused".into()).clean());
    }
}
