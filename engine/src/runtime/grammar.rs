//! Constrained decoding with llguidance.
//!
//! One [`GrammarCompiler`] per model (its parser factory is built once from
//! the tokenizer and shared); each constrained request gets its own
//! [`GrammarState`] (an llguidance matcher), compiled on the caller's thread
//! by `Engine::submit`, so a new schema never stalls the decode loop. On the
//! engine thread the state masks its own sequence's logits before sampling
//! and advances with the sampled token; end ids are allowed only where the
//! grammar accepts.

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::{Matcher, ParserFactory};
use serde_json::{json, Value};
use toktrie_hf_tokenizers::ByteTokenizer;

use crate::error::{EngineError, Result};
use crate::loading::eos::EosSet;
use crate::loading::tokenizer::TextTokenizer;
use crate::runtime::constraint::Constraint;
use crate::runtime::request::{GenerationRequest, ToolChoice};
use crate::runtime::tool_spec::ToolSpec;

/// How the engine treats a request's constraint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrammarMode {
    /// The request asked for no constraint.
    None,
    /// The output is constrained by the grammar.
    Enforced,
    /// The request asked for one that the output parser keeps without a
    /// grammar (`tool_choice: "none"`), and grammar constraints are off: it
    /// is served unconstrained (servers report this in
    /// `X-Grammar-Constraints`).
    Downgraded,
}

impl GrammarMode {
    pub fn as_str(self) -> &'static str {
        match self {
            GrammarMode::None => "none",
            GrammarMode::Enforced => "enforced",
            GrammarMode::Downgraded => "downgraded",
        }
    }
}

/// The constraint a request's tools impose: `tool_choice` required or
/// named forces a call; under `auto`, a `strict` tool makes any call valid.
pub fn tool_constraint(request: &GenerationRequest) -> Result<Option<Constraint>> {
    match request.tool_choice {
        ToolChoice::Auto if request.tools.iter().any(|s| s.strict) => {
            Ok(Some(Constraint::MaybeToolCall(request.tools.clone())))
        }
        ToolChoice::Auto | ToolChoice::None => Ok(None),
        ToolChoice::Required | ToolChoice::Named(_) => {
            Ok(Some(Constraint::ToolCall(request.callable_tools()?)))
        }
    }
}

/// Compiles constraints for one model.
#[derive(Clone)]
pub struct GrammarCompiler {
    factory: Arc<ParserFactory>,
    /// The hermes call markers as grammar text ([`marker`]).
    call_open: Marker,
    call_close: Marker,
}

impl GrammarCompiler {
    /// Builds the parser factory from the model's tokenizer; every id of
    /// the EOS set counts as an end token for the grammar.
    pub fn new(tokenizer: &TextTokenizer, eos: &EosSet, vocab_size: usize) -> Result<Self> {
        let grammar_err =
            |e: anyhow::Error| EngineError::Tokenizer(format!("grammar back-end: {e}"));
        let mut bytes =
            ByteTokenizer::from_tokenizer(tokenizer.hf().clone()).map_err(grammar_err)?;
        let eos_ids: Vec<u32> = eos.ids().collect();
        if !eos_ids.is_empty() {
            bytes.set_eos_tokens(&eos_ids);
        }
        let env = bytes.into_tok_env(Some(vocab_size)).map_err(grammar_err)?;
        let factory = ParserFactory::new_simple(&env).map_err(grammar_err)?;
        Ok(GrammarCompiler {
            factory: Arc::new(factory),
            call_open: Marker::of(tokenizer, HERMES_OPEN),
            call_close: Marker::of(tokenizer, HERMES_CLOSE),
        })
    }

    /// Compiles `constraint`; an invalid or unsupported schema is a
    /// request error naming the problem. With `reasoning`, the output
    /// starts inside a reasoning block that is free text up to its end
    /// marker; the constraint applies after it.
    pub fn compile(
        &self,
        constraint: &Constraint,
        reasoning: Option<&ReasoningPrefix>,
    ) -> Result<GrammarState> {
        let grammar = match (constraint, reasoning) {
            (Constraint::JsonObject, None) => {
                TopLevelGrammar::from_json_schema(compact(json!({"type": "object"})))
            }
            (Constraint::JsonSchema(schema), None) => {
                TopLevelGrammar::from_json_schema(compact(schema.clone()))
            }
            _ => TopLevelGrammar::from_lark(self.lark_grammar(constraint, reasoning)),
        };
        let parser =
            self.factory
                .create_parser(grammar)
                .map_err(|e| EngineError::InvalidRequest {
                    message: format!("invalid or unsupported schema: {e}"),
                    param: Some(match constraint {
                        Constraint::ToolCall(_) | Constraint::MaybeToolCall(_) => "tools".into(),
                        Constraint::NoToolCalls(_) => "tool_choice".into(),
                        _ => "response_format".into(),
                    }),
                })?;
        Ok(GrammarState {
            matcher: Matcher::new(Ok(parser)),
        })
    }
}

/// JSON without optional whitespace: a small model given free whitespace
/// can spend its whole budget on newlines.
fn compact(mut schema: Value) -> Value {
    if let Value::Object(map) = &mut schema {
        map.entry("x-guidance")
            .or_insert_with(|| json!({"whitespace_flexible": false}));
    }
    schema
}

/// A marker as the grammar names it: an added token of the tokenizer
/// (special or not: llguidance's token trie treats every added token as
/// one, so its bytes never match text) as that token, other markers as
/// their bytes. Qwen3-style models have `</think>` and `<tool_call>` as
/// added, non-special tokens: matched as bytes they could only be spelled
/// out piece by piece, which such a model never does.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Marker {
    Token(u32),
    Bytes(String),
}

