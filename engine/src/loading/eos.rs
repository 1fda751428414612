//! The set of token ids that end a turn.
//!
//! Models declare their end tokens in several places that disagree: the
//! tokenizer's `eos_token`, GGUF's eos/eot/eom ids, and `eos_token_id` (an
//! int or a list) in `config.json` and `generation_config.json`. Gemma-style
//! models list turn-end tokens only in the config list, so a server reading
//! just the tokenizer's eos runs past the end of every turn. The engine
//! stops on the union of all of them.

use std::collections::BTreeSet;
use std::path::Path;

use serde::Deserialize;

use crate::error::Result;
use crate::loading::config::read_json;
use crate::loading::gguf::GgufModelFile;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EosSet {
    ids: BTreeSet<u32>,
}

impl EosSet {
    pub fn contains(&self, id: u32) -> bool {
        self.ids.contains(&id)
    }

    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.ids.iter().copied()
    }

    pub fn insert(&mut self, id: u32) {
        self.ids.insert(id);
    }

    /// GGUF's `tokenizer.ggml.{eos,eot,eom}_token_id`.
    pub fn from_gguf(file: &GgufModelFile) -> Result<Self> {
        let mut set = EosSet::default();
        for key in [
            "tokenizer.ggml.eos_token_id",
            "tokenizer.ggml.eot_token_id",
            "tokenizer.ggml.eom_token_id",
        ] {
            if let Some(id) = file.usize(key)? {
                set.insert(id as u32);
            }
        }
        Ok(set)
    }

    /// `eos_token_id` of `config.json` and `generation_config.json` in `dir`
    /// (either may be absent; each may hold an int or a list), and of a
    /// multimodal config's `text_config` (Gemma 4 lists its turn ends
    /// there).
    pub fn from_config_files(dir: &Path) -> Result<Self> {
        let mut set = EosSet::default();
        for name in ["config.json", "generation_config.json"] {
            let path = dir.join(name);
            if path.is_file() {
                let cfg: EosField = read_json(&path)?;
                let text = cfg.text_config.and_then(|t| t.eos_token_id);
                set.ids.extend(
                    cfg.eos_token_id
                        .into_iter()
                        .chain(text)
                        .flat_map(OneOrMany::into_vec),
                );
            }
        }
        Ok(set)
    }

    pub fn extend(&mut self, other: EosSet) {
        self.ids.extend(other.ids);
    }
}

#[derive(Deserialize)]
struct EosField {
    eos_token_id: Option<OneOrMany>,
    text_config: Option<TextEos>,
}

#[derive(Deserialize)]
struct TextEos {
    eos_token_id: Option<OneOrMany>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(u32),
    Many(Vec<u32>),
}

impl OneOrMany {
    fn into_vec(self) -> Vec<u32> {
        match self {
            OneOrMany::One(id) => vec![id],
            OneOrMany::Many(ids) => ids,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A multimodal config's text model declares its own ends: they join
    /// the top level's and generation_config.json's.
    #[test]
    fn the_text_configs_ends_join_the_set() {
        let dir = std::env::temp_dir().join(format!("afm-eos-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("config.json"),
            r#"{"eos_token_id": 1, "text_config": {"eos_token_id": [1, 106, 50]}}"#,
        )
        .unwrap();
        std::fs::write(
            dir.join("generation_config.json"),
            r#"{"eos_token_id": [1, 106]}"#,
        )
        .unwrap();
        let set = EosSet::from_config_files(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(set.ids().collect::<Vec<_>>(), [1, 50, 106]);
    }
}
