//! Separating reasoning from content.
//!
//! A reasoning block opens at the very start of the output (`<think>`, or
//! Gemma 4's `<|channel>thought`), or in the prompt when the template
//! already wrote the opening marker, and ends at its closing marker. Its
//! text becomes `reasoning_content`; markers never reach content, also when
//! thinking was disabled and the model opened a block anyway. Turn-end
//! markers (`<|im_end|>`, `<turn|>`, ...) end the message: a server that
//! did not stop on them must not show them, nor anything after.

use super::markers::{self, MarkerScan};

/// How a model family marks reasoning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasoningFormat {
    /// `<think> .. </think>` (Qwen3, DeepSeek-R1, SmolLM3, ...).
    Think,
    /// `<|channel>thought .. <channel|>` (Gemma 4).
    GemmaChannel,
}

const OPENERS: [(&str, ReasoningFormat); 2] = [
    ("<think>", ReasoningFormat::Think),
    ("<|channel>thought", ReasoningFormat::GemmaChannel),
];

/// Markers that end a turn; the engine stops on their ids, these guard
/// text that arrives without them being stopped on.
pub const TURN_ENDS: [&str; 6] = [
    "<|im_end|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<turn|>",
    "<end_of_turn>",
    "<|endoftext|>",
];

impl ReasoningFormat {
    /// From the chat template's text; `Think` when it names neither.
    pub fn detect(template: &str) -> Self {
        if template.contains("<|channel>") {
            ReasoningFormat::GemmaChannel
        } else {
            ReasoningFormat::Think
        }
    }

    pub fn open(self) -> &'static str {
        match self {
            ReasoningFormat::Think => "<think>",
            ReasoningFormat::GemmaChannel => "<|channel>thought",
        }
    }

    pub fn close(self) -> &'static str {
        match self {
            ReasoningFormat::Think => "</think>",
            ReasoningFormat::GemmaChannel => "<channel|>",
        }
    }

    /// The text the engine writes to end reasoning early (thinking budget).
    pub fn forced_close(self) -> &'static str {
        match self {
            ReasoningFormat::Think => "\n</think>\n\n",
            ReasoningFormat::GemmaChannel => "<channel|>",
        }
    }

    /// Whether a rendered prompt leaves a reasoning block open, so the
    /// output starts inside it (templates that write `<think>` themselves).
    pub fn prompt_opens(self, prompt: &str) -> bool {
        let tail = prompt.trim_end();
        match tail.rfind(self.open()) {
            Some(at) => !tail[at..].contains(self.close()),
            None => false,
        }
    }
}

/// A piece of output, routed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Routed {
    Reasoning(String),
    Content(String),
}

/// Gemma 4's channel markers beyond its opener and close. They are
/// special tokens, never text a model writes by accident, so they are
/// acted on wherever they appear (what vLLM's and mlx-lm's Gemma 4 parsers
/// do): a thought channel opened again after content is reasoning again
/// (repeated thought cycles), a `response` channel ends reasoning (or is
/// dropped in content), and a tool call ends reasoning.
const THOUGHT_CHANNEL: &str = "<|channel>thought";
const RESPONSE_CHANNEL: &str = "<|channel>response";
const CHANNEL_CLOSE: &str = "<channel|>";
const GEMMA_TOOL_CALL: &str = "<|tool_call>";
/// The channel's name without its opener, at the very start of the
/// output: the opener was lost (a tokenizer that skips special tokens, a
/// prompt that held it), the block is still a thought.
const BARE_THOUGHT_LABEL: &str = "thought\n";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing but whitespace yet: a block may still open.
    Start,
    Reasoning(ReasoningFormat),
    Content,
    /// A turn-end marker was seen; everything after is dropped.
    Ended,
}

/// Routes output text to reasoning or content as it arrives.
#[derive(Debug)]
pub struct ReasoningSplitter {
    /// The model's format: Gemma's channel markers are acted on anywhere.
    format: ReasoningFormat,
    state: State,
    buf: String,
    /// Drop whitespace at the start of the next reasoning or content run.
    trim_leading: bool,
    /// A reasoning block ended before: the next one's text is set apart
    /// from it by a newline.
    separate_reasoning: bool,
    /// Reasoning text was emitted.
    reasoned: bool,
    /// Bytes dropped after a turn-end marker.
    pub dropped_after_turn_end: usize,
}

