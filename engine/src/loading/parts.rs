//! A model as read from its GGUF file or MLX/HF folder: hyper-parameters,
//! weights, tokenizer, chat template and EOS set, before any network is
//! built.

use std::path::Path;

use serde::Deserialize;

use crate::error::{EngineError, Result};
use crate::loading::chat_template::ChatTemplate;
use crate::loading::config::{
    is_multimodal, quantization_of, quantization_overrides, read_json, HyperParams, ModelConfig,
};
use crate::loading::eos::EosSet;
use crate::loading::family::{Families, Family};
use crate::loading::gguf::GgufModelFile;
use crate::loading::source::ModelSource;
use crate::loading::tokenizer::TextTokenizer;
use crate::loading::weights::{TensorMap, WeightMode};

/// Group size MLX uses when `config.json` does not say.
const MLX_DEFAULT_GROUP_SIZE: i32 = 64;

/// A model as read from its file or folder, before the network is built:
/// `LoadedModel` builds one from it, and `convert` writes it out again
/// (with [`WeightMode::KeepQuantized`], tensors stay as stored).
pub struct ModelParts {
    /// A short name (file or folder name).
    pub name: String,
    /// How the architecture's files describe it.
    pub family: &'static Family,
    /// Resolved by the family (afm's architecture name, the weights' RoPE
    /// layout).
    pub config: ModelConfig,
    /// What the architecture reads beyond `config`.
    pub hyper: HyperParams,
    pub weights: TensorMap,
    pub tokenizer: TextTokenizer,
    pub template: ChatTemplate,
    pub eos: EosSet,
    /// The text of the BOS token, if the model names one.
    pub bos_token: Option<String>,
    /// The text of the EOS token (the tokenizer's `eos_token`), if named.
    pub eos_token: Option<String>,
}

impl ModelParts {
    /// Reads `source`; `families` names its architecture (the models
    /// registry's lookup).
    pub fn read(source: &ModelSource, mode: WeightMode, families: Families) -> Result<Self> {
        match source {
            ModelSource::Gguf(path) => Self::read_gguf(path, mode, families),
            ModelSource::SafetensorsDir(dir) => Self::read_dir(dir, mode, families),
        }
    }

    fn read_gguf(path: &Path, mode: WeightMode, families: Families) -> Result<Self> {
        let file = GgufModelFile::open(path)?;
        // An architecture we do not run is named before any missing key.
        let family = families(&file.require_string("general.architecture")?)?;
        let config = ModelConfig::from_gguf(&file)?;
        let hyper = HyperParams::from_gguf(&file, &config.architecture)?;
        let config = family.resolve(config, true);
        let tokenizer = TextTokenizer::from_gguf(&file)?;
        let token_text = |key: &str| -> Result<Option<String>> {
            Ok(file
                .usize(key)?
                .and_then(|id| tokenizer.id_to_token(id as u32)))
        };
        let bos_token = token_text("tokenizer.ggml.bos_token_id")?;
        let eos_token = token_text("tokenizer.ggml.eos_token_id")?;
        // A base model's file may carry no template: the architecture's
        // turn format then (llama.cpp falls back the same way).
        let source = match file.string("tokenizer.chat_template")? {
            Some(s) => s,
            None => family
                .default_chat_template
                .map(str::to_string)
                .ok_or_else(|| file.missing("tokenizer.chat_template"))?,
        };
        let template = ChatTemplate::new(&source, bos_token.clone(), eos_token.clone())?;
        let mut eos = EosSet::from_gguf(&file)?;
        add_turn_ends(&mut eos, family, &tokenizer);
        let weights = TensorMap::from_gguf(&file, mode, family.gguf_tensors)?;
        Ok(ModelParts {
            name: file_name(path),
            family,
            config,
            hyper,
            weights,
            tokenizer,
            template,
            eos,
            bos_token,
            eos_token,
        })
    }

