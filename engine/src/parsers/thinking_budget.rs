//! Thinking budget: how many tokens reasoning may take before the engine
//! forces the end-of-thinking marker so content follows.
//!
//! Without an explicit budget a request still gets one: reasoning may never
//! take the whole `max_tokens` (a thinking model asked a trivial question
//! with `max_tokens: 50` must still answer), so a quarter of `max_tokens`
//! (at least 16 tokens, at most half) is kept for content, after the end
//! of reasoning the engine writes when the budget is spent.

/// Counts reasoning tokens and says when to force the end of reasoning.
#[derive(Debug, Clone)]
pub struct ThinkingBudget {
    limit: usize,
    used: usize,
    forced: bool,
}

impl ThinkingBudget {
    /// The budget of a request: its own, else the server's, else none;
    /// always capped so content keeps its share of `max_tokens` after the
    /// `forced_close` tokens that end reasoning (they count as output).
    pub fn for_request(
        requested: Option<usize>,
        default: Option<usize>,
        max_tokens: usize,
        forced_close: usize,
    ) -> Self {
        let reserve = (max_tokens / 4).max(16).min(max_tokens / 2);
        let cap = max_tokens.saturating_sub(reserve + forced_close);
        let limit = requested.or(default).map_or(cap, |b| b.min(cap));
        ThinkingBudget {
            limit,
            used: 0,
            forced: false,
        }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Called before each token is chosen, with whether the output is
    /// inside reasoning: true (once) when the end must be forced now.
    pub fn must_end(&mut self, in_reasoning: bool) -> bool {
        if in_reasoning && !self.forced && self.used >= self.limit {
            self.forced = true;
            return true;
        }
        false
    }

    /// The model chose to end its turn inside reasoning: true (once) when
    /// the engine should end reasoning instead, so an answer follows.
    pub fn end_instead_of_stop(&mut self, in_reasoning: bool) -> bool {
        if in_reasoning && !self.forced {
            self.forced = true;
            return true;
        }
        false
    }

    /// Records a generated token that was part of reasoning.
    pub fn count_reasoning_token(&mut self) {
        self.used += 1;
    }

    pub fn reasoning_tokens(&self) -> usize {
        self.used
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parsers::{OutputConfig, OutputParser, ParsedDelta, ReasoningFormat};

    /// A scripted "model": it would reason forever; the budget ends it.
    #[test]
    fn forcing_ends_reasoning_at_the_budget_and_content_follows() {
        let mut config = OutputConfig::text(ReasoningFormat::Think);
        config.prompt_opens_reasoning = true;
        let mut parser = OutputParser::new(&config);
        let mut budget = ThinkingBudget::for_request(Some(5), None, 100, 3);
        let forced = ["\n", "</think>", "\n\n"];
        let mut queue: Vec<&str> = Vec::new();
        let (mut reasoning, mut content) = (String::new(), String::new());
        let mut step = 0;
        while step < 40 {
            if budget.must_end(parser.in_reasoning()) {
                queue.extend(forced.iter().rev());
            }
            let in_reasoning = parser.in_reasoning();
            let token = queue
                .pop()
                .unwrap_or(if in_reasoning { " hmm" } else { " answer" });
            if in_reasoning {
                budget.count_reasoning_token();
            }
            for d in parser.feed(token) {
                match d {
                    ParsedDelta::Reasoning(t) => reasoning.push_str(&t),
                    ParsedDelta::Content(t) => content.push_str(&t),
                    other => panic!("unexpected {other:?}"),
                }
            }
            step += 1;
        }
        assert_eq!(reasoning, "hmm hmm hmm hmm hmm\n");
        assert!(content.starts_with("answer answer"), "{content:?}");
        assert_eq!(
            budget.reasoning_tokens(),
            7,
            "5 reasoning + the forced newline and marker"
        );
    }

    #[test]
    fn content_keeps_a_share_of_max_tokens() {
        // 50: 16 kept for content, 3 for the forced end of reasoning.
        assert_eq!(ThinkingBudget::for_request(None, None, 50, 3).limit(), 31);
        assert_eq!(
            ThinkingBudget::for_request(Some(1000), None, 4096, 3).limit(),
            1000
        );
        assert_eq!(
            ThinkingBudget::for_request(None, Some(10), 4096, 3).limit(),
            10
        );
        assert_eq!(ThinkingBudget::for_request(None, None, 20, 3).limit(), 7);
        // max_tokens 4 (a JSON reply cut short): the end of reasoning at
        // once, and one token of content.
        assert_eq!(ThinkingBudget::for_request(None, None, 4, 3).limit(), 0);
    }
}