impl Marker {
    fn of(tokenizer: &TextTokenizer, text: &str) -> Self {
        tokenizer
            .hf()
            .get_added_tokens_decoder()
            .iter()
            .find(|(_, t)| t.content == text)
            .map_or_else(
                || Marker::Bytes(text.to_string()),
                |(id, _)| Marker::Token(*id),
            )
    }
}

/// Lark text: `<[id]>` for a token, a string literal for bytes.
impl std::fmt::Display for Marker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Marker::Token(id) => write!(f, "<[{id}]>"),
            Marker::Bytes(text) => write!(f, "{}", Value::from(text.as_str())),
        }
    }
}

/// The end of a reasoning block as the grammar names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReasoningPrefix {
    close: Marker,
}

impl ReasoningPrefix {
    pub fn new(tokenizer: &TextTokenizer, close: &str) -> Self {
        ReasoningPrefix {
            close: Marker::of(tokenizer, close),
        }
    }
}

impl GrammarCompiler {
    /// Lark text for `constraint` (as rule `body`), after a reasoning block
    /// when `reasoning` is given.
    fn lark_grammar(&self, constraint: &Constraint, reasoning: Option<&ReasoningPrefix>) -> String {
        let body = match constraint {
            Constraint::JsonObject => {
                format!("body: %json {}\n", compact(json!({"type": "object"})))
            }
            Constraint::JsonSchema(schema) => format!("body: %json {}\n", compact(schema.clone())),
            Constraint::ToolCall(tools) => self.hermes_call_grammar(tools, false),
            // Text that cannot hold a call, or text up to the first call
            // marker (lazy) and then a valid call. A marker that is a token
            // is never part of text: the text runs to it.
            Constraint::MaybeToolCall(tools) => {
                let text = format!(
                    "TEXT: /(?s:.*)/ & ~/(?s:.*){}(?s:.*)/\n",
                    regex_literal(HERMES_OPEN)
                );
                let before = match &self.call_open {
                    Marker::Bytes(_) => format!(
                        "body: TEXT | before_call call\nbefore_call[lazy]: /(?s:.*)/ {}\n",
                        self.call_open
                    ),
                    Marker::Token(_) => format!("body: TEXT | TEXT {} call\n", self.call_open),
                };
                before + &text + &self.hermes_call_grammar(tools, true)
            }
            Constraint::NoToolCalls(markers) => {
                let any: Vec<String> = markers.iter().map(|m| regex_literal(m)).collect();
                format!(
                    "body: FREE\nFREE: /(?s:.*)/ & ~/(?s:.*)({})(?s:.*)/\n",
                    any.join("|")
                )
            }
        };
        let start = match reasoning {
            None => "start: body\n".to_string(),
            // Lazy: the block ends at the first end marker.
            Some(r) if matches!(r.close, Marker::Bytes(_)) => format!(
                "start: reasoning /[ \\t\\r\\n]*/ body\nreasoning[lazy]: REASONING {}\nREASONING: /(?s:.*)/\n",
                r.close
            ),
            // A token is never part of text: the block runs to it.
            Some(r) => format!(
                "start: REASONING {} /[ \\t\\r\\n]*/ body\nREASONING: /(?s:.*)/\n",
                r.close
            ),
        };
        start + &body
    }

    /// Lark rules for one hermes-format call of any of `tools`: rule
    /// `body` for the whole call, or rule `call` for what follows the open
    /// marker.
    fn hermes_call_grammar(&self, tools: &[ToolSpec], after_open: bool) -> String {
        let calls: Vec<Value> = tools
            .iter()
            .map(|t| {
                json!({
                    "type": "object",
                    "properties": {
                        "name": {"const": t.name},
                        "arguments": t.parameters,
                    },
                    "required": ["name", "arguments"],
                    "additionalProperties": false
                })
            })
            .collect();
        let schema = compact(json!({"anyOf": calls}));
        let call = format!(
            "call: \"\\n\" args \"\\n\" {}\nargs: %json {schema}\n",
            self.call_close
        );
        if after_open {
            call
        } else {
            format!("body: {} call\n{call}", self.call_open)
        }
    }
}

/// `text` as a regex matching itself, inside a Lark `/.../` literal.
fn regex_literal(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~/".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

const HERMES_OPEN: &str = "<tool_call>";
const HERMES_CLOSE: &str = "</tool_call>";

/// One request's grammar position.
pub struct GrammarState {
    matcher: Matcher,
}

impl GrammarState {
    /// Sets every token the grammar forbids here to -inf. Fails (with a
    /// message for the client) if the grammar allows nothing at all.
    pub fn apply_mask(&mut self, logits: &mut [f32]) -> std::result::Result<(), String> {
        let mask = self
            .matcher
            .compute_mask_or_eos()
            .map_err(|e| format!("grammar error: {e}"))?;
        if mask.is_zero() {
            return Err("the grammar constraint allows no token at this point".into());
        }
        // Usually few tokens are allowed: rebuild from those.
        let mut masked = vec![f32::NEG_INFINITY; logits.len()];
        mask.iter_set_entries(|id| {
            if let Some(&l) = logits.get(id) {
                masked[id] = l;
            }
        });
        logits.copy_from_slice(&masked);
        Ok(())
    }

    /// Advances past a sampled token.
    pub fn consume(&mut self, token: u32) -> std::result::Result<(), String> {
        self.matcher
            .consume_token(token)
            .map_err(|e| format!("grammar error: {e}"))
    }
}
