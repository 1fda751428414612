//! Continuous batching on the engine thread.
//!
//! Each step: drop cancelled requests, admit waiting ones up to
//! `concurrent`, start admitted ones from the longest cached prefix, then run
//! ONE forward pass over every running sequence: one token for each
//! decoding sequence plus prefill chunks within the step's token budget (so
//! a long prompt never stalls running streams). After the pass, prefilled
//! prompt KV goes into the prefix cache at once, and decoding sequences
//! sample, detokenize, match stop strings and emit events.
//!
//! Requests that arrive together and share a prefix nobody has cached yet
//! do not all compute it: a later one waits while an earlier one prefills
//! the shared part, then starts from the cache.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc::UnboundedSender;

use crate::engine::{
    EngineConfig, EngineEvent, EngineStats, ModelText, TokenLogprob, ToolCallDelta, TopLogprob,
    Usage, BATCH_SIZE_BUCKETS,
};
use crate::error::Result;
use crate::generate::FinishReason;
use crate::grammar::GrammarState;
use crate::models::{BatchItem, CausalLm, KvCache};
use crate::parsers::{OutputConfig, OutputParser, ParsedDelta, ThinkingBudget};
use crate::prefix_cache::PrefixCache;
use crate::request::GenerationSettings;
use crate::sampler::{logprobs, Sampler};
use crate::stop::StopMatcher;
use crate::tokenizer::IncrementalDecoder;

/// Fixed caches are sized in steps of this many positions.
const CAPACITY_STEP: usize = 256;

/// A request handed to the engine thread.
pub struct NewSequence {
    pub prompt: Vec<u32>,
    pub settings: GenerationSettings,
    pub grammar: Option<GrammarState>,
    /// How chat output is parsed; `None` for a plain-text prompt.
    pub output: Option<OutputConfig>,
    /// The request's own `thinking_budget`.
    pub thinking_budget: Option<usize>,
    pub events: UnboundedSender<EngineEvent>,
}

struct Sequence {
    prompt: Vec<u32>,
    settings: GenerationSettings,
    grammar: Option<GrammarState>,
    events: UnboundedSender<EngineEvent>,
    /// Splits chat output into content, reasoning and tool calls as it is
    /// released, and tells whether the output is inside reasoning.
    output: Option<OutputParser>,
    budget: ThinkingBudget,
    /// Tokens the engine writes instead of sampling (the end of reasoning
    /// when the budget is spent).
    forced: VecDeque<u32>,
    /// `None` until the sequence has started (prefix looked up).
    cache: Option<KvCache>,
    /// Prompt tokens whose KV is in `cache`.
    prefilled: usize,
    cached: usize,
    /// Tokens sampled so far (an ending EOS included).
    sampled: usize,
    /// The token to feed at the next decode step.
    next_input: [u32; 1],
    decoding: bool,
    sampler: Sampler,
    decoder: IncrementalDecoder,
    stop: StopMatcher,
    finished: bool,
}

impl Sequence {
    fn new(mut s: NewSequence, context_length: usize, default_budget: Option<usize>) -> Self {
        // Never generate past the model's context.
        s.settings.max_tokens = s
            .settings
            .max_tokens
            .min(context_length.saturating_sub(s.prompt.len()).max(1));
        let sampler = Sampler::new(s.settings.sampling.clone()).with_prompt(&s.prompt);
        Sequence {
            output: s.output.as_ref().map(OutputParser::new),
            budget: ThinkingBudget::for_request(
                s.thinking_budget,
                default_budget,
                s.settings.max_tokens,
            ),
            forced: VecDeque::new(),
            stop: StopMatcher::new(s.settings.stop.clone()),
            prompt: s.prompt,
            settings: s.settings,
            grammar: s.grammar,
            events: s.events,
            cache: None,
            prefilled: 0,
            cached: 0,
            sampled: 0,
            next_input: [0],
            decoding: false,
            sampler,
            decoder: IncrementalDecoder::new(),
            finished: false,
        }
    }

    fn prefilling(&self) -> bool {
        self.cache.is_some() && self.prefilled < self.prompt.len()
    }

