//! The sampling fields the protocols send (temperature, top-p, top-k,
//! penalties, seed), checked against their ranges in one place and read
//! into the engine's [`SamplingParams`].

use crate::api::error::ApiError;
use crate::runtime::SamplingParams;

/// Sampling fields as a protocol sends them; each protocol states its own
/// temperature ceiling (OpenAI 2, Anthropic 1).
#[derive(Debug, Clone, Default)]
pub struct Sampling {
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub top_k: Option<i64>,
    pub min_p: Option<f32>,
    pub repetition_penalty: Option<f32>,
    pub presence_penalty: Option<f32>,
    pub frequency_penalty: Option<f32>,
    pub seed: Option<i64>,
    pub max_temperature: f32,
}

impl Sampling {
    /// Checks every field's range.
    pub fn read(&self, logit_bias: Vec<(u32, f32)>) -> Result<SamplingParams, ApiError> {
        let temperature = self.temperature.unwrap_or(1.0);
        in_range("temperature", temperature, 0.0, self.max_temperature)?;
        // 0 keeps only the most likely token, as a nucleus of no mass.
        let top_p = self.top_p.unwrap_or(1.0);
        in_range("top_p", top_p, 0.0, 1.0)?;
        let top_k = match self.top_k {
            None | Some(-1) | Some(0) => 0,
            Some(k) if k > 0 => k as usize,
            Some(_) => {
                return Err(ApiError::invalid_param(
                    "top_k",
                    "must be -1, 0 or positive",
                ))
            }
        };
        let min_p = self.min_p.unwrap_or(0.0);
        in_range("min_p", min_p, 0.0, 1.0)?;
        let repetition_penalty = self.repetition_penalty.unwrap_or(1.0);
        if repetition_penalty <= 0.0 || !repetition_penalty.is_finite() {
            return Err(ApiError::invalid_param("repetition_penalty", "must be > 0"));
        }
        let presence_penalty = self.presence_penalty.unwrap_or(0.0);
        in_range("presence_penalty", presence_penalty, -2.0, 2.0)?;
        let frequency_penalty = self.frequency_penalty.unwrap_or(0.0);
        in_range("frequency_penalty", frequency_penalty, -2.0, 2.0)?;
        Ok(SamplingParams {
            temperature,
            top_p,
            top_k,
            min_p,
            repetition_penalty,
            presence_penalty,
            frequency_penalty,
            logit_bias,
            seed: self.seed.map(|s| s as u64),
            ignore_eos: false,
        })
    }
}

/// `value` within `[lo, hi]`, else an error naming `param`.
pub(super) fn in_range(param: &str, value: f32, lo: f32, hi: f32) -> Result<(), ApiError> {
    if value.is_finite() && (lo..=hi).contains(&value) {
        Ok(())
    } else {
        Err(ApiError::invalid_param(
            param,
            format!("must be in [{lo}, {hi}], got {value}"),
        ))
    }
}
