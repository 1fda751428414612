//! The streaming tool-call driver, common to every format.
//!
//! Content passes through until a region's start marker (a tail that may
//! begin one is held back). A region's body is rescanned as it grows; each
//! call's header (index, id, name) is emitted once its name is known, each
//! argument once complete, coerced to the tool's schema, and the closing
//! `}` when the call ends. The fragments of a call therefore concatenate
//! to exactly the arguments a non-streaming parse gives.
//!
//! Duplicates (one rule for every format): within one call the first value
//! of a key wins; later values for it (a repeated `<parameter=K>`, a key
//! written twice, an arguments object written twice) are dropped and
//! counted. A call object repeated verbatim right after itself inside one
//! region (`{..}{..}`) is one call. The arguments are always one JSON
//! object.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::coercion::Coercer;
use super::formats::{BodyScan, RawArg, RegionSyntax, ToolCallFormat};
use super::markers::{self, MarkerScan};
use super::{ParseStats, ParsedDelta};

/// Tool name -> its `parameters` schema.
pub type ToolSchemas = Arc<HashMap<String, Value>>;

#[derive(Debug, Default)]
struct CallState {
    index: usize,
    header: bool,
    /// Scan members already handled.
    processed: usize,
    keys: Vec<String>,
    closed: bool,
}

#[derive(Debug, PartialEq, Eq)]
enum Mode {
    Content,
    /// Inside a region; `opener` is the marker that started it (kept to
    /// restore the text if the region turns out not to be a call).
    Region {
        opener: &'static str,
        in_body: bool,
    },
    /// Tool parsing gave up for this message (plain JSON content).
    Plain,
}

pub struct ToolCallParser {
    format: ToolCallFormat,
    syntax: RegionSyntax,
    tools: ToolSchemas,
    mode: Mode,
    /// Content not yet released (may begin a marker).
    pending: String,
    body: String,
    /// Where the search for the end marker resumes.
    end_search_from: usize,
    /// The current region was closed by its end marker.
    end_seen: bool,
    calls: Vec<CallState>,
    next_index: usize,
    /// Some non-whitespace content was emitted.
    seen_content: bool,
    /// Whitespace after a call, released only if real content follows.
    held_ws: String,
    after_call: bool,
    pub stats: ParseStats,
}

impl ToolCallParser {
    pub fn new(format: ToolCallFormat, tools: ToolSchemas) -> Self {
        ToolCallParser {
            format,
            syntax: format.regions(),
            tools,
            mode: Mode::Content,
            pending: String::new(),
            body: String::new(),
            end_search_from: 0,
            end_seen: false,
            calls: Vec::new(),
            next_index: 0,
            seen_content: false,
            held_ws: String::new(),
            after_call: false,
            stats: ParseStats::default(),
        }
    }

    pub fn feed(&mut self, text: &str, out: &mut Vec<ParsedDelta>) {
        self.pending.push_str(text);
        self.drain(false, out);
    }

    pub fn finish(&mut self, out: &mut Vec<ParsedDelta>) {
        self.drain(true, out);
        self.held_ws.clear();
    }

    fn drain(&mut self, last: bool, out: &mut Vec<ParsedDelta>) {
        loop {
            match self.mode {
                Mode::Plain => {
                    let text = std::mem::take(&mut self.pending);
                    self.emit_content(text, out);
                    return;
                }
                Mode::Content => {
                    if !self.seen_content && self.calls.is_empty() && self.next_index == 0 {
                        let t = self.pending.trim_start();
                        if let Some(m) = self
                            .syntax
                            .starts_at_beginning
                            .iter()
                            .find(|m| t.starts_with(**m))
                        {
                            let body = t.to_string();
                            self.pending.clear();
                            self.enter_region(m, true, body);
                            continue;
                        }
                        if t.is_empty() && !last && !self.syntax.starts_at_beginning.is_empty() {
                            return; // only whitespace so far: a call may still begin
                        }
                    }
                    match markers::scan(&self.pending, self.syntax.starts) {
                        MarkerScan::Found { at, marker } => {
                            let before: String = self.pending.drain(..at).collect();
                            self.emit_content(before, out);
                            let opener = self.syntax.starts[marker];
                            let body = self.pending.split_off(opener.len());
                            self.pending.clear();
                            self.held_ws.clear();
                            self.enter_region(opener, false, body);
                        }
                        MarkerScan::Clear { safe } => {
                            let upto = if last { self.pending.len() } else { safe };
                            let text: String = self.pending.drain(..upto).collect();
                            self.emit_content(text, out);
                            return;
                        }
                    }
                }
                Mode::Region { .. } => {
                    let added = std::mem::take(&mut self.pending);
                    let grew_boundary = added.bytes().any(|b| self.syntax.boundaries.contains(&b));
                    self.body.push_str(&added);
                    if let Some(end) = self.syntax.end {
                        let from = floor_char(&self.body, self.end_search_from);
                        if let Some(at) = self.body[from..].find(end).map(|i| from + i) {
                            self.pending = self.body.split_off(at)[end.len()..].to_string();
                            self.end_seen = true;
                            self.close_region(out);
                            continue;
                        }
                        self.end_search_from = self.body.len().saturating_sub(end.len());
                    }
                    if last {
                        if self.syntax.end.is_some() && !self.calls.is_empty() {
                            self.stats.unterminated_calls += 1;
                        }
                        self.close_region(out);
                        continue;
                    }
                    if grew_boundary || self.calls.is_empty() {
                        let scan = self.format.scan(&self.body, false);
                        if scan.not_a_call {
                            self.give_up_region(out);
                            continue;
                        }
                        self.apply(&scan, false, out);
                    }
                    return;
                }
            }
        }
    }

