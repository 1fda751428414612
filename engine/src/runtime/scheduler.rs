//! Continuous batching on the engine thread.
//!
//! Each step: drop cancelled requests, admit waiting ones up to
//! `concurrent`, start admitted ones from the longest cached prefix, then run
//! ONE forward pass over every running sequence: one token for each
//! decoding sequence plus prefill chunks within the step's budget, sized in
//! time beside running decodes (`prefill_budget`), so a long prompt never
//! stalls running streams. After the pass, prefilled
//! prompt KV goes into the prefix cache at once, and each sampled
//! sequence's logits go through its own pipeline (`sequence`). Caches are
//! built from the model's declared KV layout.
//!
//! Requests that arrive together and share a prefix nobody has cached yet
//! do not all compute it: a later one waits while an earlier one prefills
//! the shared part, then starts from the cache.
//!
//! Batch API requests ([`Priority::Batch`]) run beneath interactive ones:
//! admission takes every waiting interactive request first, admits a batch
//! one only when none waits, and never lets batch sequences fill the last
//! free slot, so an interactive arrival starts at the next step instead of
//! waiting for a batch reply to end (decode steps cannot be preempted).
//! Interactive prompts also get the step's prefill budget first. Within a
//! priority, the prompt that sharing the prompt work equally would read
//! first goes first (`prefill_order`): a cached turn passes the cold
//! prompts before it, and no prompt is passed for much longer than equal
//! shares would take to read it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crate::error::Result;
use crate::models::{BatchItem, CausalLm, KvStore, Overlap};
use crate::runtime::config::EngineConfig;
use crate::runtime::events::EngineEvent;
use crate::runtime::model_text::ModelText;
use crate::runtime::prefill_budget::PrefillBudget;
use crate::runtime::prefill_order::PrefillOrder;
use crate::runtime::prefix_cache::PrefixCache;
use crate::runtime::request::Priority;
use crate::runtime::sequence::{NewSequence, Sequence};
use crate::runtime::settings::worst_case_positions;
use crate::runtime::stats::EngineStats;

/// Fixed caches are sized in steps of this many positions.
const CAPACITY_STEP: usize = 256;

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
    /// Every running sequence's keys and values, one slot each.
    kv: KvStore,
    prefix: Option<PrefixCache>,
    /// Prompt tokens per step, so running streams keep their pace.
    prefill: PrefillBudget,
    /// Which prompt the budget goes to first.
    order: PrefillOrder,
    stats: Arc<Mutex<EngineStats>>,
}

