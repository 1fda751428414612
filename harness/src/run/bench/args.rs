//! afm-bench's settings: the load shape, what is sent, what is measured
//! and checked, and the checks that refuse impossible combinations before
//! a long run starts.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;

use super::scenario::BenchScenario;
use crate::bench::dataset::builtin::Prompts;
use crate::bench::load::arrivals::{Bound, Ramp, RampStrategy, Shape};
use crate::protocol::endpoint::Endpoint;
use crate::server::flags::TargetArgs;

/// The check kinds `--tolerate` takes.
pub const CHECK_KINDS: [&str; 7] = [
    "stream",
    "usage",
    "isolation",
    "schema",
    "tool_args",
    "replay",
    "alone",
];

#[derive(Args, Clone, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// How the server was started, recorded in the report (--url).
    #[arg(long)]
    pub server_flags: Option<String>,
    /// The API to load: chat, completions, messages (Anthropic) or
    /// responses (OpenAI Responses).
    #[arg(long, value_enum, default_value = "chat")]
    pub endpoint: Endpoint,

    // Load shape.
    /// Closed-loop levels: users, each with one request in flight.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    pub concurrency: Vec<usize>,
    /// Open-loop levels instead: arrivals per second ("inf": all at once).
    #[arg(long, value_delimiter = ',')]
    pub request_rate: Vec<f64>,
    /// Gamma shape of the gaps between arrivals (1: Poisson; lower is
    /// burstier).
    #[arg(long, default_value_t = 1.0)]
    pub burstiness: f64,
    /// Open loop: at most this many requests in flight; later arrivals
    /// wait for a slot (reported as queue time).
    #[arg(long)]
    pub max_concurrency: Option<usize>,
    /// Open loop: move the rate from --ramp-up-start-rps to
    /// --ramp-up-end-rps over the run (one level).
    #[arg(long, value_enum, requires_all = ["ramp_up_start_rps", "ramp_up_end_rps"])]
    pub ramp_up_strategy: Option<RampStrategy>,
    #[arg(long)]
    pub ramp_up_start_rps: Option<f64>,
    #[arg(long)]
    pub ramp_up_end_rps: Option<f64>,
    /// Requests per level and repetition (default 16 unless --duration).
    #[arg(long)]
    pub requests: Option<usize>,
    /// Seconds per level and repetition (with --requests: the first bound
    /// reached ends the level).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Requests sent before each level, at its load, and not measured.
    #[arg(long, default_value_t = 2)]
    pub warmup: usize,
    /// Passes over each level; throughput is their median.
    #[arg(long, default_value_t = 1)]
    pub repetitions: usize,
    /// Seed of arrivals and synthetic prompts.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,

    // What is sent.
    #[arg(long, default_value_t = 64)]
    pub max_tokens: u32,
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f64,
    /// short | long | shared-prefix | agents | FILE (default: short;
    /// shared-prefix for the prefix-cache scenario). agents: Codex's,
    /// Claude Code's and OpenCode's instructions and tools, whole, each
    /// turn a shell call and its output (`--turns`; --endpoint chat).
    #[arg(long)]
    pub prompts: Option<Prompts>,
    /// Synthetic prompts of this many tokens (the served model's tokens).
    #[arg(long)]
    pub input_len: Option<usize>,
    /// Synthetic requests' max_tokens (default --max-tokens).
    #[arg(long)]
    pub output_len: Option<u32>,
    /// Input and output lengths drawn from len * (1 +- ratio).
    #[arg(long, default_value_t = 0.0)]
    pub range_ratio: f64,
    /// Tokens of a prefix every synthetic prompt of a level shares.
    #[arg(long, default_value_t = 0)]
    pub prefix_len: usize,
    /// The served model's tokenizer.json, to count tokens with when the
    /// server has no /tokenize or count_tokens endpoint.
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
    /// Ask for exactly max_tokens (`ignore_eos`, where the server has it).
    #[arg(long)]
    pub ignore_eos: bool,
    /// User turns per conversation; each reply joins the history.
    #[arg(long, default_value_t = 1)]
    pub turns: usize,
    /// Streams that decode through each level beside its requests, each
    /// starting again when it ends: the report gives their inter-token
    /// latency while a long prompt of the level was read, and otherwise.
    #[arg(long, default_value_t = 0)]
    pub background_streams: usize,
    /// Tokens each background stream asks for (`ignore_eos`).
    #[arg(long, default_value_t = 128)]
    pub background_tokens: u32,
    /// Seconds a user waits between a reply and the next turn.
    #[arg(long, default_value_t = 0.0)]
    pub think_time: f64,
    /// Replay a JSONL trace at its timestamps (Mooncake's format or
    /// requests with `messages`/`prompt`).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Tokens per hash id of a Mooncake trace.
    #[arg(long, default_value_t = 512)]
    pub trace_block_size: usize,

    // What is measured.
    /// Percentiles reported beside p50/p90/p99.
    #[arg(long, value_delimiter = ',', default_value = "50,90,99")]
    pub percentiles: Vec<f64>,
    /// SLO targets, e.g. `--goodput ttft:500 tpot:100 e2el:5000` (ms;
    /// ttfa: first answer token).
    #[arg(long, num_args = 1..)]
    pub goodput: Vec<String>,
    /// Search the highest load whose correct goodput share stays at least
    /// PCT% (needs --goodput): over rates with --request-rate (the lowest
    /// given starts), else over concurrency.
    #[arg(long)]
    pub slo_search: Option<f64>,
    /// Stop a sweep at over-saturation: a level whose TTFT p50 is more
    /// than twice the first level's while its output tokens/s grew less
    /// than 10% over the level before (more load only queues).
    #[arg(long)]
    pub stop_at_saturation: bool,
    /// Levels a search may probe.
    #[arg(long, default_value_t = 6)]
    pub search_steps: usize,
    /// Do not check replies (markers and schema requests are not sent).
    #[arg(long)]
    pub no_verify: bool,
    /// Check kinds (stream, usage, isolation, schema, tool_args, replay,
    /// alone)
    /// whose failures are counted but do not make a reply corrupted: a
    /// known deviation of the server that should not hide the rest.
    #[arg(long, value_delimiter = ',')]
    pub tolerate: Vec<String>,
    /// Share of requests (0..1) that ask for a strict JSON schema whose
    /// constant is their own nonce. Default: 0.25 where a probe request
    /// finds the server enforces schemas, else 0.
    #[arg(long)]
    pub schema_share: Option<f64>,
    /// Replay this many temperature-0 replies of each level that had
    /// requests in flight together, one at a time after it, and compare
    /// (another request's text fails; 0: off).
    #[arg(long, default_value_t = 8)]
    pub verify_alone: usize,
    /// The server claims batch invariance: a reply that differs alone is
    /// a failure, not a figure (implied in-process with --deterministic).
    #[arg(long)]
    pub batch_invariant: bool,
    /// Percent of requests (0..100) the client drops after
    /// --request-cancellation-delay (AIPerf's flags).
    #[arg(long, default_value_t = 0.0)]
    pub request_cancellation_rate: f64,
    /// Seconds after sending that a cancelled request is dropped.
    #[arg(long, default_value_t = 0.0)]
    pub request_cancellation_delay: f64,
    /// Keep connections alive between requests (as AIPerf and GuideLLM
    /// do): a burst's TTFT then holds no connection set-up. Off by
    /// default: some servers (llama.cpp's) close a kept connection after
    /// a stream without saying so, and the next request on it fails.
    #[arg(long)]
    pub keep_alive: bool,
    /// Start measuring at this Unix time (seconds): several afm-bench
    /// processes, on one machine or many, start their first level together
    /// (then `afm-bench merge`).
    #[arg(long)]
    pub start_at: Option<f64>,
    /// Write every request's record to OUT/requests.jsonl.
    #[arg(long)]
    pub save_requests: bool,

    #[arg(long, value_enum, default_value = "sweep")]
    pub scenario: BenchScenario,
    /// In-process engine: batch-invariant mode for every variant.
    #[arg(long)]
    pub deterministic: bool,
    /// Where bench.json and bench.html go.
    #[arg(long, default_value = "afm-bench-report")]
    pub out: PathBuf,
}