    fn read_dir(dir: &Path, mode: WeightMode, families: Families) -> Result<Self> {
        let config_path = dir.join("config.json");
        let hyper = HyperParams::from_config_json(&config_path)?;
        // An architecture we do not run is named before any missing field.
        if let Some(name) = hyper.architecture_name() {
            families(name)?;
        }
        let config = ModelConfig::from_config_json(&config_path)?;
        let family = families(&config.architecture)?;
        let config = family.resolve(config, false);
        let tokenizer = TextTokenizer::from_file(&dir.join("tokenizer.json"))?;
        let tok_cfg = TokenizerConfig::read(dir)?;
        let source = tok_cfg.chat_template(dir)?;
        let (bos_token, eos_token) = (tok_cfg.bos_token(), tok_cfg.eos_token());
        let template = ChatTemplate::new(&source, bos_token.clone(), eos_token.clone())?;
        let mut eos = eos_for_dir(dir, &tokenizer)?;
        add_turn_ends(&mut eos, family, &tokenizer);
        let group_size =
            quantization_of(&config_path)?.map_or(MLX_DEFAULT_GROUP_SIZE, |q| q.group_size);
        let mut weights = TensorMap::from_safetensors_dir(dir, group_size, mode)?
            .with_overrides(quantization_overrides(&config_path)?);
        if is_multimodal(&config_path)? {
            weights = weights.text_part();
        }
        Ok(ModelParts {
            name: file_name(dir),
            family,
            config,
            hyper,
            weights,
            tokenizer,
            template,
            eos,
            bos_token,
            eos_token,
        })
    }
}

/// The EOS set of an HF folder: the tokenizer's `eos_token` plus the
/// `eos_token_id` entries of `config.json` and `generation_config.json`.
pub fn eos_for_dir(dir: &Path, tokenizer: &TextTokenizer) -> Result<EosSet> {
    let mut eos = EosSet::from_config_files(dir)?;
    if let Some(id) = TokenizerConfig::read(dir)?
        .eos_token()
        .and_then(|t| tokenizer.token_to_id(&t))
    {
        eos.insert(id);
    }
    Ok(eos)
}

/// The architecture's turn-end tokens join the EOS set: files often declare
/// only `<eos>`, and a model that ends its turn with `<end_of_turn>` would
/// otherwise run on.
fn add_turn_ends(eos: &mut EosSet, family: &Family, tokenizer: &TextTokenizer) {
    for token in family.turn_end_tokens {
        if let Some(id) = tokenizer.token_to_id(token) {
            eos.insert(id);
        }
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// The parts of `tokenizer_config.json` the engine uses.
#[derive(Debug, Default, Deserialize)]
struct TokenizerConfig {
    chat_template: Option<TemplateField>,
    bos_token: Option<TokenField>,
    eos_token: Option<TokenField>,
}

/// `chat_template` is a string or a list of named templates.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum TemplateField {
    One(String),
    Named(Vec<NamedTemplate>),
}

#[derive(Debug, Deserialize)]
struct NamedTemplate {
    name: String,
    template: String,
}

/// A special token is a string or an `AddedToken` object with `content`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum TokenField {
    Text(String),
    Added { content: String },
}

impl TokenField {
    fn text(&self) -> String {
        match self {
            TokenField::Text(t) | TokenField::Added { content: t } => t.clone(),
        }
    }
}

impl TokenizerConfig {
    fn read(dir: &Path) -> Result<Self> {
        let path = dir.join("tokenizer_config.json");
        if path.is_file() {
            read_json(&path)
        } else {
            Ok(TokenizerConfig::default())
        }
    }

    /// The default template: `tokenizer_config.json`'s, else the
    /// `chat_template.jinja` file newer checkpoints ship.
    fn chat_template(&self, dir: &Path) -> Result<String> {
        match &self.chat_template {
            Some(TemplateField::One(t)) => return Ok(t.clone()),
            Some(TemplateField::Named(list)) => {
                if let Some(t) = list.iter().find(|t| t.name == "default").or(list.first()) {
                    return Ok(t.template.clone());
                }
            }
            None => {}
        }
        let jinja = dir.join("chat_template.jinja");
        std::fs::read_to_string(&jinja).map_err(|_| {
            EngineError::invalid_model(
                dir,
                "no chat template (tokenizer_config.json chat_template or chat_template.jinja)",
            )
        })
    }

    fn bos_token(&self) -> Option<String> {
        self.bos_token.as_ref().map(TokenField::text)
    }

    fn eos_token(&self) -> Option<String> {
        self.eos_token.as_ref().map(TokenField::text)
    }
}
