//! Loading a model: where it is (`source`), its file formats (`gguf`,
//! safetensors through `weights`), hyper-parameters (`config`), tokenizer,
//! chat template and EOS set, read into [`ModelParts`]; [`convert()`]
//! writes them out again as an MLX/HF folder, and `models::LoadedModel`
//! builds the network from them.
//!
//! The readers here know no architecture: each architecture's file under
//! `models/` declares its [`Family`] (how its files describe it), and the
//! readers are handed the registry's lookup ([`Families`]).

pub(crate) mod chat_template;
pub(crate) mod config;
pub(crate) mod convert;
pub(crate) mod eos;
pub mod family;
pub(crate) mod gguf;
mod gguf_affine;
mod parts;
pub(crate) mod source;
pub(crate) mod tokenizer;
pub(crate) mod weights;

pub use chat_template::{ChatTemplate, TemplateInput};
pub use config::{HyperParams, ModelConfig, QuantizationConfig};
pub use convert::{convert, ConvertReport, ExportDtype};
pub use eos::EosSet;
pub use family::{Families, Family};
pub use gguf::GgufModelFile;
pub use parts::{eos_for_dir, ModelParts};
pub use source::ModelSource;
pub use tokenizer::{IncrementalDecoder, TextTokenizer};
pub use weights::{TensorMap, WeightMode};
