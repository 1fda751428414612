//! One request on the engine thread, and its token-to-event pipeline: the
//! logits of each step go through sampling (penalties, grammar mask, the
//! thinking budget's forced end of reasoning), then the chosen token
//! through detokenizing, stop strings and the output parsers, and out as
//! events. The scheduler decides when a sequence runs; this decides what
//! its output is.

use std::collections::VecDeque;
use std::sync::Mutex;

use tokio::sync::mpsc::UnboundedSender;

use crate::error::Result;
use crate::loading::tokenizer::IncrementalDecoder;
use crate::parsers::{OutputConfig, OutputParser, ParsedDelta, ThinkingBudget};
use crate::runtime::events::{
    EngineEvent, FinishReason, TokenLogprob, ToolCallDelta, TopLogprob, Usage,
};
use crate::runtime::grammar::GrammarState;
use crate::runtime::model_text::ModelText;
use crate::runtime::request::Priority;
use crate::runtime::sampler::{logprobs, Sampler};
use crate::runtime::settings::{worst_case_positions, GenerationSettings};
use crate::runtime::stats::EngineStats;
use crate::runtime::stop::{StopMatcher, StopScan};

/// A request handed to the engine thread.
pub struct NewSequence {
    pub prompt: Vec<u32>,
    pub settings: GenerationSettings,
    pub grammar: Option<GrammarState>,
    /// How chat output is parsed; `None` for a plain-text prompt.
    pub output: Option<OutputConfig>,
    /// The request's own `thinking_budget`.
    pub thinking_budget: Option<usize>,
    /// Its turn for a slot (`scheduler::next_to_admit`).
    pub priority: Priority,
    pub events: UnboundedSender<EngineEvent>,
}

pub struct Sequence {
    pub prompt: Vec<u32>,
    pub settings: GenerationSettings,
    pub priority: Priority,
    grammar: Option<GrammarState>,
    pub events: UnboundedSender<EngineEvent>,
    /// Splits chat output into content, reasoning and tool calls as it is
    /// released, and tells whether the output is inside reasoning.
    output: Option<OutputParser>,
    budget: ThinkingBudget,
    /// Tokens the engine writes instead of sampling (the end of reasoning
    /// when the budget is spent).
    forced: VecDeque<u32>,
    /// Its slot in the scheduler's KV store; `None` until the sequence has
    /// started (prefix looked up).
    pub slot: Option<usize>,
    /// Prompt tokens whose KV is in its slot.
    pub prefilled: usize,
    /// Prompt tokens served from the prefix cache.
    pub cached: usize,
    /// Where its prompt ends in the equal-share reading of the prompts
    /// (`prefill_order`), set when it starts.
    pub shared_end: Option<f64>,
    /// Tokens sampled so far (an ending EOS included).
    sampled: usize,
    /// The token to feed at the next decode step.
    pub next_input: [u32; 1],
    /// Every sampled token fed back (or to be fed) as input, in order: the
    /// reply as the slot holds it after the prompt.
    replied: Vec<u32>,
    /// Whether the sequence decodes (its prompt is done).
    pub decoding: bool,
    sampler: Sampler,
    decoder: IncrementalDecoder,
    stop: StopMatcher,
    /// Between the end of reasoning and the answer's first visible
    /// character: the template's separator there (`</think>\n\n`) is not
    /// the answer, which the parser trims, so stops do not see it.
    separator: bool,
    /// The parser started a call past `max_tool_calls`: the turn ends.
    calls_capped: bool,
    /// Its last event was sent; the scheduler drops it.
    pub finished: bool,
}

impl Sequence {
    /// `forced_close`: the length in tokens of the end of reasoning the
    /// engine writes when a thinking budget is spent.
    pub fn new(
        mut s: NewSequence,
        context_length: usize,
        default_budget: Option<usize>,
        forced_close: usize,
    ) -> Self {
        // Never generate past the model's context.
        s.settings.max_tokens =
            (worst_case_positions(s.prompt.len(), s.settings.max_tokens, context_length)
                .saturating_sub(s.prompt.len()))
            .max(1);
        let sampler = Sampler::new(s.settings.sampling.clone()).with_prompt(&s.prompt);
        Sequence {
            output: s.output.as_ref().map(OutputParser::new),
            budget: ThinkingBudget::for_request(
                s.thinking_budget,
                default_budget,
                s.settings.max_tokens,
                forced_close,
            ),
            forced: VecDeque::new(),
            stop: StopMatcher::new(s.settings.stop.clone()),
            separator: false,
            prompt: s.prompt,
            settings: s.settings,
            priority: s.priority,
            grammar: s.grammar,
            events: s.events,
            slot: None,
            prefilled: 0,
            cached: 0,
            shared_end: None,
            sampled: 0,
            next_input: [0],
            replied: Vec::new(),
            decoding: false,
            sampler,
            decoder: IncrementalDecoder::new(),
            calls_capped: false,
            finished: false,
        }
    }

