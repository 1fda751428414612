//! The model's text side, shared with callers' threads: tokenizer, chat
//! template, EOS set, grammar compiler and output formats. All of it is
//! thread-safe; the weights stay on the engine thread.

use crate::error::Result;
use crate::loading::chat_template::ChatTemplate;
use crate::loading::eos::EosSet;
use crate::loading::tokenizer::TextTokenizer;
use crate::models::CausalLm;
use crate::models::LoadedModel;
use crate::parsers::{ReasoningFormat, ToolCallFormat};
use crate::runtime::config::EngineConfig;
use crate::runtime::grammar::{GrammarCompiler, ReasoningPrefix};
use crate::runtime::request::RequestLimits;

pub struct ModelText {
    pub name: String,
    pub tokenizer: TextTokenizer,
    pub template: ChatTemplate,
    pub eos: EosSet,
    pub limits: RequestLimits,
    /// Compiles request constraints (always built, so schemas are checked
    /// even when constraints are not enforced).
    pub grammar: GrammarCompiler,
    /// How this model writes tool calls (flag, else from the template).
    pub tool_format: ToolCallFormat,
    /// How this model marks reasoning (from the template).
    pub reasoning: ReasoningFormat,
    /// The tokens the engine writes to end reasoning at the budget.
    pub forced_close: Vec<u32>,
    /// The end of reasoning as constrained grammars see it.
    pub reasoning_prefix: ReasoningPrefix,
}

impl ModelText {
    /// Splits a loaded model into its text side and its network, and
    /// derives the formats the engine's flags select.
    pub fn split(loaded: LoadedModel, config: &EngineConfig) -> Result<(Self, Box<dyn CausalLm>)> {
        let LoadedModel {
            name,
            model,
            tokenizer,
            template,
            eos,
        } = loaded;
        let vocab_size = model.config().vocab_size;
        let limits = RequestLimits {
            max_logprobs: config.max_logprobs,
            default_max_tokens: config.default_max_tokens,
            context_length: model.config().max_position_embeddings,
            vocab_size,
        };
        let grammar = GrammarCompiler::new(&tokenizer, &eos, vocab_size)?;
        let tool_format = config
            .tool_call_parser
            .unwrap_or_else(|| ToolCallFormat::detect(template.source()));
        let reasoning = ReasoningFormat::detect(template.source());
        let forced_close = tokenizer.encode(reasoning.forced_close())?;
        let text = ModelText {
            reasoning_prefix: ReasoningPrefix::new(&tokenizer, reasoning.close()),
            grammar,
            tool_format,
            reasoning,
            forced_close,
            name,
            tokenizer,
            template,
            eos,
            limits,
        };
        Ok((text, model))
    }
}
