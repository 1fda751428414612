//! A model ready to run: its parts read from its files (`loading`, told
//! the architectures by the registry) and its network built by the
//! registry, with the tokenizer, chat template and EOS set it is served
//! with.

use super::{registry, CausalLm};
use crate::error::Result;
use crate::loading::chat_template::{ChatTemplate, TemplateInput};
use crate::loading::eos::EosSet;
use crate::loading::source::ModelSource;
use crate::loading::tokenizer::TextTokenizer;
use crate::loading::weights::WeightMode;
use crate::loading::ModelParts;

pub struct LoadedModel {
    /// A short name for responses and logs (file or folder name).
    pub name: String,
    pub model: Box<dyn CausalLm>,
    pub tokenizer: TextTokenizer,
    pub template: ChatTemplate,
    pub eos: EosSet,
}

impl LoadedModel {
    /// Loads what `--model` names (alias, path or cached HF repo id).
    pub fn load(spec: &str) -> Result<Self> {
        Self::load_source(&ModelSource::resolve(spec)?, WeightMode::for_platform())
    }

    pub fn load_source(source: &ModelSource, mode: WeightMode) -> Result<Self> {
        crate::cpu::check_kernels()?;
        crate::cpu::blas::configure_threads();
        let heap_fixed = crate::cpu::heap::configure();
        #[cfg(not(target_os = "macos"))]
        tracing::info!(
            device = %crate::device::Device::current(),
            weights = ?mode,
            kernels = %crate::cpu::kernels::chosen(),
            heap_mmap_threshold_fixed = heap_fixed,
            openblas = crate::cpu::blas::openblas_core().as_deref().unwrap_or("not loaded"),
            "kernels: {}; quantized matmul on the CPU: {}; attention: {}; layers: {}",
            crate::cpu::active_kernels(),
            crate::cpu::qmm::path(),
            crate::cpu::attention::describe(),
            crate::cpu::layer::describe()
        );
        #[cfg(target_os = "macos")]
        let _ = heap_fixed;
        let parts = ModelParts::read(source, mode, registry::family)?;
        let model = registry::load(parts.config, &parts.hyper, &parts.weights)?;
        Ok(LoadedModel {
            name: parts.name,
            model,
            tokenizer: parts.tokenizer,
            template: parts.template,
            eos: parts.eos,
        })
    }

    /// Renders the chat template and tokenizes the result.
    pub fn prompt_tokens(&self, input: &TemplateInput) -> Result<Vec<u32>> {
        self.tokenizer.encode(&self.template.render(input)?)
    }
}