    fn enter_region(&mut self, opener: &'static str, in_body: bool, body: String) {
        self.mode = Mode::Region { opener, in_body };
        self.pending = body;
        self.body.clear();
        self.end_search_from = 0;
        self.end_seen = false;
        self.calls.clear();
    }

    /// The region ended (its end marker, or the end of the output).
    fn close_region(&mut self, out: &mut Vec<ParsedDelta>) {
        let scan = self.format.scan(&self.body, true);
        if scan.not_a_call || (scan.calls.iter().all(|c| c.name.is_none()) && !self.any_header()) {
            self.give_up_region(out);
            return;
        }
        self.apply(&scan, true, out);
        self.stats.repeated_calls += scan.repeated_calls;
        self.stats.unnamed_calls += scan.calls.iter().filter(|c| c.name.is_none()).count();
        self.mode = Mode::Content;
        self.body.clear();
        self.calls.clear();
        self.after_call = true;
    }

    fn any_header(&self) -> bool {
        self.calls.iter().any(|c| c.header)
    }

    /// Not a call after all: its text, marker included, is content.
    fn give_up_region(&mut self, out: &mut Vec<ParsedDelta>) {
        let Mode::Region { opener, in_body } = self.mode else {
            return;
        };
        let mut text = if in_body {
            String::new()
        } else {
            opener.to_string()
        };
        text.push_str(&self.body);
        if self.end_seen {
            text.push_str(self.syntax.end.unwrap_or_default());
        }
        self.body.clear();
        self.calls.clear();
        self.stats.unparsed_regions += 1;
        self.mode = if in_body { Mode::Plain } else { Mode::Content };
        let rest = std::mem::take(&mut self.pending);
        text.push_str(&rest);
        if in_body {
            self.pending = text;
        } else {
            // The opener is released as content; scanning resumes after it.
            self.emit_content(text[..opener.len()].to_string(), out);
            self.pending = text[opener.len()..].to_string();
        }
    }

    fn emit_content(&mut self, text: String, out: &mut Vec<ParsedDelta>) {
        if text.is_empty() {
            return;
        }
        let text = if self.after_call {
            self.held_ws.push_str(&text);
            if self.held_ws.trim().is_empty() {
                return;
            }
            self.after_call = false;
            std::mem::take(&mut self.held_ws)
        } else {
            text
        };
        if !text.trim().is_empty() {
            self.seen_content = true;
        }
        match out.last_mut() {
            Some(ParsedDelta::Content(prev)) => prev.push_str(&text),
            _ => out.push(ParsedDelta::Content(text)),
        }
    }

    /// Emits what `scan` knows beyond what was emitted already.
    fn apply(&mut self, scan: &BodyScan, complete: bool, out: &mut Vec<ParsedDelta>) {
        for (k, call) in scan.calls.iter().enumerate() {
            if k >= self.calls.len() {
                self.calls.push(CallState::default());
            }
            let Some(name) = &call.name else {
                break;
            };
            let st = &mut self.calls[k];
            if !st.header {
                st.header = true;
                st.index = self.next_index;
                self.next_index += 1;
                self.stats.tool_calls += 1;
                out.push(ParsedDelta::ToolCallStart {
                    index: st.index,
                    name: name.clone(),
                });
            }
            let mut coercer = Coercer::new(self.tools.get(name));
            for (key, raw) in &call.members[st.processed.min(call.members.len())..] {
                st.processed += 1;
                if st.keys.contains(key) {
                    self.stats.duplicate_keys += 1;
                    continue;
                }
                st.keys.push(key.clone());
                let prop = coercer.property(key);
                let value = match raw {
                    RawArg::Json(v) => coercer.coerce_value(prop.as_ref(), v.clone()),
                    RawArg::Text(t) => coercer.coerce_text(prop.as_ref(), t),
                };
                let sep = if st.keys.len() == 1 { "{" } else { "," };
                let fragment = format!(
                    "{sep}{}:{}",
                    Value::String(key.clone()),
                    serde_json::to_string(&value).unwrap_or_else(|_| "null".into())
                );
                out.push(ParsedDelta::ToolCallArguments {
                    index: st.index,
                    fragment,
                });
            }
            self.stats.coercion_failures += coercer.failures;
            if (call.closed || complete) && !st.closed {
                st.closed = true;
                let fragment = if st.keys.is_empty() { "{}" } else { "}" };
                out.push(ParsedDelta::ToolCallArguments {
                    index: st.index,
                    fragment: fragment.into(),
                });
            }
        }
    }
}

/// The largest char boundary at or below `i`.
fn floor_char(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}
