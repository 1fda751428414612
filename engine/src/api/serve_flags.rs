//! afm-serve's flags, and the one place they become the engine's and the
//! server's settings. Every default comes from [`EngineConfig::default`]
//! and [`ServerConfig::default`], and afm-test's in-process target parses
//! its settings through these same flags, so what CI tests in-process is
//! what a flagless `afm-serve` runs.

use crate::api::batch::BatchConfig;
use crate::api::http_server::ServerConfig;
use crate::api::listener::ConnectionLimits;
use crate::cpu::kernels::Kernels;
use crate::loading::WeightMode;
use crate::parsers::ToolCallFormat;
use crate::runtime::{EngineConfig, OverlongMaxTokens};

fn engine() -> EngineConfig {
    EngineConfig::default()
}

fn server() -> ServerConfig {
    ServerConfig::default()
}

/// How `afm-serve` serves a model.
#[derive(clap::Args, Debug, Clone)]
pub struct ServeFlags {
    /// Model to serve: the alias `smollm2`, `gemma3-270m` or `conformance`,
    /// a .gguf file, an MLX/HF folder, or an HF repo id already in the
    /// local HF cache.
    #[arg(long, default_value = "smollm2")]
    pub model: String,
    /// Address to listen on. Anything but loopback requires --api-key.
    #[arg(long, default_value_t = server().host)]
    pub host: String,
    /// Port to listen on.
    #[arg(long, default_value_t = server().port)]
    pub port: u16,
    /// Key required on /v1/* as `Authorization: Bearer KEY` or `x-api-key`
    /// (default: none on loopback; mandatory on any other address).
    #[arg(long)]
    pub api_key: Option<String>,
    /// Requests decoded together at most; more wait in a queue. Raise it
    /// for throughput under load, lower it to cap memory.
    #[arg(long, default_value_t = engine().concurrent)]
    pub concurrent: usize,
    /// Most prompt tokens prefilled in one step, over all requests.
    #[arg(long, default_value_t = engine().prefill_chunk)]
    pub prefill_chunk: usize,
    /// Prefill time a step may add while other requests decode, as a share
    /// of their own step time: 1 keeps their inter-token latency within
    /// about twice its pace while a long prompt is read; higher reads it
    /// sooner and slows them more; 0 always takes whole --prefill-chunk
    /// chunks.
    #[arg(long, default_value_t = engine().prefill_share)]
    pub prefill_share: f64,
    /// Turn the prefix cache off (on by default: requests that share a
    /// prompt prefix reuse its KV). Turn it off to measure cold prefill.
    #[arg(long)]
    pub no_prefix_caching: bool,
    /// Accepted for older scripts: the prefix cache is on by default.
    #[arg(long, hide = true, conflicts_with = "no_prefix_caching")]
    pub enable_prefix_caching: bool,
    /// Memory budget of the prefix cache in MiB; the least recently used
    /// prefixes are evicted beyond it. Raise it for long shared prompts.
    #[arg(long, default_value_t = engine().prefix_cache_bytes >> 20)]
    pub prefix_cache_mb: usize,
    /// Memory budget in MiB of the recurrent-state snapshots a hybrid
    /// model's prefix cache keeps (Qwen3.5, Qwen3-Next: a prefix is
    /// reusable only where one was kept); least recently used first out.
    #[arg(long, default_value_t = engine().prefix_snapshot_bytes >> 20)]
    pub prefix_snapshot_mb: usize,
    /// Turn grammar constraints off (on by default: `response_format`
    /// json_schema / json_object, strict tools and `tool_choice` required
    /// or named are enforced by llguidance). Off, such requests get a 400
    /// naming this flag, never an unconstrained 200.
    #[arg(long)]
    pub no_grammar_constraints: bool,
    /// Accepted for older scripts: grammar constraints are on by default.
    #[arg(long, hide = true, conflicts_with = "no_grammar_constraints")]
    pub enable_grammar_constraints: bool,
    /// Tool-call format: `auto` (default: from the chat template's
    /// markers), hermes, qwen3_coder, llama3_json, mistral or gemma4. Set
    /// it when a replaced template's markers are not recognized.
    #[arg(long, default_value = "auto")]
    pub tool_call_parser: String,
    /// A Jinja file replacing the model's chat template (default: the
    /// model's own), e.g. to offer tools to a model whose template has none.
    #[arg(long)]
    pub chat_template: Option<std::path::PathBuf>,
    /// Largest `top_logprobs` a request may ask for; larger ones get a 400.
    #[arg(long, default_value_t = engine().max_logprobs)]
    pub max_logprobs: usize,
    /// Reasoning tokens a thinking model may spend when a request sets no
    /// budget (default: no limit but max_tokens). Set it so reasoning
    /// cannot eat the whole max_tokens.
    #[arg(long)]
    pub thinking_budget: Option<usize>,
    /// Batch-invariant decoding: a request's output is the same bytes
    /// alone or in any batch slot, at about half the batch throughput
    /// (default: off). Turn it on for reproducible evaluations.
    #[arg(long)]
    pub deterministic: bool,
    /// How quantized weights are held: `auto` (default: packed wherever a
    /// fast kernel multiplies them, i.e. always on Metal and, on the CPU,
    /// MLX 4/8-bit and the GGUF types with an affine form) or `f32`
    /// (dequantize every weight at load: 4-8x the memory, the reference
    /// numerics).
    #[arg(long, default_value = "auto")]
    pub dtype: String,
    /// Kernels the model runs with: `auto` (default: afm's CPU primitives
    /// where they run, i.e. MLX's CPU backend on Linux; MLX's own ops on
    /// Metal and CUDA), `mlx` (MLX's ops only: the path a GPU takes) or
    /// `afm` (the primitives; an error where they cannot run). The
    /// environment's AFM_KERNELS gives the same choice.
    #[arg(long, value_name = "auto|mlx|afm")]
    pub kernels: Option<Kernels>,
    /// Refuse (400) a request whose prompt and max_tokens together pass the
    /// model's context, as OpenAI does. By default max_tokens is cut to
    /// what fits and such a reply ends with finish reason `length`, as
    /// llama.cpp serves it: coding agents send max_tokens 32000 to any model.
    #[arg(long)]
    pub refuse_overlong_max_tokens: bool,
    /// max_tokens of requests that give none.
    #[arg(long, default_value_t = engine().default_max_tokens)]
    pub max_tokens: usize,
    /// Log level: error, warn, info, debug or trace.
    #[arg(long, default_value = "info")]
    pub log_level: String,
    /// Largest request body accepted, in MiB; larger ones get a 413.
    #[arg(long, default_value_t = server().max_body_bytes >> 20)]
    pub max_body_mb: usize,
    /// Generation requests that may wait for a decode slot beyond the
    /// --concurrent running; one more gets a 503 with Retry-After.
    #[arg(long, default_value_t = server().max_queue)]
    pub max_queue: usize,
    /// Memory in MiB the Batch API's file store may hold: uploaded input
    /// files and the output and error files batches write, together. An
    /// upload past it gets a 413; a batch whose results do not fit fails.
    #[arg(long, default_value_t = server().batch.store_bytes >> 20)]
    pub batch_store_mb: usize,
    /// Batch API lines in the engine at once, over all batches. Batch
    /// lines also yield decode slots to interactive requests; raise this
    /// to finish batches sooner on an otherwise idle server.
    #[arg(long, default_value_t = server().batch.concurrency)]
    pub batch_concurrency: usize,
    /// Connections open at once; one more gets a 503 and is closed.
    #[arg(long, default_value_t = server().limits.max_connections)]
    pub max_connections: usize,
    /// Seconds a client has to send a request's headers, and its body (408
    /// past it); idle kept-alive connections close after as long. 0: none.
    #[arg(long, default_value_t = server().limits.read_timeout.map_or(0, |d| d.as_secs()))]
    pub read_timeout: u64,
    /// Memory in MiB the running requests' KV may take at most, counted
    /// for each as prompt + max_tokens: a request waits until it fits, and
    /// one that cannot fit alone gets a 400 (default: a quarter of the
    /// memory of the device the model runs on: a GPU's own, else the
    /// machine's).
    #[arg(long, default_value_t = engine().kv_budget_bytes >> 20)]
    pub max_kv_mb: usize,
    /// Freed memory in MiB that MLX may keep for reuse (its buffer cache);
    /// beyond it freed buffers go back to the device at once (default:
    /// 1024, or MLX's own bound where smaller, as on the CPU).
    #[arg(long)]
    pub mlx_cache_mb: Option<usize>,
}

