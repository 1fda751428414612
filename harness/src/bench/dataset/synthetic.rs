//! Prompts of a given token length for the served model's tokenizer,
//! made of words that are each one token to it (probed once), so a prompt
//! of N words is N tokens without counting every prompt: the text
//! counterpart of vLLM's random token ids, which only work where the
//! client holds the tokenizer.

use anyhow::{bail, Result};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;

use crate::bench::dataset::tokens::TokenCounter;

/// Common words; the probe keeps those that are one token (after a space).
const CANDIDATES: &str = "the of and to in is was for on are with as his they at be this from have or by one had not but what all were when we there can an your which their said if do will each about how up out them then she many some so these would other into has more her two like him see time could no make than first been its who now people my made over did down only way find use may water long little very after words called just where most know get through back much before go good new write our used me man too any day same right look think also around another came come work three word must because does part even place well such here take why things help put years different away again off went old number great tell men say small every found still between name should home big give air line set own under read last never us left end along while might next sound below saw something thought both few those always looked show large often together asked house world going want school important until form food keep children feet land side without boy once animals life enough took sometimes four head above kind began almost live page got earth need far hand high year mother light parts country father let night following picture being study second eyes soon times story boys since white days ever paper hard near sentence better best across during today others however sure means knew its try told young miles sun ways thing whole hear example heard several change answer room sea against top turned learn point city play toward five using himself usually money seen car morning";

/// Words that are one token each to the served model.
pub struct Vocabulary {
    words: Vec<&'static str>,
    /// Tokens a text of these words takes per word (1.0 when joining adds
    /// no merges), measured on a sample.
    tokens_per_word: f64,
}

impl Vocabulary {
    pub async fn probe(counter: &TokenCounter) -> Result<Self> {
        let mut words = Vec::new();
        let base = counter.count("x").await?;
        for w in CANDIDATES.split_whitespace() {
            if counter.count(&format!("x {w}")).await? == base + 1 {
                words.push(w);
            }
        }
        if words.len() < 50 {
            bail!(
                "only {} of the synthetic vocabulary's words are one token to this \
                 tokenizer ({}); synthetic prompts need at least 50",
                words.len(),
                counter.describe()
            );
        }
        let mut v = Vocabulary {
            words,
            tokens_per_word: 1.0,
        };
        let mut rng = rand::SeedableRng::seed_from_u64(0);
        let sample = v.words_of(400, &mut rng);
        v.tokens_per_word = counter.count(&sample).await? as f64 / 400.0;
        Ok(v)
    }

    /// A vocabulary of given words, one token each (tests).
    #[cfg(test)]
    pub(crate) fn of_words(words: Vec<&'static str>) -> Self {
        Vocabulary {
            words,
            tokens_per_word: 1.0,
        }
    }

    pub fn len(&self) -> usize {
        self.words.len()
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    fn words_of(&self, n: usize, rng: &mut StdRng) -> String {
        (0..n)
            .map(|_| *self.words.choose(rng).expect("a vocabulary"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// A text of about `tokens` tokens, from `rng`.
    pub fn text(&self, tokens: usize, rng: &mut StdRng) -> String {
        let n = (tokens as f64 / self.tokens_per_word).round() as usize;
        self.words_of(n.max(1), rng)
    }
}