impl BenchArgs {
    /// Refuses settings that cannot run, naming the flag.
    pub fn validate(&self) -> Result<()> {
        let args = self;
        if args.concurrency.is_empty() || args.concurrency.contains(&0) {
            bail!("--concurrency: levels must be at least 1");
        }
        if args.request_rate.iter().any(|r| r.is_nan() || *r <= 0.0) {
            bail!("--request-rate: rates must be positive (or inf)");
        }
        if args.requests == Some(0) || args.repetitions == 0 {
            bail!("--requests and --repetitions must be at least 1");
        }
        if args.duration.is_some_and(|d| d <= 0.0) {
            bail!("--duration must be positive");
        }
        if args.burstiness <= 0.0 {
            bail!("--burstiness must be positive");
        }
        if args.schema_share.is_some_and(|s| !(0.0..=1.0).contains(&s)) {
            bail!("--schema-share is a share between 0 and 1");
        }
        if !(0.0..1.0).contains(&args.range_ratio) {
            bail!("--range-ratio must be in [0, 1)");
        }
        if args.turns == 0 {
            bail!("--turns must be at least 1");
        }
        if args.slo_search.is_some() && args.goodput.is_empty() {
            bail!("--slo-search needs the SLO it searches for: --goodput ttft:MS ...");
        }
        if args.slo_search.is_some_and(|p| !(0.0..=100.0).contains(&p)) {
            bail!("--slo-search is a percentage");
        }
        if args.schema_share.is_some_and(|s| s > 0.0) && args.no_verify {
            bail!("--schema-share needs the checks (drop --no-verify)");
        }
        if let Some(k) = args
            .tolerate
            .iter()
            .find(|k| !CHECK_KINDS.contains(&k.as_str()))
        {
            bail!(
                "--tolerate {k:?}: the checks are {}",
                CHECK_KINDS.join(", ")
            );
        }
        if !(0.0..=100.0).contains(&args.request_cancellation_rate) {
            bail!("--request-cancellation-rate is a percentage");
        }
        if !(args.request_cancellation_delay.is_finite() && args.request_cancellation_delay >= 0.0)
        {
            bail!("--request-cancellation-delay is seconds, 0 or more");
        }
        if args.percentiles.iter().any(|p| !(0.0..=100.0).contains(p)) {
            bail!("--percentiles are between 0 and 100");
        }
        Ok(())
    }
    /// The levels of a run: open-loop rates, a ramp, or closed-loop users.
    pub fn shapes(&self) -> Vec<Shape> {
        let args = self;
        let open = |rate: f64, ramp: Option<Ramp>| Shape::Open {
            rate,
            burstiness: args.burstiness,
            max_concurrency: args.max_concurrency,
            ramp,
        };
        if let (Some(strategy), Some(start), Some(end)) = (
            args.ramp_up_strategy,
            args.ramp_up_start_rps,
            args.ramp_up_end_rps,
        ) {
            return vec![open(
                end,
                Some(Ramp {
                    strategy,
                    start,
                    end,
                }),
            )];
        }
        if !args.request_rate.is_empty() {
            return args.request_rate.iter().map(|&r| open(r, None)).collect();
        }
        args.concurrency
            .iter()
            .map(|&c| Shape::Closed { concurrency: c })
            .collect()
    }

    /// When a level ends: `--requests` (16 unless `--duration`), or
    /// `--duration`, or the first of both.
    pub fn bound(&self) -> Bound {
        Bound {
            requests: self.requests.or(if self.duration.is_some() {
                None
            } else {
                Some(16)
            }),
            duration_s: self.duration,
        }
    }

    /// The prompt set: `--prompts`, else shared-prefix prompts for the
    /// prefix-cache scenario and short ones otherwise.
    pub fn prompts(&self) -> Prompts {
        self.prompts.clone().unwrap_or(match self.scenario {
            BenchScenario::PrefixCache => Prompts::SharedPrefix,
            _ => Prompts::Short,
        })
    }
}