impl ReasoningSplitter {
    /// `format`: the model's; `prompt_opened`: the prompt already opened a
    /// block of it.
    pub fn new(format: ReasoningFormat, prompt_opened: bool) -> Self {
        ReasoningSplitter {
            format,
            state: match prompt_opened {
                true => State::Reasoning(format),
                false => State::Start,
            },
            buf: String::new(),
            trim_leading: prompt_opened,
            separate_reasoning: false,
            reasoned: false,
            dropped_after_turn_end: 0,
        }
    }

    pub fn in_reasoning(&self) -> bool {
        matches!(self.state, State::Reasoning(_))
    }

    pub fn feed(&mut self, text: &str, out: &mut Vec<Routed>) {
        self.buf.push_str(text);
        self.drain(false, out);
    }

    pub fn finish(&mut self, out: &mut Vec<Routed>) {
        self.drain(true, out);
    }

    fn gemma(&self) -> bool {
        self.format == ReasoningFormat::GemmaChannel
    }

    fn drain(&mut self, last: bool, out: &mut Vec<Routed>) {
        loop {
            match self.state {
                State::Ended => {
                    self.dropped_after_turn_end += self.buf.len();
                    self.buf.clear();
                    return;
                }
                State::Start => {
                    let start = self.buf.len() - self.buf.trim_start().len();
                    let rest = &self.buf[start..];
                    let bare = self
                        .gemma()
                        .then_some((BARE_THOUGHT_LABEL, ReasoningFormat::GemmaChannel));
                    let openers = OPENERS.iter().copied().chain(bare);
                    if let Some((open, format)) = openers.clone().find(|(o, _)| rest.starts_with(o))
                    {
                        let mut cut = start + open.len();
                        // Gemma writes the channel name, then a newline.
                        if self.buf[cut..].starts_with('\n') {
                            cut += 1;
                        }
                        self.buf.drain(..cut);
                        self.state = State::Reasoning(format);
                        self.trim_leading = true;
                        continue;
                    }
                    let could_open = openers.into_iter().any(|(o, _)| o.starts_with(rest));
                    if could_open && !last {
                        return; // whitespace or a marker's beginning: wait
                    }
                    self.state = State::Content;
                }
                State::Reasoning(format) => {
                    let mut ends: Vec<&str> = vec![format.close()];
                    if format == ReasoningFormat::GemmaChannel {
                        ends.extend([RESPONSE_CHANNEL, GEMMA_TOOL_CALL, THOUGHT_CHANNEL]);
                    }
                    ends.extend(TURN_ENDS);
                    if !self.emit_until(&ends, last, out, Routed::Reasoning) {
                        return;
                    }
                }
                State::Content => {
                    let mut ends: Vec<&str> = TURN_ENDS.to_vec();
                    match self.gemma() {
                        true => ends.extend([THOUGHT_CHANNEL, RESPONSE_CHANNEL, CHANNEL_CLOSE]),
                        // A stray close after reasoning ended (a small model
                        // that closes twice) is dropped, as vLLM's Qwen3
                        // parser swallows it: markers never reach content.
                        false => ends.push(ReasoningFormat::Think.close()),
                    }
                    if !self.emit_until(&ends, last, out, Routed::Content) {
                        return;
                    }
                }
            }
        }
    }

