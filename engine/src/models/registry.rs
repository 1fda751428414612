//! The one list of architectures the engine runs: each one's file
//! declares how its files describe it (its [`Family`]) and how it is built
//! (`load`); this only lists them. Adding an architecture is one file
//! under `models/` and one line here.

use crate::error::{EngineError, Result};
use crate::loading::config::{HyperParams, ModelConfig};
use crate::loading::family::Family;
use crate::loading::weights::TensorMap;

use super::causal_lm::CausalLm;
use super::{gemma3, gemma4, llama, qwen3, qwen3_5, qwen3_moe, qwen3_next};

/// One architecture: its files' description and its network's builder.
pub struct Architecture {
    pub family: &'static Family,
    /// Builds the network. `hyper` holds what the architecture reads
    /// beyond the common hyper-parameters.
    pub load: fn(ModelConfig, &HyperParams, &TensorMap) -> Result<Box<dyn CausalLm>>,
}

/// Every architecture, in the order errors list them.
pub static ARCHITECTURES: &[Architecture] = &[
    arch(&llama::FAMILY, llama::load),
    arch(&qwen3::FAMILY, qwen3::load),
    arch(&qwen3_moe::FAMILY, qwen3_moe::load),
    arch(&qwen3_next::FAMILY, qwen3_next::load),
    arch(&qwen3_5::FAMILY, qwen3_5::load),
    arch(&qwen3_5::MOE_FAMILY, qwen3_5::load),
    arch(&gemma3::FAMILY, gemma3::load),
    arch(&gemma4::FAMILY, gemma4::load),
];

const fn arch(
    family: &'static Family,
    load: fn(ModelConfig, &HyperParams, &TensorMap) -> Result<Box<dyn CausalLm>>,
) -> Architecture {
    Architecture { family, load }
}

/// The architecture any of its spellings names.
pub fn find(name: &str) -> Result<&'static Architecture> {
    ARCHITECTURES
        .iter()
        .find(|a| a.family.is_named(name))
        .ok_or_else(|| EngineError::UnsupportedArchitecture {
            name: name.to_string(),
            supported: ARCHITECTURES
                .iter()
                .map(|a| a.family.name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// The [`Families`](crate::loading::family::Families) lookup the readers
/// in `loading` are handed.
pub fn family(name: &str) -> Result<&'static Family> {
    Ok(find(name)?.family)
}

/// Builds the network `config` names.
pub fn load(
    config: ModelConfig,
    hyper: &HyperParams,
    weights: &TensorMap,
) -> Result<Box<dyn CausalLm>> {
    (find(&config.architecture)?.load)(config, hyper, weights)
}
