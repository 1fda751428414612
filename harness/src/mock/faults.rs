//! The ways a mock can misbehave on purpose, one per real bug class a
//! benchmark must not count as success, given as `--fault NAME[:ARG]`.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    /// A request that arrives while another is in flight streams the
    /// other's reply (a shared buffer between sequences).
    CrossTalk,
    /// A strict-schema request that overlaps another gets no output.
    EmptyStrict,
    /// Half-way through, the stream pauses this many ms.
    Stall { ms: f64 },
    /// Half-way through, the connection is cut.
    Reset,
    /// The usage reports three output tokens more than were sent (more
    /// than an end-of-turn token counted).
    Miscount,
    /// A dropped client's generation goes on to the end (counted as
    /// running in /metrics), as a server that never notices a cancel.
    IgnoreCancel,
    /// A request that arrives while another is in flight is refused with
    /// 503, as a server that generates one request at a time and admits
    /// fail-fast (vllm-mlx's simple engine: `text_generation_busy`).
    Busy,
    // Broken servers (the harness must end, name it and stay bounded):
    /// The reply never ends: a token every ITL, forever (an SSE stream,
    /// or to a request that does not stream, a JSON body).
    Endless,
    /// A short reply, one byte a second.
    SlowBytes,
    /// A 200 whose JSON body runs to 2 GiB.
    HugeBody,
    /// A 200 that declares a 1 GiB body (Content-Length) and sends a
    /// byte a second.
    HugeLength,
    /// The stream ends without `data: [DONE]`.
    NoDone,
    /// Lines that are neither SSE fields nor JSON inside the stream.
    MalformedSse,
    /// An HTML page with status 200.
    Html200,
    /// Bytes that are not UTF-8 inside a data line.
    InvalidUtf8,
    /// A redirect to itself.
    RedirectLoop,
    /// A Content-Length the body does not reach.
    LyingLength,
    /// JSON arrays nested 100,000 deep.
    JsonBomb,
    /// `GET /v1/models` never ends.
    EndlessModels,
}

impl Fault {
    pub const NAMES: &'static str =
        "cross-talk, empty-strict, stall:MS, reset, miscount, ignore-cancel, busy";
}

impl FromStr for Fault {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once(':') {
            None => match s {
                "cross-talk" => Ok(Fault::CrossTalk),
                "empty-strict" => Ok(Fault::EmptyStrict),
                "reset" => Ok(Fault::Reset),
                "miscount" => Ok(Fault::Miscount),
                "ignore-cancel" => Ok(Fault::IgnoreCancel),
                "busy" => Ok(Fault::Busy),
                "endless" => Ok(Fault::Endless),
                "slow-bytes" => Ok(Fault::SlowBytes),
                "huge-body" => Ok(Fault::HugeBody),
                "huge-length" => Ok(Fault::HugeLength),
                "no-done" => Ok(Fault::NoDone),
                "malformed-sse" => Ok(Fault::MalformedSse),
                "html-200" => Ok(Fault::Html200),
                "invalid-utf8" => Ok(Fault::InvalidUtf8),
                "redirect-loop" => Ok(Fault::RedirectLoop),
                "lying-length" => Ok(Fault::LyingLength),
                "json-bomb" => Ok(Fault::JsonBomb),
                "endless-models" => Ok(Fault::EndlessModels),
                _ => Err(format!("--fault {s:?}: the faults are {}", Fault::NAMES)),
            },
            Some(("stall", ms)) => ms
                .parse::<f64>()
                .ok()
                .filter(|m| m.is_finite() && *m >= 0.0)
                .map(|ms| Fault::Stall { ms })
                .ok_or_else(|| format!("--fault {s:?}: stall takes milliseconds")),
            Some(_) => Err(format!("--fault {s:?}: the faults are {}", Fault::NAMES)),
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::CrossTalk => write!(f, "cross-talk"),
            Fault::EmptyStrict => write!(f, "empty-strict"),
            Fault::Stall { ms } => write!(f, "stall:{ms}"),
            Fault::Reset => write!(f, "reset"),
            Fault::Miscount => write!(f, "miscount"),
            Fault::IgnoreCancel => write!(f, "ignore-cancel"),
            Fault::Busy => write!(f, "busy"),
            Fault::Endless => write!(f, "endless"),
            Fault::SlowBytes => write!(f, "slow-bytes"),
            Fault::HugeBody => write!(f, "huge-body"),
            Fault::HugeLength => write!(f, "huge-length"),
            Fault::NoDone => write!(f, "no-done"),
            Fault::MalformedSse => write!(f, "malformed-sse"),
            Fault::Html200 => write!(f, "html-200"),
            Fault::InvalidUtf8 => write!(f, "invalid-utf8"),
            Fault::RedirectLoop => write!(f, "redirect-loop"),
            Fault::LyingLength => write!(f, "lying-length"),
            Fault::JsonBomb => write!(f, "json-bomb"),
            Fault::EndlessModels => write!(f, "endless-models"),
        }
    }
}
