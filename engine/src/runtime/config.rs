//! Engine-wide settings: the server's flags (`api::ServeFlags` reads them,
//! taking every default from here).

use crate::cpu::kernels::Kernels;
use crate::device::{self, Device};
use crate::loading::weights::WeightMode;
use crate::parsers::ToolCallFormat;
use crate::runtime::request::OverlongMaxTokens;

/// Engine-wide settings (the server's flags).
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Sequences decoded together at most (`--concurrent`).
    pub concurrent: usize,
    /// Reuse KV of cached prompt prefixes (on; `--no-prefix-caching`).
    pub prefix_caching: bool,
    /// Memory budget of the prefix cache.
    pub prefix_cache_bytes: usize,
    /// Memory budget of the prefix cache's recurrent-state snapshots
    /// (models with recurrent layers), apart from the KV's.
    pub prefix_snapshot_bytes: usize,
    /// Largest `top_logprobs` accepted (`--max-logprobs`).
    pub max_logprobs: usize,
    /// `max_tokens` when a request gives none (`--max-tokens`).
    pub default_max_tokens: usize,
    /// Most prompt tokens prefilled per step over all sequences
    /// (`--prefill-chunk`).
    pub prefill_chunk: usize,
    /// Prefill time a step may add beside running decodes, as a share of
    /// their own step time (`--prefill-share`), so a long prompt never holds
    /// the streams for long; 0: whole `prefill_chunk`s always.
    pub prefill_share: f64,
    /// How weights are held (`--dtype`); `None`: the platform's own
    /// ([`WeightMode::for_platform`]), decided when the model loads, after
    /// the kernels are (`cpu::kernels`).
    pub weight_mode: Option<WeightMode>,
    /// Enforce `response_format`, strict tools and forced tool calls with
    /// llguidance (on; `--no-grammar-constraints`); off, such requests are
    /// refused with a 400 naming the flag.
    pub grammar_constraints: bool,
    /// Batch-invariant mode (`--deterministic`): a request's output is bit
    /// for bit the same alone, in any batch slot, chunked or cached.
    pub deterministic: bool,
    /// Tool-call format (`--tool-call-parser`); `None` detects it from
    /// the chat template.
    pub tool_call_parser: Option<ToolCallFormat>,
    /// Reasoning tokens a request may spend when it sets no
    /// `thinking_budget` (`--thinking-budget`).
    pub thinking_budget: Option<usize>,
    /// Jinja source replacing the model's chat template (`--chat-template`).
    pub chat_template: Option<String>,
    /// KV the running sequences may hold together, each counted at its
    /// prompt plus max_tokens (`--max-kv-mb`): admission waits until the
    /// next one fits, and one that cannot fit alone is refused.
    pub kv_budget_bytes: usize,
    /// Freed device memory MLX may keep for reuse (`--mlx-cache-mb`);
    /// `None`: [`device::DEFAULT_CACHE_LIMIT`] or MLX's own default where
    /// that is smaller.
    pub mlx_cache_bytes: Option<usize>,
    /// afm's CPU primitives or MLX's own ops (`--kernels`); `None` leaves
    /// the choice to `AFM_KERNELS`, else `auto` (`cpu::kernels`).
    pub kernels: Option<Kernels>,
    /// A `max_tokens` past the context beside the prompt: cut to what fits
    /// (default) or refused (`--refuse-overlong-max-tokens`).
    pub overlong_max_tokens: OverlongMaxTokens,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            concurrent: 8,
            prefix_caching: true,
            prefix_cache_bytes: 1 << 30,
            prefix_snapshot_bytes: 512 << 20,
            max_logprobs: 20,
            default_max_tokens: 512,
            prefill_chunk: 256,
            prefill_share: 1.0,
            weight_mode: None,
            grammar_constraints: true,
            deterministic: false,
            tool_call_parser: None,
            thinking_budget: None,
            chat_template: None,
            // A quarter of the memory the model runs in (the GPU's own on
            // a discrete card), in whole MiB as --max-kv-mb gives it.
            kv_budget_bytes: (Device::current().memory_bytes / 4) >> 20 << 20,
            mlx_cache_bytes: None,
            kernels: None,
            overlong_max_tokens: OverlongMaxTokens::Cut,
        }
    }
}

impl EngineConfig {
    /// Bounds MLX's buffer cache as configured; returns the bound.
    pub fn bound_mlx_cache(&self) -> usize {
        match self.mlx_cache_bytes {
            Some(bytes) => device::bound_cache(bytes, false),
            None => device::bound_cache(device::DEFAULT_CACHE_LIMIT, true),
        }
    }
}