impl Scheduler {
    pub fn new(
        model: Box<dyn CausalLm>,
        text: Arc<ModelText>,
        config: EngineConfig,
        stats: Arc<Mutex<EngineStats>>,
    ) -> Self {
        let prefix = config.prefix_caching.then(|| {
            PrefixCache::new(
                model.kv_layout(),
                config.prefix_cache_bytes,
                config.prefix_snapshot_bytes,
            )
        });
        Scheduler {
            kv: KvStore::new(model.kv_layout()).with_max_positions(text.limits.context_length),
            prefill: PrefillBudget::new(config.prefill_chunk, config.prefill_share),
            order: PrefillOrder::default(),
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
        self.cache_finished_turns();
        self.retain_running(|s| !s.finished);
        self.publish_counts();
    }

    /// Keeps the running sequences `keep` accepts; the others' slots close.
    fn retain_running(&mut self, keep: impl Fn(&Sequence) -> bool) {
        let kv = &mut self.kv;
        self.running.retain(|s| {
            let kept = keep(s);
            if let (false, Some(slot)) = (kept, s.slot) {
                close_slot(kv, slot);
            }
            kept
        });
    }

    /// A finished sequence's prompt and reply go into the prefix cache
    /// (with a hybrid model's state at their end), so the next turn of the
    /// conversation, whose prompt holds this one and its reply, reuses
    /// them. A failure here costs only that reuse.
    fn cache_finished_turns(&mut self) {
        let Some(prefix) = &mut self.prefix else {
            return;
        };
        for s in self.running.iter().filter(|s| s.finished) {
            let Some(slot) = s.slot else { continue };
            let Some(tokens) = s.tokens(self.kv.offset(slot)) else {
                continue;
            };
            if tokens.len() > s.prompt.len() {
                if let Err(e) = prefix.insert(&tokens, &self.kv, slot) {
                    tracing::warn!(error = %e, "a finished turn was not cached");
                }
            }
        }
    }

    fn drop_cancelled(&mut self) {
        let before = self.running.len() + self.waiting.len();
        self.retain_running(|s| !s.events.is_closed());
        self.waiting.retain(|s| !s.events.is_closed());
        let dropped = before - self.running.len() - self.waiting.len();
        if dropped > 0 {
            self.stats.lock().expect("stats").requests_cancelled += dropped as u64;
        }
    }

    /// Admits waiting sequences, by [`next_to_admit`]'s choice, while a
    /// decode slot is free and the KV budget holds the next one's worst
    /// case (one always runs). The next sequence not fitting stops
    /// admission: a batch sequence never passes an interactive one that
    /// waits for KV.
    fn admit(&mut self) {
        let layout = self.model.kv_layout();
        let context = self.text.limits.context_length;
        let need = |prompt: usize, max_tokens: usize| {
            layout.bytes_for(worst_case_positions(prompt, max_tokens, context))
        };
        let mut reserved: usize = self
            .running
            .iter()
            .map(|s| need(s.prompt.len(), s.settings.max_tokens))
            .sum();
        let slots = self.config.concurrent.max(1);
        while self.running.len() < slots {
            let running_batch = self
                .running
                .iter()
                .filter(|s| s.priority == Priority::Batch)
                .count();
            let Some(i) = next_to_admit(
                self.waiting.iter().map(|s| s.priority),
                running_batch,
                batch_slots(slots),
            ) else {
                break;
            };
            let next = &self.waiting[i];
            let cost = need(next.prompt.len(), next.settings.max_tokens);
            if !self.running.is_empty() && reserved + cost > self.config.kv_budget_bytes {
                break;
            }
            reserved += cost;
            let Some(s) = self.waiting.remove(i) else {
                break;
            };
            self.stats.lock().expect("stats").requests_admitted += 1;
            self.running.push(Sequence::new(
                s,
                self.text.limits.context_length,
                self.config.thinking_budget,
                self.text.forced_close.len(),
            ));
        }
    }

    /// Starts admitted sequences from the longest cached prefix, unless an
    /// earlier sequence is still prefilling a longer shared prefix. Every
    /// starting sequence's slot is opened first and the store grown once
    /// for all of them before their prefixes are copied in.
    fn start_pending(&mut self) -> Result<()> {
        let mut starting: Vec<(usize, usize)> = Vec::new(); // (sequence, cached)
        for i in 0..self.running.len() {
            if self.running[i].slot.is_some() {
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
                    .map(|o| (common_prefix(&o.prompt, prompt).min(limit), o.prefilled))
                    // Only what the other has yet to reach: past it, what
                    // the cache holds is all there will be.
                    .filter(|&(shared, done)| done < shared)
                    .map(|(shared, _)| shared)
                    .max()
                    .unwrap_or(0);
                if shared_in_flight > cached {
                    continue; // wait for the earlier sequence to cache it
                }
            }
            let slot = self.kv.open(self.capacity_of(&self.running[i]))?;
            let s = &mut self.running[i];
            s.slot = Some(slot);
            s.prefilled = cached;
            s.cached = cached;
            s.shared_end = Some(self.order.end(s.prompt.len() - cached));
            starting.push((i, cached));
        }
        let slot_of = |i: usize| self.running[i].slot.expect("opened above");
        // Room for every starting prompt, whole, in one resize: the store
        // then grows once as a long prompt starts, not again and again
        // while its chunks go in, each time holding the running streams.
        let wants: Vec<(usize, usize)> = starting
            .iter()
            .map(|&(i, _)| (slot_of(i), self.running[i].prompt.len()))
            .collect();
        if !wants.is_empty() {
            self.kv.reserve_all(wants)?;
        }
        for (i, cached) in starting {
            let slot = slot_of(i);
            if let (Some(prefix), n) = (&mut self.prefix, cached) {
                if n > 0 {
                    let m = prefix.lookup(&self.running[i].prompt, n)?;
                    debug_assert_eq!(m.len, n, "lookup agrees with cached_len");
                    self.kv.load(slot, &m.segments, m.len, m.state.as_ref())?;
                }
            }
            let s = &self.running[i];
            self.stats.lock().expect("stats").record_start(
                s.prompt.len(),
                cached,
                self.prefix.is_some(),
            );
            let _ = s.events.send(EngineEvent::Started {
                prompt_tokens: s.prompt.len(),
                cached_tokens: cached,
            });
        }
        Ok(())
    }

    /// Where sequence `i`'s prefill chunk ending at `end` should stop
    /// instead, for a model with recurrent layers under the prefix cache:
    /// its state is cached only at chunk ends, so a chunk ends at the
    /// prompt's last but one token (a request with the same prompt resumes
    /// there and computes the last token itself) and where a waiting
    /// request's shared prefix ends (it then starts from that point).
    fn snapshot_stop(&self, i: usize, end: usize) -> usize {
        if !self.prefix.as_ref().is_some_and(|p| p.needs_snapshots()) {
            return end;
        }
        let s = &self.running[i];
        let shared = self
            .running
            .iter()
            .filter(|o| o.slot.is_none())
            .map(|o| common_prefix(&o.prompt, &s.prompt).min(o.prompt.len().saturating_sub(1)));
        std::iter::once(s.prompt.len().saturating_sub(1))
            .chain(shared)
            .filter(|&stop| stop > s.prefilled && stop < end)
            .min()
            .unwrap_or(end)
    }

    /// In batch-invariant mode, the fixed cache size of a sequence: a
    /// function of the request alone (prompt and token limit), so attention
    /// shapes are the same however the request is batched or cached.
    fn capacity_of(&self, s: &Sequence) -> Option<usize> {
        let context = self.text.limits.context_length;
        self.config.deterministic.then(|| {
            let needed = worst_case_positions(s.prompt.len(), s.settings.max_tokens, context);
            (needed.div_ceil(CAPACITY_STEP) * CAPACITY_STEP).min(context)
        })
    }

    fn forward_and_sample(&mut self) -> Result<()> {
        let mut plan: Vec<(usize, Work)> = Vec::new();
        for (i, s) in self.running.iter().enumerate() {
            if s.decoding {
                plan.push((i, Work::Decode));
            }
        }
        let decoding = plan.len();
        let mut budget = self.prefill.tokens(decoding);
        // Interactive prompts take the budget first, then the one equal
        // shares would read first (`prefill_order`).
        let mut prefilling: Vec<usize> = (0..self.running.len())
            .filter(|&i| self.running[i].prefilling())
            .collect();
        let shared_end = |s: &Sequence| s.shared_end.unwrap_or(f64::INFINITY);
        prefilling.sort_by(|&a, &b| {
            let (a, b) = (&self.running[a], &self.running[b]);
            (a.priority.cmp(&b.priority)).then(shared_end(a).total_cmp(&shared_end(b)))
        });
        let reading: Vec<f64> = prefilling
            .iter()
            .map(|&i| shared_end(&self.running[i]))
            .collect();
        for i in prefilling {
            let s = &self.running[i];
            if budget > 0 {
                let end = (s.prefilled + budget).min(s.prompt.len());
                let end = self.snapshot_stop(i, end);
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
        // Slot order: the decode group's keys are then one view of the
        // store, with no permutation of rows (`models::forward::layout`).
        plan.sort_by_key(|(i, _)| self.running[*i].slot);

        let prefill_tokens: usize = plan
            .iter()
            .map(|(i, w)| match w {
                Work::Prefill { end, .. } => end - self.running[*i].prefilled,
                Work::Decode => 0,
            })
            .sum();
        let started = std::time::Instant::now();
        let logits = {
            let mut items = Vec::with_capacity(plan.len());
            for (i, work) in &plan {
                let s = &self.running[*i];
                let slot = s.slot.expect("started sequence");
                items.push(match work {
                    Work::Decode => BatchItem {
                        tokens: &s.next_input[..],
                        slot,
                        sample: true,
                    },
                    Work::Prefill { end, sample } => BatchItem {
                        tokens: &s.prompt[s.prefilled..*end],
                        slot,
                        sample: *sample,
                    },
                });
            }
            let logits = self
                .model
                .forward_pass(&mut self.kv, &items, Overlap::Layers)?;
            // Evaluate the store too: a pass of prefill chunks alone samples
            // nothing, and its work must still happen in this step.
            let mut outputs: Vec<&mlx_rs::Array> = vec![&logits];
            outputs.extend(self.kv.arrays());
            mlx_rs::transforms::eval(outputs)?;
            if logits.size() == 0 {
                Vec::new()
            } else {
                logits.as_slice::<f32>().to_vec()
            }
        };
        let computed = started.elapsed();
        self.prefill.observe(decoding, prefill_tokens, computed);
        self.order.read(prefill_tokens, reading);
        self.stats
            .lock()
            .expect("stats")
            .record_step(plan.len(), prefill_tokens);

        let vocab = self.model.config().vocab_size;
        let mut row = 0;
        for (i, work) in plan {
            if let Work::Prefill { end, .. } = work {
                let s = &mut self.running[i];
                s.prefilled = end;
                if let Some(prefix) = &mut self.prefix {
                    prefix.insert(&s.prompt[..end], &self.kv, s.slot.expect("started"))?;
                }
            }
            if samples(&work) {
                let raw = &logits[row * vocab..(row + 1) * vocab];
                let s = &mut self.running[i];
                let position = self.kv.offset(s.slot.expect("started"));
                s.on_logits(&self.text, &self.stats, raw, position)?;
                row += 1;
            }
        }
        tracing::trace!(
            sequences = row,
            prefill_tokens,
            forward_us = computed.as_micros() as u64,
            sample_us = (started.elapsed() - computed).as_micros() as u64,
            "step"
        );
        Ok(())
    }

    fn fail_all(&mut self, message: &str) {
        let n = self.running.len();
        for s in self.running.drain(..) {
            if let Some(slot) = s.slot {
                close_slot(&mut self.kv, slot);
            }
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
        st.prefix_cache_bytes = self.prefix.as_ref().map_or(0, PrefixCache::bytes);
        st.kv_grows = self.kv.grows();
    }
}

/// Closes a finished sequence's slot. A failed shrink of the store leaves
/// it as it was (larger than needed), so it is logged, not fatal.
fn close_slot(kv: &mut KvStore, slot: usize) {
    if let Err(e) = kv.close(slot) {
        tracing::warn!(error = %e, "KV store kept its size");
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

/// The slots batch sequences may hold together: all but one of
/// `--concurrent`, so an interactive request arriving while a batch runs
/// finds a slot at once; with one slot, that slot (a batch then still
/// progresses, and an interactive request waits for at most one reply).
fn batch_slots(slots: usize) -> usize {
    slots.saturating_sub(1).max(1)
}

/// Which waiting sequence (its index in `waiting`, given in arrival order)
/// is admitted next: the first interactive one; else, when fewer than
/// `batch_slots` batch sequences run, the first batch one; else none.
fn next_to_admit(
    waiting: impl IntoIterator<Item = Priority>,
    running_batch: usize,
    batch_slots: usize,
) -> Option<usize> {
    let mut first_batch = None;
    for (i, priority) in waiting.into_iter().enumerate() {
        match priority {
            Priority::Interactive => return Some(i),
            Priority::Batch if first_batch.is_none() => first_batch = Some(i),
            Priority::Batch => {}
        }
    }
    first_batch.filter(|_| running_batch < batch_slots)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Priority::{Batch, Interactive};

    #[test]
    fn interactive_requests_are_admitted_before_batch_ones_that_came_first() {
        assert_eq!(next_to_admit([Batch, Batch, Interactive], 0, 3), Some(2));
        assert_eq!(next_to_admit([Interactive, Batch], 0, 3), Some(0));
        // Arrival order within a priority.
        assert_eq!(
            next_to_admit([Batch, Interactive, Interactive], 5, 1),
            Some(1)
        );
        assert_eq!(next_to_admit([Batch, Batch], 0, 3), Some(0));
        assert_eq!(next_to_admit([], 0, 3), None);
    }

    #[test]
    fn batch_sequences_leave_a_slot_for_the_next_interactive_request() {
        assert_eq!(batch_slots(8), 7);
        assert_eq!(batch_slots(2), 1);
        // One slot: a batch still runs, one line at a time.
        assert_eq!(batch_slots(1), 1);
        assert_eq!(next_to_admit([Batch], 1, batch_slots(2)), None);
        assert_eq!(next_to_admit([Batch], 0, batch_slots(2)), Some(0));
        // An interactive request is admitted whatever the batch holds.
        assert_eq!(
            next_to_admit([Batch, Interactive], 7, batch_slots(8)),
            Some(1)
        );
    }
}