    fn in_reasoning(&self) -> bool {
        self.output.as_ref().is_some_and(OutputParser::in_reasoning)
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
                for d in parsed {
                    match d {
                        ParsedDelta::Content(t) => content.push_str(&t),
                        ParsedDelta::Reasoning(t) => reasoning.push_str(&t),
                        ParsedDelta::ToolCallStart { index, id, name } => {
                            tool_calls.push(ToolCallDelta {
                                index,
                                id: Some(id),
                                name: Some(name),
                                arguments: String::new(),
                            })
                        }
                        ParsedDelta::ToolCallArguments { index, fragment } => {
                            match tool_calls.last_mut() {
                                Some(d) if d.index == index && d.id.is_none() => {
                                    d.arguments.push_str(&fragment)
                                }
                                _ => tool_calls.push(ToolCallDelta {
                                    index,
                                    id: None,
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
}

/// What a sequence contributes to one forward pass.
enum Work {
    Prefill { end: usize, sample: bool },
    Decode,
}

pub struct Scheduler {
    model: Box<dyn CausalLm>,
    text: Arc<ModelText>,
    config: EngineConfig,
    waiting: VecDeque<NewSequence>,
    running: Vec<Sequence>,
    prefix: Option<PrefixCache>,
    stats: Arc<Mutex<EngineStats>>,
}

impl Scheduler {
    pub fn new(
        model: Box<dyn CausalLm>,
        text: Arc<ModelText>,
        config: EngineConfig,
        stats: Arc<Mutex<EngineStats>>,
    ) -> Self {
        let c = model.config();
        // f32 keys and values for every layer.
        let bytes_per_token = c.num_layers * 2 * c.num_kv_heads * c.head_dim * 4;
        let prefix = config
            .prefix_caching
            .then(|| PrefixCache::new(bytes_per_token, config.prefix_cache_bytes));
        Scheduler {
            model,
            text,
            config,
            waiting: VecDeque::new(),
            running: Vec::new(),
            prefix,
            stats,
        }
    }

    pub fn has_work(&self) -> bool {
        !self.waiting.is_empty() || !self.running.is_empty()
    }

    pub fn enqueue(&mut self, s: NewSequence) {
        self.waiting.push_back(s);
        self.publish_counts();
    }

    /// One scheduling step and forward pass. Failures end the affected
    /// requests with a `Failed` event; the engine keeps serving.
    pub fn step(&mut self) {
        self.drop_cancelled();
        self.admit();
        if let Err(e) = self.start_pending() {
            self.fail_all(&e.to_string());
        }
        if let Err(e) = self.forward_and_sample() {
            self.fail_all(&e.to_string());
        }
        self.running.retain(|s| !s.finished);
        self.publish_counts();
    }

    fn drop_cancelled(&mut self) {
        let before = self.running.len() + self.waiting.len();
        self.running.retain(|s| !s.events.is_closed());
        self.waiting.retain(|s| !s.events.is_closed());
        let dropped = before - self.running.len() - self.waiting.len();
        if dropped > 0 {
            self.stats.lock().expect("stats").requests_cancelled += dropped as u64;
        }
    }

    fn admit(&mut self) {
        while self.running.len() < self.config.concurrent.max(1) {
            let Some(s) = self.waiting.pop_front() else {
                break;
            };
            self.stats.lock().expect("stats").requests_admitted += 1;
            self.running.push(Sequence::new(
                s,
                self.text.limits.context_length,
                self.config.thinking_budget,
            ));
        }
    }

    /// Starts admitted sequences from the longest cached prefix, unless an
    /// earlier sequence is still prefilling a longer shared prefix.
    fn start_pending(&mut self) -> Result<()> {
        for i in 0..self.running.len() {
            if self.running[i].cache.is_some() {
                continue;
            }
            let prompt = &self.running[i].prompt;
            // Keep at least one prompt token to compute: its logits are needed.
            let limit = prompt.len().saturating_sub(1);
            let mut cached = 0;
            if let Some(prefix) = &self.prefix {
                cached = prefix.cached_len(prompt).min(limit);
                let shared_in_flight = self.running[..i]
                    .iter()
                    .filter(|o| o.prefilling())
                    .map(|o| common_prefix(&o.prompt, prompt).min(limit))
                    .max()
                    .unwrap_or(0);
                if shared_in_flight > cached {
                    continue; // wait for the earlier sequence to cache it
                }
            }
            let cache = match (&mut self.prefix, cached) {
                (Some(prefix), n) if n > 0 => {
                    let m = prefix.lookup(&self.running[i].prompt, n)?;
                    KvCache::from_segments(
                        self.model.config().num_layers,
                        &m.segments,
                        m.len,
                        self.capacity_of(&self.running[i]),
                    )?
                }
                _ => match self.capacity_of(&self.running[i]) {
                    Some(c) => KvCache::with_capacity(self.model.config().num_layers, c),
                    None => self.model.new_cache(),
                },
            };
            let s = &mut self.running[i];
            s.cache = Some(cache);
            s.prefilled = cached;
            s.cached = cached;
            {
                let mut st = self.stats.lock().expect("stats");
                st.prompt_tokens += s.prompt.len() as u64;
                st.cached_tokens += cached as u64;
                if self.prefix.is_some() {
                    if cached > 0 {
                        st.cache_hits += 1;
                    } else {
                        st.cache_misses += 1;
                    }
                }
            }
            let _ = s.events.send(EngineEvent::Started {
                prompt_tokens: s.prompt.len(),
                cached_tokens: cached,
            });
        }
        Ok(())
    }

    /// In batch-invariant mode, the fixed cache size of a sequence: a
    /// function of the request alone (prompt and token limit), so attention
    /// shapes are the same however the request is batched or cached.
    fn capacity_of(&self, s: &Sequence) -> Option<usize> {
        self.config
            .deterministic
            .then(|| {
                let needed = s.prompt.len() + s.settings.max_tokens;
                needed.div_ceil(CAPACITY_STEP) * CAPACITY_STEP
            })
            .map(|c| c.min(self.text.limits.context_length))
    }

    fn forward_and_sample(&mut self) -> Result<()> {
        let mut budget = self.config.prefill_chunk.max(1);
        let mut plan: Vec<(usize, Work)> = Vec::new();
        for (i, s) in self.running.iter().enumerate() {
            if s.decoding {
                plan.push((i, Work::Decode));
            }
        }
        for (i, s) in self.running.iter().enumerate() {
            if s.prefilling() && budget > 0 {
                let end = (s.prefilled + budget).min(s.prompt.len());
                budget -= end - s.prefilled;
                plan.push((
                    i,
                    Work::Prefill {
                        end,
                        sample: end == s.prompt.len(),
                    },
                ));
            }
        }
        if plan.is_empty() {
            return Ok(());
        }
        plan.sort_by_key(|(i, _)| *i);

        let prefill_tokens: usize = plan
            .iter()
            .map(|(i, w)| match w {
                Work::Prefill { end, .. } => end - self.running[*i].prefilled,
                Work::Decode => 0,
            })
            .sum();
        let logits = {
            let mut items = Vec::with_capacity(plan.len());
            let mut plan_iter = plan.iter().peekable();
            for (i, s) in self.running.iter_mut().enumerate() {
                let Some((_, work)) = plan_iter.next_if(|(j, _)| *j == i) else {
                    continue;
                };
                let Sequence {
                    prompt,
                    cache,
                    prefilled,
                    next_input,
                    ..
                } = s;
                let cache = cache.as_mut().expect("started sequence");
                items.push(match work {
                    Work::Decode => BatchItem {
                        tokens: &next_input[..],
                        cache,
                        sample: true,
                    },
                    Work::Prefill { end, sample } => BatchItem {
                        tokens: &prompt[*prefilled..*end],
                        cache,
                        sample: *sample,
                    },
                });
            }
            let logits = self.model.forward_batch(&mut items)?;
            // Evaluate the caches too: a pass of prefill chunks alone samples
            // nothing, and its work must still happen in this step.
            let mut outputs: Vec<&mlx_rs::Array> = vec![&logits];
            outputs.extend(items.iter().flat_map(|it| it.cache.arrays()));
            mlx_rs::transforms::eval(outputs)?;
            if logits.size() == 0 {
                Vec::new()
            } else {
                logits.as_slice::<f32>().to_vec()
            }
        };
        {
            let mut st = self.stats.lock().expect("stats");
            st.steps += 1;
            st.batched_sequences += plan.len() as u64;
            let bucket = BATCH_SIZE_BUCKETS
                .iter()
                .position(|&b| plan.len() <= b)
                .unwrap_or(BATCH_SIZE_BUCKETS.len());
            st.batch_size_steps[bucket] += 1;
            st.prefill_computed_tokens += prefill_tokens as u64;
        }

        let vocab = self.model.config().vocab_size;
        let mut row = 0;
        for (i, work) in plan {
            if let Work::Prefill { end, .. } = work {
                let s = &mut self.running[i];
                s.prefilled = end;
                if let Some(prefix) = &mut self.prefix {
                    prefix.insert(&s.prompt[..end], s.cache.as_ref().expect("started"))?;
                }
            }
            if samples(&work) {
                self.sample(i, &logits[row * vocab..(row + 1) * vocab])?;
                row += 1;
            }
        }
        Ok(())
    }

    /// Picks sequence `i`'s next token from its logits and reports it.
    fn sample(&mut self, i: usize, raw: &[f32]) -> Result<()> {
        let text = self.text.clone();
        let s = &mut self.running[i];
        let in_reasoning = s.in_reasoning();
        // A spent thinking budget: write the end of reasoning instead of
        // sampling (a grammar leaves reasoning free and accepts its end).
        if s.budget.must_end(in_reasoning) {
            s.forced.extend(text.forced_close.iter().copied());
        }
        let token = match s.forced.pop_front() {
            Some(t) => t,
            None => {
                let mut processed = raw.to_vec();
                s.sampler.process(&mut processed);
                if let Some(g) = &mut s.grammar {
                    if let Err(msg) = g.apply_mask(&mut processed) {
                        return self.fail(i, msg);
                    }
                }
                let position = s.cache.as_ref().expect("started").offset();
                let sampled = s.sampler.sample(&processed, position);
                // A turn may not end inside reasoning with no answer: the
                // first such end becomes the end of reasoning.
                if text.eos.contains(sampled)
                    && s.grammar.is_none()
                    && s.budget.end_instead_of_stop(in_reasoning)
                {
                    s.forced.extend(text.forced_close.iter().copied());
                    s.forced.pop_front().unwrap_or(sampled)
                } else {
                    sampled
                }
            }
        };
        if in_reasoning {
            s.budget.count_reasoning_token();
        }
        // An end id is only allowed where the grammar accepts; it ends the
        // sequence instead of entering the grammar.
        if let (Some(g), false) = (&mut s.grammar, text.eos.contains(token)) {
            if let Err(msg) = g.consume(token) {
                return self.fail(i, msg);
            }
        }
        s.sampled += 1;
        s.decoding = true;
        let logprob = s
            .settings
            .logprobs
            .map(|top| token_logprob(&text, raw, token, top));

        if text.eos.contains(token) {
            let tail = self.release_rest(i);
            return self.finish(i, tail, logprob, FinishReason::Stop);
        }
        let s = &mut self.running[i];
        s.sampler.observe(token);
        s.next_input = [token];
        let piece = s.decoder.push(&text.tokenizer, token)?;
        let scan = s.stop.push(&piece);
        if scan.stopped {
            return self.finish(i, scan.emit, logprob, FinishReason::Stop);
        }
        if s.sampled >= s.settings.max_tokens {
            let mut tail = scan.emit;
            tail.push_str(&self.release_rest(i));
            return self.finish(i, tail, logprob, FinishReason::Length);
        }
        s.emit(&scan.emit, logprob, false);
        Ok(())
    }

    /// Text still held by the detokenizer and the stop matcher at the end.
    fn release_rest(&mut self, i: usize) -> String {
        let text = self.text.clone();
        let s = &mut self.running[i];
        let piece = s.decoder.finish(&text.tokenizer).unwrap_or_default();
        let scan = s.stop.push(&piece);
        if scan.stopped {
            return scan.emit;
        }
        scan.emit + &s.stop.finish()
    }

    fn finish(
        &mut self,
        i: usize,
        text: String,
        logprob: Option<TokenLogprob>,
        reason: FinishReason,
    ) -> Result<()> {
        let s = &mut self.running[i];
        s.emit(&text, logprob, true);
        let usage = Usage {
            prompt_tokens: s.prompt.len(),
            completion_tokens: s.sampled,
            cached_tokens: s.cached,
            reasoning_tokens: s.budget.reasoning_tokens(),
        };
        let parsed = s
            .output
            .as_ref()
            .map(OutputParser::stats)
            .unwrap_or_default();
        // A turn that ended after calling tools reports it.
        let reason = match reason {
            FinishReason::Stop if parsed.tool_calls > 0 => FinishReason::ToolCalls,
            other => other,
        };
        {
            // Counted before the event, so a caller that saw it sees them.
            let mut st = self.stats.lock().expect("stats");
            st.requests_finished += 1;
            st.completion_tokens += usage.completion_tokens as u64;
            st.reasoning_tokens += usage.reasoning_tokens as u64;
            st.output.add(&parsed);
        }
        let _ = s.events.send(EngineEvent::Finished {
            finish_reason: reason,
            usage,
        });
        s.finished = true;
        Ok(())
    }

    /// Ends sequence `i` with an error the client sees.
    fn fail(&mut self, i: usize, message: String) -> Result<()> {
        let s = &mut self.running[i];
        let _ = s.events.send(EngineEvent::Failed {
            message,
            client_error: true,
        });
        s.finished = true;
        self.stats.lock().expect("stats").requests_failed += 1;
        Ok(())
    }

    fn fail_all(&mut self, message: &str) {
        let n = self.running.len();
        for s in self.running.drain(..) {
            let _ = s.events.send(EngineEvent::Failed {
                message: message.to_string(),
                client_error: false,
            });
        }
        self.stats.lock().expect("stats").requests_failed += n as u64;
    }

    fn publish_counts(&self) {
        let mut st = self.stats.lock().expect("stats");
        st.running = self.running.len();
        st.waiting = self.waiting.len();
    }
}

fn samples(w: &Work) -> bool {
    match w {
        Work::Decode => true,
        Work::Prefill { sample, .. } => *sample,
    }
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
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