    /// Started and still computing its prompt.
    /// The first `len` tokens of the sequence (prompt, then reply): what
    /// its slot holds when `len` positions are written.
    pub fn tokens(&self, len: usize) -> Option<Vec<u32>> {
        let reply = len.checked_sub(self.prompt.len())?;
        let reply = self.replied.get(..reply)?;
        Some([&self.prompt[..], reply].concat())
    }

    pub fn prefilling(&self) -> bool {
        self.slot.is_some() && self.prefilled < self.prompt.len()
    }

    fn in_reasoning(&self) -> bool {
        self.output.as_ref().is_some_and(OutputParser::in_reasoning)
    }

    /// Picks the next token from this step's logits and reports it: a
    /// delta, or the end (stop, length, grammar failure).
    pub fn on_logits(
        &mut self,
        text: &ModelText,
        stats: &Mutex<EngineStats>,
        raw: &[f32],
        position: usize,
    ) -> Result<()> {
        let in_reasoning = self.in_reasoning();
        // A spent thinking budget: write the end of reasoning instead of
        // sampling (a grammar leaves reasoning free and accepts its end).
        if self.budget.must_end(in_reasoning) {
            self.forced.extend(text.forced_close.iter().copied());
        }
        let token = match self.forced.pop_front() {
            Some(t) => t,
            None => {
                let mut processed = raw.to_vec();
                self.sampler.process(&mut processed);
                if let Some(g) = &mut self.grammar {
                    if let Err(msg) = g.apply_mask(&mut processed) {
                        self.fail(stats, msg);
                        return Ok(());
                    }
                }
                if self.settings.sampling.ignore_eos {
                    mask_eos(&mut processed, &text.eos);
                }
                let sampled = self.sampler.sample(&processed, position);
                // A turn may not end inside reasoning with no answer: the
                // first such end becomes the end of reasoning.
                if text.eos.contains(sampled)
                    && self.grammar.is_none()
                    && self.budget.end_instead_of_stop(in_reasoning)
                {
                    self.forced.extend(text.forced_close.iter().copied());
                    self.forced.pop_front().unwrap_or(sampled)
                } else {
                    sampled
                }
            }
        };
        if in_reasoning {
            self.budget.count_reasoning_token();
        }
        // An end id is only allowed where the grammar accepts; it ends the
        // sequence instead of entering the grammar.
        if let (Some(g), false) = (&mut self.grammar, text.eos.contains(token)) {
            if let Err(msg) = g.consume(token) {
                self.fail(stats, msg);
                return Ok(());
            }
        }
        self.sampled += 1;
        self.decoding = true;
        let logprob = self
            .settings
            .logprobs
            .map(|top| token_logprob(text, raw, token, top));

        if text.eos.contains(token) {
            let tail = self.release_rest(text);
            self.finish(stats, tail, logprob, FinishReason::Stop);
            return Ok(());
        }
        self.sampler.observe(token);
        self.next_input = [token];
        self.replied.push(token);
        let piece = self.decoder.push(&text.tokenizer, token)?;
        // Stop sequences end the answer, as Anthropic's `stop_sequences`
        // end text blocks: reasoning is not matched against them (a stop
        // word in the thinking would end the reply before any content).
        let scan = if in_reasoning {
            self.separator = true;
            StopScan {
                emit: piece,
                stopped_by: None,
            }
        } else if self.separator {
            // Nothing is held yet: the separator goes out first, as is.
            let answer = piece.trim_start();
            let lead = &piece[..piece.len() - answer.len()];
            self.separator = answer.is_empty();
            let mut scan = self.stop.push(answer);
            scan.emit.insert_str(0, lead);
            scan
        } else {
            self.stop.push(&piece)
        };
        if let Some(k) = scan.stopped_by {
            self.finish(stats, scan.emit, logprob, FinishReason::StopSequence(k));
            return Ok(());
        }
        if self.sampled >= self.settings.max_tokens {
            let mut tail = scan.emit;
            tail.push_str(&self.release_rest(text));
            self.finish(stats, tail, logprob, FinishReason::Length);
            return Ok(());
        }
        self.emit(&scan.emit, logprob, false);
        if self.calls_capped {
            // Stop (reported as tool_calls: the turn made its call).
            self.finish(stats, String::new(), None, FinishReason::Stop);
        }
        Ok(())
    }

    /// Text still held by the detokenizer and the stop matcher at the end.
    fn release_rest(&mut self, text: &ModelText) -> String {
        let piece = self.decoder.finish(&text.tokenizer).unwrap_or_default();
        let scan = self.stop.push(&piece);
        if scan.stopped_by.is_some() {
            return scan.emit;
        }
        scan.emit + &self.stop.finish()
    }

