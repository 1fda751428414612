//! Loading a model: where it is (`source`), its file formats (`gguf`,
//! safetensors through `weights`), hyper-parameters (`config`), tokenizer,
//! chat template and EOS set, read into [`ModelParts`]; [`LoadedModel`]
//! builds the network from them through the models registry, and
//! [`convert()`] writes them out again as an MLX/HF folder.
//!
//! The readers here know no architecture; the registry (`models`) does.

pub(crate) mod chat_template;
pub(crate) mod config;
pub(crate) mod convert;
pub(crate) mod eos;
pub(crate) mod gguf;
mod gguf_affine;
mod loaded;
mod parts;
pub(crate) mod source;
pub(crate) mod tokenizer;
pub(crate) mod weights;

pub use chat_template::{ChatTemplate, TemplateInput};
pub use config::{HyperParams, ModelConfig, QuantizationConfig};
pub use convert::{convert, ConvertReport, ExportDtype};
pub use eos::EosSet;
pub use gguf::GgufModelFile;
pub use loaded::LoadedModel;
pub use parts::{eos_for_dir, ModelParts};
pub use source::ModelSource;
pub use tokenizer::{IncrementalDecoder, TextTokenizer};
pub use weights::{TensorMap, WeightMode};