impl ServeFlags {
    /// The flags as afm-serve would read `args` (no program name), for
    /// callers that start the engine themselves with afm-serve's settings.
    pub fn parse_args<I: IntoIterator<Item = S>, S: Into<String>>(args: I) -> anyhow::Result<Self> {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            flags: ServeFlags,
        }
        let argv = std::iter::once("afm-serve".to_string()).chain(args.into_iter().map(Into::into));
        Ok(<Cli as clap::Parser>::try_parse_from(argv)?.flags)
    }

    /// The engine's settings. Reads the `--chat-template` file.
    pub fn engine_config(&self) -> anyhow::Result<EngineConfig> {
        anyhow::ensure!(self.concurrent >= 1, "--concurrent must be at least 1");
        anyhow::ensure!(
            self.prefill_chunk >= 1,
            "--prefill-chunk must be at least 1"
        );
        anyhow::ensure!(
            self.prefill_share.is_finite() && self.prefill_share >= 0.0,
            "--prefill-share must be a number of at least 0, not {}",
            self.prefill_share
        );
        let tool_call_parser = match self.tool_call_parser.as_str() {
            "auto" => None,
            name => Some(ToolCallFormat::from_name(name).ok_or_else(|| {
                let known: Vec<&str> = ToolCallFormat::ALL.iter().map(|f| f.name()).collect();
                anyhow::anyhow!(
                    "--tool-call-parser: unknown parser '{name}' (auto, {})",
                    known.join(", ")
                )
            })?),
        };
        let chat_template = match &self.chat_template {
            Some(path) => Some(std::fs::read_to_string(path).map_err(|e| {
                anyhow::anyhow!("--chat-template: cannot read {}: {e}", path.display())
            })?),
            None => None,
        };
        let defaults = engine();
        let weight_mode = match self.dtype.as_str() {
            "auto" => defaults.weight_mode,
            "f32" => Some(WeightMode::Dequantize),
            other => anyhow::bail!("--dtype: unknown value '{other}' (auto, f32)"),
        };
        Ok(EngineConfig {
            concurrent: self.concurrent,
            prefill_chunk: self.prefill_chunk,
            prefill_share: self.prefill_share,
            prefix_caching: !self.no_prefix_caching
                && (self.enable_prefix_caching || defaults.prefix_caching),
            prefix_cache_bytes: self.prefix_cache_mb << 20,
            prefix_snapshot_bytes: self.prefix_snapshot_mb << 20,
            max_logprobs: self.max_logprobs,
            default_max_tokens: self.max_tokens,
            grammar_constraints: !self.no_grammar_constraints
                && (self.enable_grammar_constraints || defaults.grammar_constraints),
            deterministic: self.deterministic,
            tool_call_parser,
            thinking_budget: self.thinking_budget,
            chat_template,
            weight_mode,
            kv_budget_bytes: self.max_kv_mb << 20,
            mlx_cache_bytes: self.mlx_cache_mb.map(|mb| mb << 20),
            kernels: self.kernels,
            overlong_max_tokens: match self.refuse_overlong_max_tokens {
                true => OverlongMaxTokens::Refuse,
                false => defaults.overlong_max_tokens,
            },
        })
    }

    /// The HTTP server's settings.
    pub fn server_config(&self) -> anyhow::Result<ServerConfig> {
        anyhow::ensure!(
            self.batch_concurrency >= 1,
            "--batch-concurrency must be at least 1"
        );
        let loopback = self
            .host
            .parse::<std::net::IpAddr>()
            .map(|ip| ip.is_loopback())
            .unwrap_or(self.host == "localhost");
        anyhow::ensure!(
            loopback || self.api_key.is_some(),
            "--api-key is required when binding the non-loopback address {}",
            self.host
        );
        Ok(ServerConfig {
            host: self.host.clone(),
            port: self.port,
            api_key: self.api_key.clone(),
            max_body_bytes: self.max_body_mb << 20,
            max_queue: self.max_queue,
            limits: ConnectionLimits {
                max_connections: self.max_connections,
                read_timeout: (self.read_timeout > 0)
                    .then(|| std::time::Duration::from_secs(self.read_timeout)),
            },
            batch: BatchConfig {
                store_bytes: self.batch_store_mb << 20,
                concurrency: self.batch_concurrency,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_flags_are_the_engine_and_server_defaults() {
        let flags = ServeFlags::parse_args(Vec::<String>::new()).unwrap();
        let (got, want) = (flags.engine_config().unwrap(), EngineConfig::default());
        assert_eq!(format!("{got:?}"), format!("{want:?}"));
        let (got, want) = (flags.server_config().unwrap(), ServerConfig::default());
        assert_eq!(format!("{got:?}"), format!("{want:?}"));
    }

    #[test]
    fn dtype_f32_dequantizes_and_unknown_values_are_named() {
        let f32 = ServeFlags::parse_args(["--dtype", "f32"]).unwrap();
        assert_eq!(
            f32.engine_config().unwrap().weight_mode,
            Some(WeightMode::Dequantize)
        );
        let bad = ServeFlags::parse_args(["--dtype", "q3"]).unwrap();
        let err = bad.engine_config().unwrap_err().to_string();
        assert!(err.contains("--dtype") && err.contains("q3"), "{err}");
    }

    #[test]
    fn grammar_and_prefix_cache_are_on_by_default_and_can_be_turned_off() {
        let on = ServeFlags::parse_args(Vec::<String>::new())
            .unwrap()
            .engine_config()
            .unwrap();
        assert!(on.grammar_constraints && on.prefix_caching);
        let off = ServeFlags::parse_args(["--no-grammar-constraints", "--no-prefix-caching"])
            .unwrap()
            .engine_config()
            .unwrap();
        assert!(!off.grammar_constraints && !off.prefix_caching);
        let old =
            ServeFlags::parse_args(["--enable-prefix-caching", "--enable-grammar-constraints"])
                .unwrap()
                .engine_config()
                .unwrap();
        assert!(old.grammar_constraints && old.prefix_caching);
    }
}