    /// Sends released text, parsed for chat output, with its logprobs;
    /// `last` flushes what the parser still holds.
    fn emit(&mut self, text: &str, logprob: Option<TokenLogprob>, last: bool) {
        let (mut content, mut reasoning, mut tool_calls) = (String::new(), String::new(), vec![]);
        match &mut self.output {
            None => content.push_str(text),
            Some(parser) => {
                let mut parsed = parser.feed(text);
                if last {
                    parsed.extend(parser.finish());
                }
                let cap = self.settings.max_tool_calls.unwrap_or(usize::MAX);
                for d in parsed {
                    let index = match &d {
                        ParsedDelta::ToolCallStart { index, .. }
                        | ParsedDelta::ToolCallArguments { index, .. } => Some(*index),
                        _ => None,
                    };
                    // A call past the cap, and all that follows it, is
                    // never sent.
                    if self.calls_capped || index.is_some_and(|i| i >= cap) {
                        self.calls_capped = true;
                        continue;
                    }
                    match d {
                        ParsedDelta::Content(t) => content.push_str(&t),
                        ParsedDelta::Reasoning(t) => reasoning.push_str(&t),
                        ParsedDelta::ToolCallStart { index, name } => {
                            tool_calls.push(ToolCallDelta {
                                index,
                                name: Some(name),
                                arguments: String::new(),
                            })
                        }
                        ParsedDelta::ToolCallArguments { index, fragment } => {
                            match tool_calls.last_mut() {
                                Some(d) if d.index == index && d.name.is_none() => {
                                    d.arguments.push_str(&fragment)
                                }
                                _ => tool_calls.push(ToolCallDelta {
                                    index,
                                    name: None,
                                    arguments: fragment,
                                }),
                            }
                        }
                    }
                }
            }
        }
        if content.is_empty() && reasoning.is_empty() && tool_calls.is_empty() && logprob.is_none()
        {
            return;
        }
        let _ = self.events.send(EngineEvent::Delta {
            text: content,
            reasoning,
            tool_calls,
            logprobs: logprob.into_iter().collect(),
        });
    }

    fn finish(
        &mut self,
        stats: &Mutex<EngineStats>,
        text: String,
        logprob: Option<TokenLogprob>,
        reason: FinishReason,
    ) {
        self.emit(&text, logprob, true);
        let usage = Usage {
            prompt_tokens: self.prompt.len(),
            completion_tokens: self.sampled,
            cached_tokens: self.cached,
            reasoning_tokens: self.budget.reasoning_tokens(),
        };
        let parsed = self
            .output
            .as_ref()
            .map(OutputParser::stats)
            .unwrap_or_default();
        // A turn that ended after calling tools reports it.
        let reason = match reason {
            FinishReason::Stop if parsed.tool_calls > 0 => FinishReason::ToolCalls,
            other => other,
        };
        stats.lock().expect("stats").record_finish(&usage, &parsed);
        let _ = self.events.send(EngineEvent::Finished {
            finish_reason: reason,
            usage,
        });
        self.finished = true;
    }

    /// Ends the sequence with an error the client sees (its own request is
    /// at fault).
    fn fail(&mut self, stats: &Mutex<EngineStats>, message: String) {
        stats.lock().expect("stats").requests_failed += 1;
        let _ = self.events.send(EngineEvent::Failed {
            message,
            client_error: true,
        });
        self.finished = true;
    }
}

fn token_logprob(text: &ModelText, raw: &[f32], token: u32, top: usize) -> TokenLogprob {
    let (logprob, best) = logprobs(raw, token, top);
    let describe = |id: u32| {
        let bytes = text.tokenizer.token_bytes(id);
        (String::from_utf8_lossy(&bytes).into_owned(), bytes)
    };
    let (token_text, bytes) = describe(token);
    TokenLogprob {
        token: token_text,
        logprob,
        bytes,
        top_logprobs: best
            .into_iter()
            .map(|(id, lp)| {
                let (token, bytes) = describe(id);
                TopLogprob {
                    token,
                    logprob: lp,
                    bytes,
                }
            })
            .collect(),
    }
}

/// `ignore_eos`: end-of-turn ids get no probability, unless nothing else
/// is left (a grammar that only accepts its end), which must still end.
fn mask_eos(logits: &mut [f32], eos: &crate::loading::eos::EosSet) {
    let other_left = logits
        .iter()
        .enumerate()
        .any(|(id, l)| l.is_finite() && !eos.contains(id as u32));
    if !other_left {
        return;
    }
    for id in eos.ids() {
        if let Some(l) = logits.get_mut(id as usize) {
            *l = f32::NEG_INFINITY;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loading::eos::EosSet;

    #[test]
    fn ignore_eos_masks_end_ids_unless_nothing_else_is_left() {
        let mut eos = EosSet::default();
        eos.insert(2);
        let mut logits = vec![0.5, 1.0, 9.0];
        mask_eos(&mut logits, &eos);
        assert_eq!(logits, vec![0.5, 1.0, f32::NEG_INFINITY]);
        let mut only_end = vec![f32::NEG_INFINITY, f32::NEG_INFINITY, 9.0];
        mask_eos(&mut only_end, &eos);
        assert_eq!(only_end[2], 9.0);
    }
}