    /// Emits text up to the first of `ends`, then acts on the marker;
    /// returns whether one was found, false when waiting for more text.
    fn emit_until(
        &mut self,
        ends: &[&str],
        last: bool,
        out: &mut Vec<Routed>,
        wrap: fn(String) -> Routed,
    ) -> bool {
        let (mut emit_to, found) = match markers::scan(&self.buf, ends) {
            MarkerScan::Found { at, marker } => (at, Some(ends[marker])),
            MarkerScan::Clear { safe } => (if last { self.buf.len() } else { safe }, None),
        };
        // A Gemma thought ends without the whitespace before its end, so
        // trailing whitespace waits until text follows it.
        let reasoning = matches!(self.state, State::Reasoning(_));
        let trim_trailing = reasoning && self.gemma();
        if trim_trailing {
            emit_to = self.buf[..emit_to].trim_end().len();
        }
        let mut piece: String = self.buf.drain(..emit_to).collect();
        if self.trim_leading {
            let trimmed = piece.trim_start();
            if !trimmed.is_empty() {
                self.trim_leading = false;
            }
            piece = trimmed.to_string();
        }
        if !piece.is_empty() {
            if reasoning {
                if std::mem::take(&mut self.separate_reasoning) && self.reasoned {
                    piece.insert(0, '\n');
                }
                self.reasoned = true;
            }
            push(out, wrap(piece));
        }
        let Some(marker) = found else {
            if last && trim_trailing {
                self.buf.clear();
            }
            return false;
        };
        if trim_trailing {
            // The whitespace before the marker.
            let ws = self.buf.len() - self.buf.trim_start().len();
            self.buf.drain(..ws);
        }
        if TURN_ENDS.contains(&marker) {
            self.buf.drain(..marker.len());
            self.state = State::Ended;
            return true;
        }
        match (reasoning, marker) {
            // Handed on with the call: the tool-call parser reads it.
            (true, GEMMA_TOOL_CALL) => {
                self.separate_reasoning = true;
                self.state = State::Content;
            }
            (_, THOUGHT_CHANNEL) => {
                self.buf.drain(..marker.len());
                self.separate_reasoning = true;
                self.state = State::Reasoning(ReasoningFormat::GemmaChannel);
            }
            _ => {
                // A close, a response channel, or a stray close in content.
                self.buf.drain(..marker.len());
                if reasoning {
                    self.separate_reasoning = true;
                }
                self.state = State::Content;
            }
        }
        self.trim_leading = true;
        true
    }
}

/// Appends, merging with the previous piece of the same kind.
fn push(out: &mut Vec<Routed>, piece: Routed) {
    match (out.last_mut(), piece) {
        (Some(Routed::Reasoning(a)), Routed::Reasoning(b)) => a.push_str(&b),
        (Some(Routed::Content(a)), Routed::Content(b)) => a.push_str(&b),
        (_, p) => out.push(p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(open: Option<ReasoningFormat>, parts: &[&str]) -> (String, String) {
        split_as(
            open.unwrap_or(ReasoningFormat::Think),
            open.is_some(),
            parts,
        )
    }

    fn split_as(format: ReasoningFormat, opened: bool, parts: &[&str]) -> (String, String) {
        let mut s = ReasoningSplitter::new(format, opened);
        let mut out = Vec::new();
        for p in parts {
            s.feed(p, &mut out);
        }
        s.finish(&mut out);
        let mut r = String::new();
        let mut c = String::new();
        for p in out {
            match p {
                Routed::Reasoning(t) => r.push_str(&t),
                Routed::Content(t) => c.push_str(&t),
            }
        }
        (r, c)
    }

    #[test]
    fn think_blocks_and_prompt_opened_blocks() {
        assert_eq!(
            split(None, &["<th", "ink>\nhmm</th", "ink>\n\nHi"]),
            ("hmm".into(), "Hi".into())
        );
        assert_eq!(
            split(Some(ReasoningFormat::Think), &["a</think>b"]),
            ("a".into(), "b".into())
        );
        assert_eq!(
            split(None, &["plain <think> text"]),
            ("".into(), "plain <think> text".into())
        );
    }

    #[test]
    fn a_stray_close_in_content_is_dropped() {
        assert_eq!(
            split(
                Some(ReasoningFormat::Think),
                &["plan</think>\n\nDone.\n</th", "ink>\n\nAgain."]
            ),
            ("plan".into(), "Done.\nAgain.".into())
        );
        assert_eq!(
            split(None, &["Hi.</think>there"]),
            ("".into(), "Hi.there".into())
        );
    }

    #[test]
    fn gemma_channel_and_turn_end() {
        assert_eq!(
            split(None, &["<|channel>thought\n<channel|>Yes.<turn|>junk"]),
            ("".into(), "Yes.".into())
        );
    }

    #[test]
    fn prompt_detection() {
        assert!(ReasoningFormat::Think.prompt_opens("<|im_start|>assistant\n<think>\n"));
        assert!(!ReasoningFormat::Think.prompt_opens("assistant\n<think>\n\n</think>\n\n"));
    }
}
