//! Replies served under load, replayed one at a time after the level at
//! temperature 0 and compared: the isolation check that needs nothing of
//! the model. A reply that equals its replay, or leaves it only late
//! (batch jitter: another batch shape, another rounding), is its own. A
//! reply that leaves its replay early and follows another request's replay
//! instead is that request's text: cross-talk, a failure whatever the
//! server claims. A difference that matches no one is counted apart, and
//! is a failure only when the server claims batch invariance.

use serde::{Deserialize, Serialize};

use crate::bench::load::LevelRun;
use crate::bench::sample::{FailedCheck, Replayed, Sample};
use crate::server::Target;

/// Characters a reply must share with another request's replay before
/// that counts as following it (fewer is chance: a common opening).
const FOLLOWS: usize = 16;

/// Characters two texts share from their start.
fn common(a: &str, b: &str) -> usize {
    a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count()
}

/// Compares `loaded` with its own replay `alone` and the other compared
/// requests' replays (`(conversation, turn, replay)`).
pub fn classify(loaded: &str, alone: &str, others: &[(usize, usize, &str)]) -> Replayed {
    if loaded == alone {
        return Replayed::Same;
    }
    let at = common(loaded, alone);
    let best = others
        .iter()
        .filter(|(_, _, o)| *o != alone)
        .map(|(c, t, o)| (common(loaded, o), *c, *t))
        .max_by_key(|(shared, _, _)| *shared);
    if let Some((shared, conversation, turn)) = best {
        if shared >= FOLLOWS.min(loaded.chars().count()).max(1) && shared > 2 * at {
            return Replayed::CrossTalk {
                conversation,
                turn,
                shared,
                at,
            };
        }
    }
    let opening = FOLLOWS.min(alone.chars().count());
    if at >= opening {
        Replayed::LateDivergence { at }
    } else {
        Replayed::EarlyDivergence { at }
    }
}

/// The replay check of one level.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplayFigures {
    pub compared: usize,
    pub same: usize,
    pub late: usize,
    pub early: usize,
    pub cross_talk: usize,
    /// A difference of any kind is a failure (the server claims batch
    /// invariance).
    pub enforced: bool,
    /// Why the level was not replayed.
    pub not_run: Option<String>,
}

impl ReplayFigures {
    pub fn skipped(why: &str) -> ReplayFigures {
        ReplayFigures {
            not_run: Some(why.into()),
            ..Default::default()
        }
    }

    pub fn describe(&self) -> String {
        match &self.not_run {
            Some(why) => format!("not run ({why})"),
            None => format!(
                "{} compared: {} same, {} late divergence, {} early divergence, {} another's text{}",
                self.compared,
                self.same,
                self.late,
                self.early,
                self.cross_talk,
                if self.enforced {
                    " (any difference fails: batch invariance claimed)"
                } else {
                    ""
                }
            ),
        }
    }
}

/// Replays up to `n` served replies of `run` one at a time to `path`,
/// compares each, and fails cross-talk (and, when `enforce`, any
/// difference).
pub async fn replay(
    target: &Target,
    path: &str,
    run: &mut LevelRun,
    n: usize,
    enforce: bool,
) -> ReplayFigures {
    // Any served reply: one failing another check (a stream rule, say)
    // may still hold another request's text.
    let picks: Vec<usize> = (0..run.samples.len())
        .filter(|&k| run.samples[k].served() && run.bodies[k].is_object())
        .take(n)
        .collect();
    let mut alone: Vec<(usize, Sample)> = Vec::new();
    for k in picks {
        let ex = target.post(path, &run.bodies[k]).await;
        let replayed = Sample::of(&ex);
        if replayed.served() {
            alone.push((k, replayed));
        }
    }
    let mut figures = ReplayFigures {
        enforced: enforce,
        ..Default::default()
    };
    for (k, own) in &alone {
        let others: Vec<(usize, usize, &str)> = alone
            .iter()
            .filter(|(j, _)| j != k)
            .map(|(j, s)| {
                let o = &run.samples[*j];
                (o.conversation, o.turn, s.content.as_str())
            })
            .collect();
        let s = &mut run.samples[*k];
        let verdict = classify(&s.content, &own.content, &others);
        figures.compared += 1;
        match &verdict {
            Replayed::Same => figures.same += 1,
            Replayed::LateDivergence { .. } => figures.late += 1,
            Replayed::EarlyDivergence { .. } => figures.early += 1,
            Replayed::CrossTalk {
                conversation,
                turn,
                shared,
                at,
            } => {
                figures.cross_talk += 1;
                s.failed_checks.push(FailedCheck {
                    check: "replay".into(),
                    detail: format!(
                        "the reply leaves its own replay after {at} characters and follows \
                         conversation {conversation} turn {turn}'s for {shared}: another \
                         request's text"
                    ),
                });
            }
        }
        if enforce && verdict != Replayed::Same {
            s.failed_checks.push(FailedCheck {
                check: "alone".into(),
                detail: format!(
                    "under load {:?}; alone {:?}",
                    clip(&s.content),
                    clip(&own.content)
                ),
            });
        }
        s.replay = Some(verdict);
    }
    figures
}

fn clip(s: &str) -> String {
    s.chars().take(120).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_requests_text_is_cross_talk_and_jitter_is_not() {
        let a = "amber basil cedar delta ember fjord garnet";
        let b = "onyx pebble quartz raven saffron tundra umber";
        let others = [(1, 0, b)];
        assert_eq!(classify(a, a, &others), Replayed::Same);
        // Batch jitter: the same opening, a late turn.
        let jitter = "amber basil cedar delta maple nectar";
        assert!(matches!(
            classify(jitter, a, &others),
            Replayed::LateDivergence { at: 24 }
        ));
        // Conversation 1's text in conversation 0's reply.
        assert!(matches!(
            classify(b, a, &others),
            Replayed::CrossTalk {
                conversation: 1,
                turn: 0,
                ..
            }
        ));
        // Different from the start, but no one's text: counted apart.
        assert!(matches!(
            classify("willow xenon yarrow zephyr", a, &others),
            Replayed::EarlyDivergence { at: 0 }
        ));
        // Two prompts that get the same text alone cannot be told apart.
        assert!(matches!(
            classify(a, b, &[(1, 0, b)]),
            Replayed::EarlyDivergence { .. }
        ));
    }
}
